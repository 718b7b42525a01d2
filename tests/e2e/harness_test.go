//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timed-project/timed/deploy/compose"
	"github.com/timed-project/timed/tests/internal/figures"
	"github.com/timed-project/timed/timed/control"
)

// The timers every daemon runs with (compose.SyncInterval etc.) and the
// fast profile's (election.FastConfig) that the bounds below derive from.
const (
	syncInterval  = compose.SyncInterval       // 1 s
	electionMin   = compose.ElectionTimeoutMin // 2 s
	electionMax   = compose.ElectionTimeoutMax // 4 s
	retransmit    = 620 * time.Millisecond     // fast profile: 20+40+80+160+320 ms to a failed reliable send
	candidateWait = 100 * time.Millisecond     // fast profile
	resolveRounds = 3                          // RESOLVE rounds of a master in conflict

	// slack covers what the protocol does not: docker starting containers
	// and `docker exec` answering on a loaded 2-core machine (one poll of
	// every host takes 0.1–0.5 s), and Go's scheduler there.
	slack = 3 * time.Second

	// electionBound is how long slaves take to replace a master that
	// vanished: the last ADJTIME restarts each slave's election timer,
	// drawn from [electionMin, electionMax]; the first to fire is a
	// candidate and is master after candidateWait plus the retransmits of
	// the last ACCEPT. One collision of two candidates doubles the range
	// (backoff) once: another electionMin + 2·(electionMax−electionMin).
	electionBound = electionMax + (electionMin + 2*(electionMax-electionMin)) + 2*(candidateWait+retransmit) + slack // 14.44 s

	// coldStartBound is how long five daemons started together take to
	// settle on one master with every other its slave: a starting daemon
	// polls for a master (MASTERREQ, retransmit), finds none and is master
	// after the no-master wait; daemons that did so at once resolve the
	// conflict (at most resolveRounds·retransmit), and if that leaves no
	// master the slaves elect one (electionBound); the containers come up
	// within `slack` of each other.
	coldStartBound = retransmit + candidateWait + resolveRounds*retransmit + electionBound + slack // 20.02 s

	// healBound: after a partition heals, each master's LOOP (broadcast
	// every round) reaches the other within one syncInterval, and the one
	// that hears it first settles the conflict at once (a few packets on a
	// loss-free bridge: milliseconds). The stated margin, 1 s, is for the
	// poll that has to see it (one `docker exec` of every host) and the
	// loaded machine.
	healBound = syncInterval + time.Second // 2 s

	// slavesBound: after one master is left, the last of the other side's
	// daemons becomes its slave: at worst through its own election timer.
	slavesBound = electionBound

	// convergeBound is the largest pairwise clock offset allowed once the
	// clocks have converged on a loss-free bridge. Each slave is measured
	// by the probe with an error of at most half the round trip's
	// asymmetry (bridge round trips stay below 2 ms even with the machine
	// loaded: 1 ms each); corrections below 500 µs (what adjtime slews in a
	// 1 s round) are slewed, so a clock can be up to 500 µs from where the
	// last round put it; relative drifts of at most 80 ppm add 80 µs per
	// round. Pairwise: 2·(1 ms + 0.5 ms) + 0.08 ms ≈ 3.1 ms; stated: 5 ms.
	convergeBound = 5 * time.Millisecond
	// convergeTime: the first round steps every clock (offsets up to 2 s
	// are far above the slew limit); allow ten rounds for stragglers.
	convergeTime = 10*syncInterval + slack

	// lossyConvergeBound: with 20% loss and up to 10 ms one-way delay
	// (5 ms ± 5 ms jitter) a measurement's error is at most half the
	// largest asymmetry, 5 ms, instead of 1 ms: 2·(5 + 0.5) + 0.08 ≈ 11 ms;
	// stated: 15 ms. Lost probes and ADJTIMEs only delay rounds.
	lossyConvergeBound = 15 * time.Millisecond
)

var (
	image = envOr("TIMED_IMAGE", "timed-e2e:latest")
	// run names this run's compose projects and labels every container
	// and network it creates, so parallel or leftover runs never collide
	// and `make e2e` can remove whatever a crashed run left.
	run = envOr("TIMED_E2E_RUN", "")
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestMain(m *testing.M) {
	if run == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		run = "e2e" + hex.EncodeToString(b)
	}
	if err := exec.Command("docker", "info").Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: no Docker engine reachable (docker info: %v)\n", err)
		os.Exit(1)
	}
	if out, err := exec.Command("docker", "image", "inspect", image).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: image %s missing (make e2e builds it): %v: %s\n", image, err, out)
		os.Exit(1)
	}
	code := m.Run()
	if err := figs.Write(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: figures:", err)
	}
	os.Exit(code)
}

// ---- figures ----

// figs is the table of measured figures printed at the end.
var figs figures.Table

// report records a measured figure for the table printed at the end. The
// figures are reported, not asserted.
func report(t *testing.T, name, format string, args ...any) {
	t.Helper()
	figs.Report(t, name, format, args...)
}

// ---- commands ----

// command runs name with args, bounded by timeout, and returns stdout; the
// error carries stderr.
func command(timeout time.Duration, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// ---- the cluster ----

// cluster is one compose project: its bridge networks and containers.
type cluster struct {
	t       *testing.T
	project string
	file    string
	spec    compose.Spec
	// subnets are the networks' subnets, by the spec's names, as docker
	// assigned them (read once the networks exist).
	subnets map[string]netip.Prefix
	mu      sync.Mutex
	ids     map[string]string // service → container id
}

var projectSeq struct {
	sync.Mutex
	n int
}

// newCluster writes the compose file for spec and creates (but does not
// start) its network and containers; Cleanup removes them all, logging the
// daemons' output first when the test failed.
func newCluster(t *testing.T, spec compose.Spec) *cluster {
	t.Helper()
	projectSeq.Lock()
	projectSeq.n++
	n := projectSeq.n
	projectSeq.Unlock()
	spec.Image, spec.Run = image, run
	if err := spec.Check(); err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, project: fmt.Sprintf("timed%s%d", run, n), spec: spec, ids: map[string]string{}}
	c.file = filepath.Join(t.TempDir(), "docker-compose.yml")
	if err := os.WriteFile(c.file, compose.Generate(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.down)
	if _, err := c.compose(2*time.Minute, "up", "--no-start"); err != nil {
		t.Fatal(err)
	}
	c.readSubnets()
	return c
}

func (c *cluster) compose(timeout time.Duration, args ...string) (string, error) {
	return command(timeout, nil, "docker-compose", append([]string{"-p", c.project, "-f", c.file}, args...)...)
}

func (c *cluster) down() {
	if c.t.Failed() {
		if out, err := c.compose(time.Minute, "logs", "--no-color", "--tail", "300"); err == nil {
			c.t.Logf("---- logs of %s ----\n%s", c.project, out)
		}
	}
	if _, err := c.compose(2*time.Minute, "down", "-v", "--remove-orphans", "-t", "2"); err != nil {
		c.t.Errorf("tear down %s: %v", c.project, err)
	}
}

// start starts the named services (all when none is named).
func (c *cluster) start(services ...string) time.Time {
	c.t.Helper()
	if _, err := c.compose(2*time.Minute, append([]string{"start"}, services...)...); err != nil {
		c.t.Fatal(err)
	}
	return time.Now()
}

// names are the hosts running timed (not the witnesses).
func (c *cluster) names() []string {
	var out []string
	for _, h := range c.spec.Hosts {
		if !h.Witness {
			out = append(out, h.Name)
		}
	}
	return out
}

func (c *cluster) id(service string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id := c.ids[service]; id != "" {
		return id, nil
	}
	out, err := command(30*time.Second, nil, "docker", "ps", "-aq",
		"--filter", "label=com.docker.compose.project="+c.project,
		"--filter", "label=com.docker.compose.service="+service)
	if err != nil {
		return "", fmt.Errorf("container of %s: %w", service, err)
	}
	id := strings.TrimSpace(out)
	if id == "" || strings.Contains(id, "\n") {
		return "", fmt.Errorf("container of %s: docker ps found %q", service, id)
	}
	c.ids[service] = id
	return id, nil
}

// exec runs a command in the service's container.
func (c *cluster) exec(timeout time.Duration, service string, args ...string) (string, error) {
	id, err := c.id(service)
	if err != nil {
		return "", err
	}
	out, err := command(timeout, nil, "docker", append([]string{"exec", id}, args...)...)
	if err != nil {
		return out, fmt.Errorf("on %s: %w", service, err)
	}
	return out, nil
}

// timedc runs timedc in the service's container.
func (c *cluster) timedc(service string, args ...string) (string, error) {
	return c.exec(30*time.Second, service, append([]string{"/timedc"}, args...)...)
}

// msiteAnswer is one host's answer in `timedc --json msite`.
type msiteAnswer struct{ Host, Master, Error string }

// msite asks, from the service's container, who the master of each target
// is (timedc msite): the target's daemon answers, a slave after asking
// its master. A host that did not answer has its Error set.
func (c *cluster) msite(from string, targets ...string) ([]msiteAnswer, error) {
	out, err := c.timedc(from, append([]string{"--json", "--timeout", "5s", "msite"}, targets...)...)
	var answers []msiteAnswer
	if jerr := json.Unmarshal([]byte(out), &answers); jerr != nil || len(answers) != len(targets) {
		return nil, fmt.Errorf("msite --json from %s: %w", from, errors.Join(err, jerr, fmt.Errorf("output %q", out)))
	}
	return answers, nil
}

func (c *cluster) inspect(service, format string) (string, error) {
	id, err := c.id(service)
	if err != nil {
		return "", err
	}
	out, err := command(30*time.Second, nil, "docker", "inspect", "-f", format, id)
	if err != nil {
		return "", fmt.Errorf("inspect %s: %w", service, err)
	}
	return strings.TrimSpace(out), nil
}

// ip is the service's address on its first network (the only one but
// for a gateway's).
func (c *cluster) ip(service string) string {
	c.t.Helper()
	return c.ipOn(service, c.hostNetworks(service)[0])
}

// bridge is the host side of the cluster's first network (the only one
// but in a site of several): its Linux bridge.
func (c *cluster) bridge() string {
	c.t.Helper()
	return c.bridgeOf(c.spec.AllNetworks()[0].Name)
}

// netns runs a command in the service's network namespace (from the host:
// the containers themselves have no NET_ADMIN).
func (c *cluster) netns(service string, args ...string) error {
	_, err := c.netnsOutput(service, args...)
	return err
}

// netnsOutput is netns returning the command's output.
func (c *cluster) netnsOutput(service string, args ...string) (string, error) {
	pid, err := c.inspect(service, "{{.State.Pid}}")
	if err != nil {
		return "", err
	}
	if pid == "" || pid == "0" {
		return "", fmt.Errorf("%s is not running", service)
	}
	out, err := command(30*time.Second, nil, "nsenter", append([]string{"-t", pid, "-n"}, args...)...)
	if err != nil {
		return out, fmt.Errorf("in the network namespace of %s: %w", service, err)
	}
	return out, nil
}

// netnsInput is netns with stdin.
func (c *cluster) netnsInput(service, stdin string, args ...string) error {
	pid, err := c.inspect(service, "{{.State.Pid}}")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", pid, "-n"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("in the network namespace of %s: %s: %w: %s", service, strings.Join(args, " "), err, out)
	}
	return nil
}

// kill sends SIGKILL to the service's container (docker kill).
func (c *cluster) kill(service string) {
	c.t.Helper()
	id, err := c.id(service)
	if err == nil {
		_, err = command(time.Minute, nil, "docker", "kill", id)
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

// ---- status ----

func (c *cluster) status(service string) (*control.Status, error) {
	var st control.Status
	return &st, c.statusInto(service, &st)
}

// statusInto decodes the service's `timedc --json status` into v.
func (c *cluster) statusInto(service string, v any) error {
	out, err := c.timedc(service, "--json", "--timeout", "3s", "status")
	if err != nil {
		return err
	}
	// timedc's JSON is an array of answers, one here (docs/operating.md, "timedc's JSON").
	var answers []json.RawMessage
	if err := json.Unmarshal([]byte(out), &answers); err != nil || len(answers) != 1 {
		return fmt.Errorf("status of %s: want one answer: %v: %q", service, err, out)
	}
	if err := json.Unmarshal(answers[0], v); err != nil {
		return fmt.Errorf("status of %s: %w: %q", service, err, out)
	}
	return nil
}

// statuses asks every named host at once (default: every timed host).
func (c *cluster) statuses(names ...string) (map[string]*control.Status, error) {
	return askAll(c, names, c.status)
}

// askAll runs ask for every named host at once (default: every timed
// host) and collects the answers by host.
func askAll[T any](c *cluster, names []string, ask func(string) (T, error)) (map[string]T, error) {
	if len(names) == 0 {
		names = c.names()
	}
	type res struct {
		name string
		v    T
		err  error
	}
	ch := make(chan res, len(names))
	for _, n := range names {
		go func() {
			v, err := ask(n)
			ch <- res{n, v, err}
		}()
	}
	out := map[string]T{}
	var errs []error
	for range names {
		r := <-ch
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		out[r.name] = r.v
	}
	return out, errors.Join(errs...)
}

// await polls cond until it holds or bound passes, and returns how long
// it took. The cluster changes state on its own timers and there is no
// event stream to subscribe to, so polling against a bound derived from
// those timers is the honest wait.
func (c *cluster) await(what string, bound time.Duration, cond func() (bool, string)) time.Duration {
	c.t.Helper()
	start := time.Now()
	deadline := start.Add(bound)
	why := ""
	for {
		var ok bool
		if ok, why = cond(); ok {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.t.Fatalf("%s: not within %v: %s", what, bound, why)
	return 0
}

// oneMaster checks that exactly one of the named hosts is master and
// every other one is its slave; it returns the master.
func oneMaster(st map[string]*control.Status) (string, string) {
	var masters []string
	for n, s := range st {
		if s.State == "master" {
			masters = append(masters, n)
		}
	}
	sort.Strings(masters)
	switch {
	case len(masters) == 0:
		return "", "no master: " + describe(st)
	case len(masters) > 1:
		return "", fmt.Sprintf("%d masters %v: %s", len(masters), masters, describe(st))
	}
	m := masters[0]
	for n, s := range st {
		if n != m && (s.State != "slave" || s.Master == nil || s.Master.Name != m) {
			return "", fmt.Sprintf("%s is not a slave of %s: %s", n, m, describe(st))
		}
	}
	return m, ""
}

// masters lists the hosts in state master.
func masters(st map[string]*control.Status) []string {
	var out []string
	for n, s := range st {
		if s.State == "master" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func describe(st map[string]*control.Status) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(st)) {
		s := st[n]
		m := "-"
		if s.Master != nil {
			m = s.Master.Name
		}
		parts = append(parts, fmt.Sprintf("%s=%s(master %s, offset %+.6fs)", n, s.State, m, s.OffsetSecs))
	}
	return strings.Join(parts, " ")
}

// awaitOneMaster waits until the named hosts (default: all) have exactly
// one master and it leads all the others; it returns the master and the
// time taken.
func (c *cluster) awaitOneMaster(bound time.Duration, names ...string) (string, time.Duration) {
	c.t.Helper()
	var master string
	took := c.await("one master, every other host its slave", bound, func() (bool, string) {
		st, err := c.statuses(names...)
		if err != nil {
			return false, err.Error()
		}
		var why string
		master, why = oneMaster(st)
		return master != "", why
	})
	return master, took
}

// spread is the largest pairwise difference of the hosts' clocks.
func spread(st map[string]*control.Status) time.Duration {
	lo, hi := 1e9, -1e9
	for _, s := range st {
		lo, hi = min(lo, s.OffsetSecs), max(hi, s.OffsetSecs)
	}
	return time.Duration((hi - lo) * 1e9)
}

// awaitConverged waits until the named hosts' clocks are within bound of
// each other; it returns the spread it saw and the time taken.
func (c *cluster) awaitConverged(bound, within time.Duration, names ...string) (time.Duration, time.Duration) {
	c.t.Helper()
	var sp time.Duration
	took := c.await(fmt.Sprintf("clocks within %v", bound), within, func() (bool, string) {
		st, err := c.statuses(names...)
		if err != nil {
			return false, err.Error()
		}
		sp = spread(st)
		return sp < bound, fmt.Sprintf("largest pairwise offset %v: %s", sp, describe(st))
	})
	return sp, took
}

// watch checks safety for a while: at no poll more than one master among
// the named hosts, and (when leader is set) that one stays the master. It
// returns the largest spread of the clocks it saw. The duration is the
// observation window of the assertion, not a synchronisation.
func (c *cluster) watch(d time.Duration, leader string, names ...string) time.Duration {
	c.t.Helper()
	var worst time.Duration
	for end := time.Now().Add(d); time.Now().Before(end); {
		st, err := c.statuses(names...)
		if err != nil {
			c.t.Fatal(err)
		}
		if ms := masters(st); len(ms) > 1 || (leader != "" && (len(ms) != 1 || ms[0] != leader)) {
			c.t.Fatalf("safety: masters %v, expected only %q: %s", ms, leader, describe(st))
		}
		worst = max(worst, spread(st))
		time.Sleep(200 * time.Millisecond)
	}
	return worst
}

// messages sums the packets every named host sent, by type.
func (c *cluster) messages(names ...string) (map[string]uint64, uint64) {
	c.t.Helper()
	st, err := c.statuses(names...)
	if err != nil {
		c.t.Fatal(err)
	}
	byType := map[string]uint64{}
	var total uint64
	for _, s := range st {
		for k, v := range s.Packets {
			byType[k] += v.Tx
			total += v.Tx
		}
	}
	return byType, total
}

func formatCounts(m map[string]uint64) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v > 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// reportMessages records how many packets the named hosts (default: all)
// sent.
func (c *cluster) reportMessages(t *testing.T, names ...string) {
	byType, total := c.messages(names...)
	report(t, "messages sent", "%d (%s)", total, formatCounts(byType))
}

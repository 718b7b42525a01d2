package tests

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/timed-project/timed/timed/control"
)

// Binaries built once for the package by TestMain.
var timedBin, timedcBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "timed-bin")
	if err == nil {
		err = os.Chmod(dir, 0o755) // TestPrivilegeErrors runs them as nobody
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	timedBin, timedcBin = filepath.Join(dir, "timed"), filepath.Join(dir, "timedc")
	for bin, pkg := range map[string]string{timedBin: "../cmd/timed", timedcBin: "../cmd/timedc"} {
		cmd := exec.Command("go", "build", "-race", "-o", bin, pkg)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// The tests run in parallel, two at a time (-parallel defaults to the
// two cores): each cluster spends most of its time waiting on its timers.
// TestFlood alone stays sequential (it runs first, by itself), since it
// loads the machine on purpose.

// Timers for the integration tests: BSD's protocol scaled down so that an
// election takes seconds. The bounds the tests wait for derive from these.
const (
	syncInterval = time.Second
	electionMin  = 2 * time.Second
	electionMax  = 4 * time.Second
)

// electionBound is how long the cluster may take to settle on one master:
// the start-up probe (5 copies, 20…320 ms = 0.62 s), an election timer
// (at most electionMax, or twice it after one collision's backoff), the
// candidate wait, and margin for a loaded machine.
const electionBound = 620*time.Millisecond + 2*electionMax + 100*time.Millisecond + 10*time.Second

// node is one timed process.
type node struct {
	name, dir string
	port      int
	args      []string
	cmd       *exec.Cmd
	log       *bytes.Buffer
	done      chan struct{} // closed when the process has exited
	mu        sync.Mutex
}

type cluster struct {
	t     *testing.T
	bin   string // the timed binary the nodes run
	nodes []*node
	peers string
}

// freePorts finds n UDP ports free on loopback.
func freePorts(t *testing.T, n int) []int {
	var ports []int
	var conns []*net.UDPConn
	for range n {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		ports = append(ports, c.LocalAddr().(*net.UDPAddr).Port)
	}
	for _, c := range conns {
		c.Close()
	}
	return ports
}

// freeTCPAddr finds a TCP address free on loopback (for --metrics-listen).
func freeTCPAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// newCluster starts n daemons in peers mode on loopback, each on a
// simulated clock offset by offsets[i] (none touches the real clock).
func newCluster(t *testing.T, offsets []time.Duration, extra func(i int) []string) *cluster {
	t.Helper()
	return newClusterPeers(t, offsets, func(i int, _ string) []string {
		if extra == nil {
			return nil
		}
		return extra(i)
	})
}

// newClusterPeers is newCluster whose extra arguments may name the peer
// list (host:port of every node), e.g. to trust them.
func newClusterPeers(t *testing.T, offsets []time.Duration, extra func(i int, peers string) []string) *cluster {
	t.Helper()
	return newClusterOf(t, timedBin, offsets, extra)
}

// newClusterOf is newClusterPeers running bin instead of the race-built
// timedBin (the flood test measures memory, which -race multiplies).
func newClusterOf(t *testing.T, bin string, offsets []time.Duration, extra func(i int, peers string) []string) *cluster {
	t.Helper()
	return newClusterAt(t, bin, netip.MustParseAddr("127.0.0.1"), offsets, extra)
}

// newClusterAt is newClusterOf with the peers on loopback address lo:
// 127.0.0.1 or ::1.
func newClusterAt(t *testing.T, bin string, lo netip.Addr, offsets []time.Duration, extra func(i int, peers string) []string) *cluster {
	t.Helper()
	ports := freePorts(t, len(offsets))
	var peers []string
	for _, p := range ports {
		peers = append(peers, netip.AddrPortFrom(lo, uint16(p)).String())
	}
	c := &cluster{t: t, bin: bin, peers: strings.Join(peers, ",")}
	dir := t.TempDir()
	for i, off := range offsets {
		n := &node{name: fmt.Sprintf("n%d", i+1), dir: dir, port: ports[i]}
		n.args = []string{"--profile", "fast", "--port", strconv.Itoa(n.port), "--hostname", n.name,
			"--peers", c.peers, "--clock", fmt.Sprintf("sim:offset=%+dus,drift=%+dppm", off.Microseconds(), 10*(i%5)-20),
			"--control-socket", n.socket(), "--log-level", "debug",
			"--sync-interval", syncInterval.String(), "--election-timeout-min", electionMin.String(),
			"--election-timeout-max", electionMax.String()}
		n.args = append(n.args, extra(i, c.peers)...)
		c.nodes = append(c.nodes, n)
		c.start(n)
	}
	t.Cleanup(c.stopAll)
	return c
}

// stopAll kills every node and, when the test failed, logs their output.
func (c *cluster) stopAll() {
	for _, n := range c.nodes {
		c.kill(n, syscall.SIGKILL)
	}
	if c.t.Failed() {
		for _, n := range c.nodes {
			n.mu.Lock()
			c.t.Logf("---- log of %s ----\n%s", n.name, n.log.String())
			n.mu.Unlock()
		}
	}
}

func (n *node) socket() string { return filepath.Join(n.dir, n.name+".sock") }

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (c *cluster) start(n *node) {
	c.t.Helper()
	n.mu.Lock()
	if n.log == nil {
		n.log = &bytes.Buffer{}
	}
	fmt.Fprintf(n.log, "==== start %s\n", strings.Join(n.args, " "))
	n.mu.Unlock()
	n.cmd = exec.Command(c.bin, n.args...)
	// The daemons are built with -race, whose runtime sleeps a second at
	// exit by default; that would hide how fast the daemon itself stops.
	n.cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0 halt_on_error=1")
	n.cmd.Stdout = lockedWriter{&n.mu, n.log}
	n.cmd.Stderr = lockedWriter{&n.mu, n.log}
	if err := n.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	n.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(n.cmd, n.done)
}

// kill signals the process and waits for it to exit.
func (c *cluster) kill(n *node, sig syscall.Signal) {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	select {
	case <-n.done:
		return
	default:
	}
	_ = n.cmd.Process.Signal(sig)
	<-n.done
}

func (c *cluster) status(n *node) (*control.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := control.Call(ctx, n.socket(), control.Request{Cmd: control.CmdStatus})
	if err != nil {
		return nil, err
	}
	return resp.Status, nil
}

// statuses asks every running node; a node that does not answer is an
// error unless skip names it.
func (c *cluster) statuses(skip ...*node) (map[*node]*control.Status, error) {
	out := map[*node]*control.Status{}
next:
	for _, n := range c.nodes {
		for _, s := range skip {
			if s == n {
				continue next
			}
		}
		st, err := c.status(n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.name, err)
		}
		out[n] = st
	}
	return out, nil
}

// await polls cond every 100 ms until it holds or bound passes. The
// cluster's state changes on its own timers and there is no event to
// subscribe to, so polling with a bound derived from those timers is the
// honest wait here.
func (c *cluster) await(what string, bound time.Duration, cond func() (bool, string)) {
	c.t.Helper()
	deadline := time.Now().Add(bound)
	why := ""
	for time.Now().Before(deadline) {
		var ok bool
		if ok, why = cond(); ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("%s: not within %v: %s", what, bound, why)
}

// oneMaster: exactly one master among the nodes asked, every other node
// its slave. It returns the master.
func (c *cluster) oneMaster(skip ...*node) (*node, string) {
	st, err := c.statuses(skip...)
	if err != nil {
		return nil, err.Error()
	}
	var master *node
	for n, s := range st {
		if s.State == "master" {
			if master != nil {
				return nil, fmt.Sprintf("two masters: %s and %s", master.name, n.name)
			}
			master = n
		}
	}
	if master == nil {
		return nil, "no master: " + describe(st)
	}
	for n, s := range st {
		if n != master && (s.State != "slave" || s.Master == nil || s.Master.Name != master.name) {
			return nil, fmt.Sprintf("%s is %s, not a slave of %s: %s", n.name, s.State, master.name, describe(st))
		}
	}
	// Following is not enough: a slave that followed a MASTERUP is listed
	// when its SLAVEUP arrives, and until then the master's SETDATE or
	// first round leaves it out.
	listed := map[string]bool{}
	for _, sl := range st[master].Slaves {
		listed[sl.Name] = true
	}
	for n := range st {
		if n != master && !listed[n.name] {
			return nil, fmt.Sprintf("%s follows %s but is not on its list yet", n.name, master.name)
		}
	}
	return master, ""
}

func describe(st map[*node]*control.Status) string {
	var parts []string
	for n, s := range st {
		m := "-"
		if s.Master != nil {
			m = s.Master.Name
		}
		parts = append(parts, fmt.Sprintf("%s=%s(master %s)", n.name, s.State, m))
	}
	return strings.Join(parts, " ")
}

func (c *cluster) awaitOneMaster(skip ...*node) *node {
	c.t.Helper()
	var master *node
	c.await("one master", electionBound, func() (bool, string) {
		m, why := c.oneMaster(skip...)
		master = m
		return m != nil, why
	})
	return master
}

// timedc runs the admin tool and returns its stdout.
func timedc(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(timedcBin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("timedc %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// spreadBelow: the cluster's clocks are within bound of each other.
func spreadBelow(c *cluster, bound time.Duration) (bool, string) {
	st, err := c.statuses()
	if err != nil {
		return false, err.Error()
	}
	lo, hi := 1e9, -1e9
	for _, s := range st {
		lo, hi = min(lo, s.OffsetSecs), max(hi, s.OffsetSecs)
	}
	spread := time.Duration((hi - lo) * 1e9)
	return spread < bound, fmt.Sprintf("largest pairwise offset %v", spread)
}

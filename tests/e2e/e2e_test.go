//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timed-project/timed/deploy/compose"
	"github.com/timed-project/timed/tests/internal/clockdiff"
	"github.com/timed-project/timed/timed/control"
	"github.com/timed-project/timed/tsp"
)

// TestColdStart: the five hosts of deploy/docker-compose.yml, started
// together, settle on exactly one master that every other host follows;
// their clocks (±2 s apart, ±40 ppm) converge; tcpdump on the bridge
// decodes what crossed it as the TSP types the daemons say they sent.
func TestColdStart(t *testing.T) {
	c := newCluster(t, compose.Default(5))
	cp := c.startCapture()
	start := c.start()

	master, _ := c.awaitOneMaster(coldStartBound)
	report(t, "time to one master (from start)", "%v (bound %v)", time.Since(start).Round(time.Millisecond), coldStartBound)
	report(t, "master", "%s", master)

	sp, took := c.awaitConverged(convergeBound, convergeTime)
	report(t, "time to converge (after one master)", "%v (bound %v)", took.Round(time.Millisecond), convergeTime)
	report(t, "largest pairwise offset, converged", "%v (bound %v)", sp, convergeBound)
	worst := c.watch(3*syncInterval, master)
	report(t, "largest pairwise offset over 3 more rounds", "%v", worst)
	if worst >= convergeBound {
		t.Errorf("clocks drifted apart after converging: %v ≥ %v", worst, convergeBound)
	}

	// What the daemons sent before the capture ends must all be on the
	// wire, and what is on the wire no more than they sent by the time it
	// ended: before ≤ captured ≤ after, per TSP type.
	before, _ := c.messages()
	cp.stop()
	after, _ := c.messages()
	captured, text, err := cp.decode()
	if err != nil {
		t.Fatal(err)
	}
	checkDecoded(t, before, after, captured, text)
	c.reportMessages(t)
}

// checkDecoded compares tcpdump's decoding with the daemons' counters.
// Our daemons' own probe travels as version-2 packets with types BSD does
// not know: tcpdump names their type numbers, and they are counted apart.
func checkDecoded(t *testing.T, before, after, captured map[string]uint64, text string) {
	t.Helper()
	var v1 uint64
	for name, n := range captured {
		if strings.HasSuffix(name, " v1") {
			v1 += n
		}
	}
	if v1 == 0 {
		t.Fatalf("tcpdump decoded no TSP packet:\n%s", firstLines(text, 40))
	}
	types := map[string]bool{}
	for k := range before {
		types[k] = true
	}
	for k := range after {
		types[k] = true
	}
	checked := 0
	for typ := range types {
		if !tspTypes[typ] {
			continue // extension kinds: not TSP types tcpdump can name
		}
		got := captured[typ+" v1"]
		if got < before[typ] || got > after[typ] {
			t.Errorf("%s: tcpdump decoded %d, the daemons sent %d before the capture ended and %d after", typ, got, before[typ], after[typ])
		}
		checked++
	}
	for name, n := range captured {
		if typ, ok := strings.CutSuffix(name, " v1"); ok && !types[typ] {
			t.Errorf("tcpdump decoded %d %s, which no daemon sent", n, typ)
		}
	}
	// Version-2 packets carry our extension kind where TSP has its type;
	// tcpdump does not check the version and, as the kinds are numbered
	// from 0x80, prints them as unknown types. Their counts must match the
	// daemons' too.
	for kind, shown := range extAsTSP {
		got := captured[shown+" v2"]
		if got < before[kind] || got > after[kind] {
			t.Errorf("%s (decoded as %s vers 2): tcpdump decoded %d, the daemons sent %d before the capture ended and %d after",
				kind, shown, got, before[kind], after[kind])
		}
	}
	if t.Failed() {
		t.Logf("tcpdump (%d lines):\n%s", strings.Count(text, "\n"), firstLines(text, 60))
	}
	report(t, "TSP packets decoded by tcpdump", "%d version-1 packets of %d types (%s), and version 2 (our extensions, unknown types to tcpdump): %s; all matching the daemons' counters",
		v1, checked, formatCounts(onlyV1(captured)), formatCounts(notV1(captured)))
}

var tspTypes = map[string]bool{}

// extAsTSP: our extension kinds (tsp.ExtKind) and what tcpdump prints for
// their numbers, which no TSP type uses.
var extAsTSP = map[string]string{}

func init() {
	for _, k := range []tsp.ExtKind{tsp.ExtProbe, tsp.ExtProbeReply, tsp.ExtRing, tsp.ExtRingCtl} {
		extAsTSP[k.String()] = fmt.Sprintf("tsp_type %#x", uint8(k))
	}
}

func init() {
	for _, n := range []string{"ANY", "ADJTIME", "ACK", "MASTERREQ", "MASTERACK", "SETTIME", "MASTERUP", "SLAVEUP",
		"ELECTION", "ACCEPT", "REFUSE", "CONFLICT", "RESOLVE", "QUIT", "DATE", "DATEREQ", "DATEACK", "TRACEON",
		"TRACEOFF", "MSITE", "MSITEREQ", "TEST", "SETDATE", "SETDATEREQ", "LOOP"} {
		tspTypes[n] = true
	}
}

func onlyV1(m map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if t, ok := strings.CutSuffix(k, " v1"); ok {
			out[t] = v
		}
	}
	return out
}

func notV1(m map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if !strings.HasSuffix(k, " v1") {
			out[k] = v
		}
	}
	return out
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// TestMasterKilled: docker kill of the master; the others elect a new
// one within electionBound; the old one, restarted, rejoins as a slave and
// is never a second master.
func TestMasterKilled(t *testing.T) {
	c := newCluster(t, compose.Default(5))
	c.start()
	old, _ := c.awaitOneMaster(coldStartBound)
	rest := slices.DeleteFunc(c.names(), func(n string) bool { return n == old })

	c.kill(old)
	killed := time.Now()
	next, _ := c.awaitOneMaster(electionBound, rest...)
	report(t, "time to a new master after docker kill", "%v (bound %v)", time.Since(killed).Round(time.Millisecond), electionBound)
	if next == old {
		t.Fatalf("%s, killed, is still the master", old)
	}

	c.start(old)
	restarted := time.Now()
	c.await(old+" rejoins as a slave of "+next, electionBound, func() (bool, string) {
		st, err := c.statuses()
		if err != nil {
			return false, err.Error()
		}
		if ms := masters(st); len(ms) > 1 || (len(ms) == 1 && ms[0] != next) {
			t.Fatalf("safety: masters %v after %s returned: %s", ms, old, describe(st))
		}
		m, why := oneMaster(st)
		return m == next, why
	})
	report(t, "time for the old master to rejoin as a slave", "%v", time.Since(restarted).Round(time.Millisecond))
	c.watch(3*syncInterval, next)
	sp, _ := c.awaitConverged(convergeBound, convergeTime)
	report(t, "largest pairwise offset after the rejoin", "%v (bound %v)", sp, convergeBound)
	c.reportMessages(t)
}

// partition cuts the hosts of a from those of b: every host drops, in its
// own network namespace, whatever comes from the other side (broadcasts
// included). heal removes the rules.
func (c *cluster) partition(a, b []string, heal bool) {
	c.t.Helper()
	op := "-I"
	if heal {
		op = "-D"
	}
	ips := map[string]string{}
	for _, h := range append(slices.Clone(a), b...) {
		ips[h] = c.ip(h)
	}
	// One iptables call per host, all hosts at once: the cut (or the
	// heal) takes effect everywhere within a few milliseconds.
	var wg sync.WaitGroup
	errs := make(chan error, len(a)+len(b))
	for _, side := range [][2][]string{{a, b}, {b, a}} {
		for _, h := range side[0] {
			var rules strings.Builder
			rules.WriteString("*filter\n")
			for _, other := range side[1] {
				fmt.Fprintf(&rules, "%s INPUT -s %s -j DROP\n", op, ips[other])
			}
			rules.WriteString("COMMIT\n")
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- c.netnsInput(h, rules.String(), "iptables-restore", "--noflush")
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			c.t.Fatal(err)
		}
	}
}

// TestPartition: a 3+2 partition leaves a master on each side; when it
// heals, one master remains within one sync interval (healBound) and the
// clocks converge again.
func TestPartition(t *testing.T) {
	c := newCluster(t, compose.Default(5))
	c.start()
	c.awaitOneMaster(coldStartBound)
	c.awaitConverged(convergeBound, convergeTime)

	a, b := []string{"host1", "host2", "host3"}, []string{"host4", "host5"}
	c.partition(a, b, false)
	cut := time.Now()
	ma, _ := c.awaitOneMaster(electionBound+slavesBound, a...)
	mb, _ := c.awaitOneMaster(electionBound+slavesBound, b...)
	report(t, "time to a master on each side", "%v (%s and %s)", time.Since(cut).Round(time.Millisecond), ma, mb)
	// Let each side run its own rounds for a while: the sides' network
	// times part (their drifts differ), so healing has something to do.
	c.watch(3*syncInterval, ma, a...)
	st, err := c.statuses()
	if err != nil {
		t.Fatal(err)
	}
	report(t, "largest pairwise offset across the partition", "%v", spread(st))

	c.partition(a, b, true)
	healed := time.Now()
	var mastersSeen []string
	c.await("one master after the heal", healBound, func() (bool, string) {
		st, err := c.statuses()
		if err != nil {
			return false, err.Error()
		}
		mastersSeen = masters(st)
		return len(mastersSeen) == 1, describe(st)
	})
	report(t, "time to one master after the heal", "%v (bound %v), %v", time.Since(healed).Round(time.Millisecond), healBound, mastersSeen)
	m, _ := c.awaitOneMaster(slavesBound)
	report(t, "time to one master with all slaves after the heal", "%v (bound %v), %s", time.Since(healed).Round(time.Millisecond), healBound+slavesBound, m)
	sp, _ := c.awaitConverged(convergeBound, convergeTime)
	report(t, "time to converge after the heal", "%v, largest pairwise offset %v (bound %v)", time.Since(healed).Round(time.Millisecond), sp, convergeBound)
	c.reportMessages(t)
}

// TestNonMasterNeverMaster: only host1 and host2 have -M. Whichever is
// master is killed, then the other: the three hosts without -M never
// become master, with a master or without.
func TestNonMasterNeverMaster(t *testing.T) {
	spec := compose.Default(5)
	for i := 2; i < 5; i++ {
		spec.Hosts[i].Master = false
	}
	c := newCluster(t, spec)
	c.start()
	eligible := []string{"host1", "host2"}
	check := func(st map[string]*control.Status) {
		for _, m := range masters(st) {
			if !slices.Contains(eligible, m) {
				t.Fatalf("%s, without -M, is master: %s", m, describe(st))
			}
		}
	}
	first := ""
	c.await("one master among host1 and host2", coldStartBound, func() (bool, string) {
		st, err := c.statuses()
		if err != nil {
			return false, err.Error()
		}
		check(st)
		var why string
		first, why = oneMaster(st)
		return first != "", why
	})
	c.kill(first)
	second := eligible[0]
	if first == second {
		second = eligible[1]
	}
	rest := slices.DeleteFunc(c.names(), func(n string) bool { return n == first })
	c.await("the other -M host takes over", electionBound, func() (bool, string) {
		st, err := c.statuses(rest...)
		if err != nil {
			return false, err.Error()
		}
		check(st)
		m, why := oneMaster(st)
		return m == second, why
	})
	c.kill(second)
	left := []string{"host3", "host4", "host5"}
	// Observe for longer than any election timer can run (with backoff
	// at its cap, 4 × the range): nobody may take the master's place.
	window := electionMin + 4*(electionMax-electionMin) + slack
	var states map[string]int
	for end := time.Now().Add(window); time.Now().Before(end); {
		st, err := c.statuses(left...)
		if err != nil {
			t.Fatal(err)
		}
		check(st)
		if len(masters(st)) > 0 {
			t.Fatalf("a master among hosts without -M: %s", describe(st))
		}
		states = map[string]int{}
		for _, s := range st {
			states[s.State]++
		}
		time.Sleep(200 * time.Millisecond)
	}
	report(t, "states of the hosts without -M, no -M host left", "%v after %v", states, window)
}

// TestUntrustedMasterSuppressed: host5 (-M, trusting everyone) starts
// alone and is master; hosts 1–4 then start with -F host1..host4, find an
// untrusted master, and suppress it: one of them is master and host5 its
// slave.
func TestUntrustedMasterSuppressed(t *testing.T) {
	spec := compose.Default(5)
	trusted := []string{"host1", "host2", "host3", "host4"}
	for i := range 4 {
		spec.Hosts[i].Trusted = trusted
	}
	c := newCluster(t, spec)
	c.start("host5")
	c.await("host5 alone is master", coldStartBound, func() (bool, string) {
		st, err := c.status("host5")
		if err != nil {
			return false, err.Error()
		}
		return st.State == "master", st.State
	})
	c.start(trusted...)
	started := time.Now()
	m, _ := c.awaitOneMaster(coldStartBound)
	if !slices.Contains(trusted, m) {
		t.Fatalf("master is %s, outside the trusted list %v", m, trusted)
	}
	report(t, "time until a trusted master leads host5", "%v (bound %v), master %s", time.Since(started).Round(time.Millisecond), coldStartBound, m)
	c.watch(3*syncInterval, m)
	st, err := c.status("host5")
	if err != nil {
		t.Fatal(err)
	}
	report(t, "host5 after suppression", "%s of %s, elections seen %d", st.State, st.Master.Name, st.Elections)
	c.reportMessages(t)
}

// TestTimedcAcrossContainers: msite, trace, election and clockdiff from
// one container to others. Hosts 1–3 run simulated clocks at zero offset
// and zero drift, so the network time stays the kernel clock they share:
// the truth of a clockdiff between them is (close to) zero. "witness" runs
// no timed: nothing answers the probe there, so clockdiff falls back to
// ICMP timestamps, which that container's kernel answers.
func TestTimedcAcrossContainers(t *testing.T) {
	spec := compose.Spec{}
	for i := 1; i <= 3; i++ {
		spec.Hosts = append(spec.Hosts, compose.Host{Name: fmt.Sprintf("host%d", i), Master: true})
	}
	spec.Hosts = append(spec.Hosts, compose.Host{Name: "witness", Witness: true})
	c := newCluster(t, spec)
	c.start()
	m, _ := c.awaitOneMaster(coldStartBound)
	var slaves []string
	for _, n := range c.names() {
		if n != m {
			slaves = append(slaves, n)
		}
	}
	from, slave := slaves[0], slaves[1]

	// msite: each host names the master.
	sites, err := c.msite(from, c.names()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sites {
		if s.Master != m {
			t.Errorf("msite %s from %s: master %q, want %q (%s)", s.Host, from, s.Master, m, s.Error)
		}
	}

	// trace and election across the network are refused: our daemons
	// take admin packets only from a reserved port on their own host.
	before, err := c.status(slave)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.timedc(from, "--timeout", "1s", "trace", "on", slave); err == nil {
		t.Fatalf("trace on %s from %s was answered; want it refused", slave, from)
	}
	if _, err := c.timedc(from, "election", slave); err != nil {
		t.Fatal(err) // TEST has no answer: the send succeeds, the daemon drops it
	}
	c.await("the remote admin packets counted as refused at "+slave, 5*time.Second, func() (bool, string) {
		st, err := c.status(slave)
		if err != nil {
			return false, err.Error()
		}
		n := st.Drops["refused admin-unprivileged"]
		return n >= 2 && !st.Trace && st.Elections == before.Elections, fmt.Sprintf("refused %d, trace %v, elections %d", n, st.Trace, st.Elections)
	})

	// trace on and off, from the slave's own host (root, reserved port).
	for _, on := range []bool{true, false} {
		word := map[bool]string{true: "on", false: "off"}[on]
		if _, err := c.timedc(slave, "trace", word); err != nil {
			t.Fatal(err)
		}
		st, err := c.status(slave)
		if err != nil {
			t.Fatal(err)
		}
		if st.Trace != on {
			t.Fatalf("trace %s on %s itself: status says trace=%v", word, slave, st.Trace)
		}
	}

	// election: the slave starts one; one master follows.
	if _, err := c.timedc(slave, "election", "localhost"); err != nil {
		t.Fatal(err)
	}
	took := c.await("an election at "+slave, electionBound, func() (bool, string) {
		st, err := c.status(slave)
		if err != nil {
			return false, err.Error()
		}
		return st.Elections > before.Elections, fmt.Sprintf("elections seen %d", st.Elections)
	})
	m2, took2 := c.awaitOneMaster(electionBound)
	report(t, "timedc election: seen, then one master", "%v, %v (master %s, was %s)", took.Round(time.Millisecond), took2.Round(time.Millisecond), m2, m)

	// clockdiff by probe between two zero-offset hosts.
	type diff = clockdiff.Answer
	clockdiffFrom := func(from, to string) diff {
		t.Helper()
		out, err := c.timedc(from, "--json", "--timeout", "5s", "clockdiff", to)
		if err != nil {
			t.Fatal(err)
		}
		var d []diff
		if err := json.Unmarshal([]byte(out), &d); err != nil || len(d) != 1 {
			t.Fatalf("clockdiff --json: %v: %q", err, out)
		}
		return d[0]
	}
	target := slaves[1]
	if target == from {
		target = slaves[0]
	}
	st, err := c.status(target)
	if err != nil {
		t.Fatal(err)
	}
	d := clockdiffFrom(from, target)
	if d.Method != "probe" {
		t.Fatalf("clockdiff %s from %s used %s, want the probe", target, from, d.Method)
	}
	if off := time.Duration(d.Offset * 1e9); off.Abs() > 200*time.Microsecond {
		t.Errorf("clockdiff %s from %s by probe: %v, want at most 200 µs (the daemon reports its clock %v off the kernel's)",
			target, from, off, time.Duration(st.OffsetSecs*1e9))
	}
	report(t, "clockdiff by probe, zero-offset hosts", "%v (±%v, rtt %v; the target's own offset %v; bound 200µs)",
		time.Duration(d.Offset*1e9), time.Duration(d.Bound*1e9), time.Duration(d.RTT*1e9), time.Duration(st.OffsetSecs*1e9))

	d = clockdiffFrom(from, "witness")
	if d.Method != "icmp" {
		t.Fatalf("clockdiff witness from %s used %s, want ICMP", from, d.Method)
	}
	if off := time.Duration(d.Offset * 1e9); off.Abs() > 2*time.Millisecond {
		t.Errorf("clockdiff witness from %s by ICMP: %v, want at most 2 ms", from, off)
	}
	report(t, "clockdiff by ICMP to a container without timed", "%v (±%v; bound 2ms)", time.Duration(d.Offset*1e9), time.Duration(d.Bound*1e9))
}

// impair makes every link of the cluster lossy and jittery (see
// jitter_test.go for why not netem and why where): in each host's network
// namespace, 20% of the packets arriving on eth0 are dropped, and every
// packet leaving on eth0 is delayed by 0–10 ms. The rules go with the
// containers; Cleanup stops the delayer.
func (c *cluster) impair(t *testing.T) *delayer {
	t.Helper()
	d := &delayer{}
	t.Cleanup(func() {
		if err := d.close(); err != nil {
			t.Errorf("delayer: %v", err)
		}
	})
	for _, h := range c.names() {
		pid, err := c.inspect(h, "{{.State.Pid}}")
		if err != nil {
			t.Fatal(err)
		}
		// The queue is bound before the rule sends packets to it.
		if err := d.attach(pid); err != nil {
			t.Fatalf("jitter on %s: %v", h, err)
		}
		for _, rule := range [][]string{
			{"-A", "INPUT", "-i", "eth0", "-m", "statistic", "--mode", "random", "--probability", "0.2", "-j", "DROP"},
			{"-A", "OUTPUT", "-o", "eth0", "-j", "NFQUEUE", "--queue-num", fmt.Sprint(nfqQueue), "--queue-bypass"},
		} {
			if err := c.netns(h, append([]string{"iptables"}, rule...)...); err != nil {
				t.Fatal(err)
			}
		}
	}
	return d
}

// dropped sums the packets the loss rule dropped on every host.
func (c *cluster) dropped() (uint64, error) {
	var total uint64
	for _, h := range c.names() {
		pid, err := c.inspect(h, "{{.State.Pid}}")
		if err != nil {
			return 0, err
		}
		out, err := command(30*time.Second, nil, "nsenter", "-t", pid, "-n", "iptables", "-L", "INPUT", "-v", "-x", "-n")
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(out, "\n") {
			var pkts uint64
			if strings.Contains(line, "statistic") && strings.Contains(line, "DROP") {
				if _, err := fmt.Sscan(line, &pkts); err == nil {
					total += pkts
				}
			}
		}
	}
	return total, nil
}

// TestLossAndJitter: with 20% loss and 5 ms ± 5 ms of delay on every
// link there is still one master that every host follows, and the clocks
// still converge, to the looser lossyConvergeBound.
func TestLossAndJitter(t *testing.T) {
	c := newCluster(t, compose.Default(5))
	c.start()
	c.awaitOneMaster(coldStartBound)
	d := c.impair(t)
	impaired := time.Now()
	before, _ := c.statuses()

	// Keep it up for longer than any election timer (electionMax) three
	// times over, so a master that loses its slaves would show.
	var maxMasters int
	electionsBefore := map[string]uint64{}
	for n, s := range before {
		electionsBefore[n] = s.Elections
	}
	for end := time.Now().Add(3 * electionMax); time.Now().Before(end); {
		st, err := c.statuses()
		if err != nil {
			t.Fatal(err)
		}
		maxMasters = max(maxMasters, len(masters(st)))
		time.Sleep(200 * time.Millisecond)
	}
	m, _ := c.awaitOneMaster(electionBound)
	sp, _ := c.awaitConverged(lossyConvergeBound, convergeTime)
	worst := c.watch(3*syncInterval, "")
	if worst >= lossyConvergeBound {
		t.Errorf("clocks apart by %v under loss and jitter, bound %v", worst, lossyConvergeBound)
	}
	st, err := c.statuses()
	if err != nil {
		t.Fatal(err)
	}
	var elections uint64
	for n, s := range st {
		elections += s.Elections - electionsBefore[n]
	}
	dropped, err := c.dropped()
	if err != nil {
		t.Fatal(err)
	}
	report(t, "one master under impairment", "%s; most masters seen at once %d; elections seen by the hosts %d over %v",
		m, maxMasters, elections, time.Since(impaired).Round(time.Second))
	report(t, "largest pairwise offset under impairment", "%v when converged, %v worst over 3 more rounds (bound %v)", sp, worst, lossyConvergeBound)
	report(t, "packets dropped / delayed 0–10 ms", "%d / %d", dropped, d.delayed.Load())
	var rtts []string
	for _, sl := range st[m].Slaves {
		rtts = append(rtts, fmt.Sprintf("%s %v", sl.Name, time.Duration(sl.RTTSecs*1e9).Round(time.Microsecond)))
	}
	report(t, "round trips the master measured last", "%s", strings.Join(rtts, ", "))
	c.reportMessages(t)
}

// TestTwentyHosts: the generator's largest network starts and settles on
// one master, and its clocks converge.
func TestTwentyHosts(t *testing.T) {
	c := newCluster(t, compose.Default(20))
	start := c.start()
	m, _ := c.awaitOneMaster(coldStartBound + slack)
	report(t, "time to one master (from start)", "%v (bound %v), %s", time.Since(start).Round(time.Millisecond), coldStartBound+slack, m)
	sp, took := c.awaitConverged(convergeBound, convergeTime)
	report(t, "time to converge, largest pairwise offset", "%v, %v (bound %v)", took.Round(time.Millisecond), sp, convergeBound)
	c.reportMessages(t)
}

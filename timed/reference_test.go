package timed

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus/hooks/test"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/timed/control"
)

// TestRefHealth: the claim follows the kernel's state with hysteresis:
// the first reading decides at once; after that only readings against
// the claim for the whole hold change it, and one reading for it in
// between starts the count again.
func TestRefHealth(t *testing.T) {
	const bound, hold = 100 * time.Millisecond, 10 * time.Second
	good := clocksync.ClockState{Synchronized: true, MaxError: 20 * time.Millisecond}
	unsync := clocksync.ClockState{Synchronized: false, MaxError: 20 * time.Millisecond}
	wide := clocksync.ClockState{Synchronized: true, MaxError: 150 * time.Millisecond}
	edge := clocksync.ClockState{Synchronized: true, MaxError: bound}
	type obs struct {
		at    time.Duration
		st    clocksync.ClockState
		err   error
		claim bool // after it
		chg   bool
	}
	for _, c := range []struct {
		name string
		obs  []obs
	}{
		{"starts claiming when good", []obs{{0, good, nil, true, true}}},
		{"starts not claiming when unsynchronised", []obs{{0, unsync, nil, false, false}}},
		{"maxerror at the bound is good", []obs{{0, edge, nil, true, true}}},
		{"maxerror beyond the bound is bad", []obs{{0, wide, nil, false, false}}},
		{"unreadable is bad", []obs{{0, good, fmt.Errorf("adjtimex: EINVAL"), false, false}}},
		{"brief loss changes nothing", []obs{
			{0, good, nil, true, true}, {5 * time.Second, unsync, nil, true, false},
			{10 * time.Second, wide, nil, true, false}, {14 * time.Second, good, nil, true, false},
			{20 * time.Second, unsync, nil, true, false}, {29 * time.Second, unsync, nil, true, false},
		}},
		{"steps down after the hold", []obs{
			{0, good, nil, true, true}, {5 * time.Second, unsync, nil, true, false},
			{10 * time.Second, wide, nil, true, false}, {15 * time.Second, unsync, nil, false, true},
			{20 * time.Second, unsync, nil, false, false},
		}},
		{"claims again only after the hold", []obs{
			{0, good, nil, true, true}, {1 * time.Second, unsync, nil, true, false},
			{11 * time.Second, unsync, nil, false, true}, {12 * time.Second, good, nil, false, false},
			{13 * time.Second, unsync, nil, false, false}, {14 * time.Second, good, nil, false, false},
			{23 * time.Second, good, nil, false, false}, {24 * time.Second, good, nil, true, true},
		}},
	} {
		h := refHealth{maxErr: bound, hold: hold}
		for i, o := range c.obs {
			chg := h.observe(t0.Add(o.at), o.st, o.err)
			if h.claiming != o.claim || chg != o.chg {
				t.Errorf("%s: reading %d at %v: claiming %v changed %v, want %v %v", c.name, i, o.at, h.claiming, chg, o.claim, o.chg)
			}
		}
	}
	// A hold of 0: every reading decides.
	h := refHealth{maxErr: bound}
	h.observe(t0, good, nil)
	if !h.observe(t0.Add(time.Second), unsync, nil) || h.claiming {
		t.Errorf("hold 0: one bad reading must step down")
	}
}

// refClock is the clock of a host whose time another program keeps: it
// reads the host clock plus an offset, reports the kernel state the test
// sets, and records every call that would change it (Adjust, Step,
// SetFrequency, SetKernelSync), which a reference must never make.
type refClock struct {
	offset   time.Duration
	unsynced atomic.Bool
	maxErr   atomic.Int64

	mu    sync.Mutex
	calls []string
}

func (c *refClock) Now() time.Time { return time.Now().Add(c.offset).Round(0) }

func (c *refClock) changed(call string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call)
	return fmt.Errorf("refClock: %s called", call)
}

func (c *refClock) Adjust(d time.Duration) error { return c.changed(fmt.Sprintf("Adjust(%v)", d)) }
func (c *refClock) Step(t time.Time) error       { return c.changed("Step") }
func (c *refClock) SetFrequency(ppm float64) error {
	return c.changed(fmt.Sprintf("SetFrequency(%g)", ppm))
}
func (c *refClock) SetKernelSync(k clocksync.KernelSync) error {
	return c.changed(fmt.Sprintf("SetKernelSync(%+v)", k))
}

func (c *refClock) State() (clocksync.ClockState, error) {
	return clocksync.ClockState{Kind: "system", Now: c.Now(), Synchronized: !c.unsynced.Load(),
		MaxError: time.Duration(c.maxErr.Load()), EstError: time.Duration(c.maxErr.Load())}, nil
}

// unchanged fails t if anything tried to change the clock.
func (c *refClock) unchanged(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.calls) != 0 {
		t.Errorf("the reference's clock was changed: %v", c.calls)
	}
}

// udpPorts are n free UDP ports on loopback.
func udpPorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var conns []net.PacketConn
	for range n {
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
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

// pairDaemon runs a daemon of a pair on loopback: name at port, its peer
// at peerPort.
func pairDaemon(t *testing.T, name string, port, peerPort int, clock clocksync.Clock, args ...string) *Daemon {
	t.Helper()
	if clock != nil {
		args = append(args, "--clock", "system") // the test's clock stands for it: nothing reaches the host's
	}
	cfg := testConfig(t, append([]string{"--hostname", name, "--peers", fmt.Sprintf("127.0.0.1:%d", peerPort)}, args...)...)
	cfg.Port = port
	log, _ := test.NewNullLogger()
	d, err := New(cfg, log, Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return d
}

func (d *Daemon) testStatus() *control.Status {
	return d.handleControl(context.Background(), control.Request{Cmd: control.CmdStatus}).Status
}

// await polls cond (a status question) until it holds, or fails after
// bound, which is far beyond what the fast profile needs.
func await(t *testing.T, what string, bound time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, bound, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReferenceNeverAdjusts: a reference host's clock (a refClock, which
// records every changing call) is never adjusted, slewed, stepped,
// frequency-corrected or told a kernel state: as master, whose rounds
// bring its slave onto its clock (the slave's simulated clock ends within
// a few ms of the reference's 30 ms lead: no averaging, corrections
// towards the reference only), and as a slave of another master, whose
// corrections it acknowledges and ignores; nor when it steps down (the
// kernel's clock unsynchronised: it tells the network, RESIGN, and the
// plain host becomes master) and comes back (it takes the network over
// again).
func TestReferenceNeverAdjusts(t *testing.T) {
	const lead = 30 * time.Millisecond
	t.Run("master", func(t *testing.T) {
		t.Parallel()
		ports := udpPorts(t, 2)
		ref := &refClock{offset: lead}
		ref.maxErr.Store(int64(5 * time.Millisecond))
		r := pairDaemon(t, "ref", ports[0], ports[1], ref, "--reference", "kernel")
		p := pairDaemon(t, "plain", ports[1], ports[0], nil)
		await(t, "the slave on the reference's clock", 60*time.Second, func() (bool, string) {
			rs, ps := r.testStatus(), p.testStatus()
			off := time.Duration(ps.OffsetSecs * 1e9)
			ok := rs.State == "master" && ps.State == "slave" && off > lead-5*time.Millisecond && off < lead+5*time.Millisecond
			return ok, fmt.Sprintf("ref %s, plain %s at %v", rs.State, ps.State, off)
		})
		// Three more rounds of the reference's: it stays where it is.
		adj := func() uint64 { return r.testStatus().Packets["ADJTIME"].Tx }
		n := adj()
		await(t, "three more rounds", 60*time.Second, func() (bool, string) {
			return adj() >= n+3, fmt.Sprintf("%d ADJTIME sent", adj())
		})
		st := r.testStatus()
		if st.Reference == nil || !st.Reference.Claiming || st.KernelSync != nil {
			t.Errorf("reference status %+v, kernel sync %+v; want claiming, kernel left alone", st.Reference, st.KernelSync)
		}
		if y := st.Sync; y.UTCVia != "ref" || y.UTCBoundSecs == nil || *y.UTCBoundSecs != 0.005 {
			t.Errorf("the reference's sync %+v: want UTC via itself within its maxerror", y)
		}
		// The slave says where its time comes from, and how far from
		// UTC it may be: the reference's maxerror and more.
		await(t, "the slave synchronised to UTC via the reference", 60*time.Second, func() (bool, string) {
			y := p.testStatus().Sync
			return y.UTCVia == "ref" && y.UTCBoundSecs != nil && *y.UTCBoundSecs > 0.005 && strings.HasPrefix(y.Reason, "synchronised to UTC via ref"),
				fmt.Sprintf("%+v", y)
		})
		srcs := p.handleControl(context.Background(), control.Request{Cmd: control.CmdSources}).Sources
		// The maxerror announced, grown at the kernel's 500 µs/s since it
		// was heard (at most a round and a half: 6 s here, 3 ms).
		if srcs == nil || len(srcs.Sources) != 1 || srcs.Sources[0].ReferenceMaxErrorSecs == nil ||
			*srcs.Sources[0].ReferenceMaxErrorSecs < 0.005 || *srcs.Sources[0].ReferenceMaxErrorSecs > 0.0085 {
			t.Errorf("the slave's sources: %+v", srcs)
		}
		ref.unchanged(t)
	})
	t.Run("slave", func(t *testing.T) {
		t.Parallel()
		ports := udpPorts(t, 2)
		ref := &refClock{offset: lead}
		ref.unsynced.Store(true) // not a reference now: the other host is master
		p := pairDaemon(t, "plain", ports[1], ports[0], nil, "-M")
		await(t, "plain master", 60*time.Second, func() (bool, string) {
			s := p.testStatus().State
			return s == "master", s
		})
		r := pairDaemon(t, "ref", ports[0], ports[1], ref, "--reference", "kernel")
		await(t, "corrections ignored", 60*time.Second, func() (bool, string) {
			st := r.testStatus()
			return st.State == "slave" && st.Reference.CorrectionsIgnored >= 3, fmt.Sprintf("%s, %+v", st.State, st.Reference)
		})
		ref.unchanged(t)
	})
	t.Run("step down and return", func(t *testing.T) {
		t.Parallel()
		ports := udpPorts(t, 2)
		ref := &refClock{offset: lead}
		ref.maxErr.Store(int64(5 * time.Millisecond))
		r := pairDaemon(t, "ref", ports[0], ports[1], ref, "--reference", "kernel", "--reference-hold", "0s")
		p := pairDaemon(t, "plain", ports[1], ports[0], nil, "-M")
		roles := func(want string) func() (bool, string) {
			return func() (bool, string) {
				got := r.testStatus().State + "/" + p.testStatus().State
				return got == want, got
			}
		}
		await(t, "the reference master", 60*time.Second, roles("master/slave"))
		ref.unsynced.Store(true) // chrony lost its server
		await(t, "the plain host master", 60*time.Second, roles("slave/master"))
		if st := r.testStatus(); st.Reference.Claiming || st.Sync.UTCVia != "" {
			t.Errorf("stepped down: %+v, sync %+v", st.Reference, st.Sync)
		}
		// It said so (RESIGN), rather than leaving the plain host to its
		// election timer.
		if tx, rx := r.testStatus().Packets["RESIGN"].Tx, p.testStatus().Packets["RESIGN"].Rx; tx == 0 || rx == 0 {
			t.Errorf("RESIGN sent %d, received %d: want the step-down told", tx, rx)
		}
		ref.unsynced.Store(false)
		await(t, "the reference master again", 60*time.Second, roles("master/slave"))
		ref.unchanged(t)
	})
}

// TestGrownMaxError: a claim heard 10 s ago with maxerror 1 ms stands
// for 6 ms now (the kernel's 500 µs a second); one from the future
// (clock skew between steps) is not shrunk.
func TestGrownMaxError(t *testing.T) {
	r := election.HeardReference{Name: "ref", MaxError: time.Millisecond, At: t0}
	if got := grownMaxError(r, t0.Add(10*time.Second)); got != 6*time.Millisecond {
		t.Errorf("10 s later: %v, want 6ms", got)
	}
	if got := grownMaxError(r, t0.Add(-time.Second)); got != time.Millisecond {
		t.Errorf("before it was heard: %v, want 1ms", got)
	}
}

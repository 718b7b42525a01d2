package timed

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus/hooks/test"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/timed/control"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestJudge: the rules of README's "Is it synchronised?", with a sync
// interval of 1 s.
func TestJudge(t *testing.T) {
	slave := func(master string) []netFacts {
		return []netFacts{{name: "lan", state: election.Slave, master: master}}
	}
	master := func(slaves int, r roundInfo) []netFacts {
		return []netFacts{{name: "lan", state: election.Master, master: "here", slaves: slaves, round: r}}
	}
	now := t0.Add(time.Hour)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	for _, c := range []struct {
		name  string
		f     syncFacts
		alarm bool
		want  string
		why   string
	}{
		{"slave, fresh correction", syncFacts{nets: slave("m"), applied: ago(1500 * time.Millisecond), from: "m"}, false,
			control.Synchronised, "slave of m, whose last correction was applied 1.5s ago"},
		{"slave, correction 2 intervals old", syncFacts{nets: slave("m"), applied: ago(2 * time.Second), from: "m"}, false,
			control.Synchronised, "slave of m"},
		{"slave, late", syncFacts{nets: slave("m"), applied: ago(2001 * time.Millisecond), from: "m"}, false,
			control.Unsynchronised, "more than 2 sync intervals (2s)"},
		{"slave, correction from another", syncFacts{nets: slave("m"), applied: ago(time.Second), from: operatorFrom}, false,
			control.Unsynchronised, "no correction from it yet"},
		{"slave, no master", syncFacts{nets: slave("")}, false, control.Unsynchronised, "waiting for a master"},
		{"slave in alarm", syncFacts{nets: slave("m"), applied: ago(time.Second), from: "m"}, true, control.InAlarm, "beyond max-step"},
		{"dry-run", syncFacts{nets: slave("m"), applied: ago(time.Second), from: "m", dryRun: true}, false, control.Unsynchronised, "dry-run"},
		{"candidate", syncFacts{nets: []netFacts{{name: "lan", state: election.Candidate}}}, false, control.Unsynchronised, "candidate on lan: no master yet"},
		{"master alone", syncFacts{nets: master(0, roundInfo{})}, false, control.Synchronised, "alone"},
		{"master, no round yet", syncFacts{nets: master(2, roundInfo{})}, false, control.Unsynchronised, "no round measured yet"},
		{"master, round measured one", syncFacts{nets: master(2, roundInfo{at: ago(time.Second), slaves: 2, measured: 1})}, false,
			control.Synchronised, "measured 1 of 2 slaves"},
		{"master, round measured none", syncFacts{nets: master(2, roundInfo{at: ago(time.Second), slaves: 2})}, false,
			control.Unsynchronised, "measured none of its 2 slaves"},
		{"master, round late", syncFacts{nets: master(2, roundInfo{at: ago(3 * time.Second), slaves: 2, measured: 2})}, false,
			control.Unsynchronised, "last round was 3s ago"},
		{"master in alarm", syncFacts{nets: master(0, roundInfo{})}, true, control.InAlarm, "timedc step --to-network"},
	} {
		c.f.interval, c.f.maxStep = time.Second, 1000*time.Second
		state, why := c.f.judge(now, clocksync.AlarmState{On: c.alarm, Offset: 1500 * time.Second})
		if state != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: %s (%s), want %s (…%s…)", c.name, state, why, c.want, c.why)
		}
	}
}

// TestOffsetEstimate: the estimate follows a slew at 500 ppm, is done at
// once after a step, stays the correction in dry-run; its bound grows by
// the larger of 15 ppm and the last correction's rate.
func TestOffsetEstimate(t *testing.T) {
	ms := time.Millisecond
	slew := basis{at: t0, before: -10 * ms, moved: 10 * ms, slewed: true, bound: ms}
	for _, c := range []struct {
		after         time.Duration
		off, pending  time.Duration
		bound, bound2 time.Duration // with a 1 s interval; with 1000 s
	}{
		{0, -10 * ms, 10 * ms, ms, ms},
		{10 * time.Second, -5 * ms, 5 * ms, ms + 100*ms, ms + 150*time.Microsecond},
		{30 * time.Second, 0, 0, ms + 300*ms, ms + 450*time.Microsecond},
	} {
		off, pending := slew.offsetAt(t0.Add(c.after))
		if off != c.off || pending != c.pending {
			t.Errorf("slew after %v: offset %v pending %v, want %v %v", c.after, off, pending, c.off, c.pending)
		}
		if b := slew.boundAt(t0.Add(c.after), time.Second); b != c.bound {
			t.Errorf("bound after %v, 1s interval: %v, want %v (the correction's rate, 10 ms/s)", c.after, b, c.bound)
		}
		if b := slew.boundAt(t0.Add(c.after), 1000*time.Second); b != c.bound2 {
			t.Errorf("bound after %v, 1000s interval: %v, want %v (15 ppm)", c.after, b, c.bound2)
		}
	}
	step := basis{at: t0, before: 30 * time.Second, moved: -30 * time.Second, bound: -1}
	if off, pending := step.offsetAt(t0); off != 0 || pending != 0 {
		t.Errorf("step: %v %v, want 0 0", off, pending)
	}
	if b := step.boundAt(t0.Add(time.Hour), time.Second); b >= 0 {
		t.Errorf("a slave's bound %v, want unknown", b)
	}
	dry := basis{at: t0, before: -10 * ms, slewed: true, bound: -1}
	if off, _ := dry.offsetAt(t0.Add(time.Minute)); off != -10*ms {
		t.Errorf("dry-run: %v, want the correction never applied, -10ms", off)
	}
	if p := slewPending(-10*ms, 2*time.Second); p != -9*ms {
		t.Errorf("slewPending(-10ms, 2s) = %v, want -9ms", p)
	}
}

// TestSyncView: what status shows as the estimate for each basis.
func TestSyncView(t *testing.T) {
	now := t0.Add(2 * time.Second)
	slave := &syncFacts{interval: time.Second, nets: []netFacts{{name: "lan", state: election.Slave, master: "m"}},
		applied: t0, from: "m", freq: 12.5, change: -0.25, changed: t0, estim: 3,
		basis: &basis{kind: "correction", from: "m", at: t0, before: -3 * time.Millisecond, moved: 3 * time.Millisecond, slewed: true, bound: -1}}
	v := slave.view(now, clocksync.AlarmState{})
	if v.State != control.Synchronised || v.Basis != "correction" || v.BasisFrom != "m" || *v.BasisAgeSecs != 2 ||
		v.ErrorBoundSecs != nil || *v.OffsetSecs != -0.002 || v.PendingSlewSecs != 0.002 || *v.LastCorrectionAgeSecs != 2 ||
		v.FrequencyPPM != 12.5 || v.FrequencyChangePPM != -0.25 || *v.FrequencyChangeAgeSecs != 2 || v.FrequencyEstimates != 3 || v.SyncIntervalSecs != 1 {
		t.Errorf("slave: %+v", v)
	}
	alarm := slave.view(now, clocksync.AlarmState{On: true, Offset: 4000 * time.Second})
	if alarm.State != control.InAlarm || alarm.Basis != "alarm" || *alarm.OffsetSecs != 4000 {
		t.Errorf("alarm: %+v", alarm)
	}
	master := &syncFacts{interval: time.Second, nets: []netFacts{{name: "lan", state: election.Master, slaves: 2,
		round: roundInfo{at: t0, slaves: 2, measured: 2}}},
		basis: &basis{kind: "round", from: "here", at: t0, bound: 200 * time.Microsecond}}
	v = master.view(t0.Add(time.Second), clocksync.AlarmState{})
	if v.State != control.Synchronised || v.Basis != "round" || *v.OffsetSecs != 0 || *v.ErrorBoundSecs != 215e-6 {
		t.Errorf("master: %+v (want ±200µs + 15 ppm × 1 s)", v)
	}
	master.nets[0].slaves = 0
	if v = master.view(now, clocksync.AlarmState{}); v.Basis != "alone" || *v.OffsetSecs != 0 || *v.ErrorBoundSecs != 0 {
		t.Errorf("alone: %+v", v)
	}
	none := &syncFacts{interval: time.Second, nets: []netFacts{{name: "lan", state: election.StartUp}}}
	if v = none.view(now, clocksync.AlarmState{}); v.Basis != "none" || v.OffsetSecs != nil || v.LastCorrectionAgeSecs != nil {
		t.Errorf("nothing known: %+v", v)
	}
}

// TestReach: a master's corrections fill the register round by round; a
// round without one leaves a 0, now or when the next comes; a new master
// starts afresh.
func TestReach(t *testing.T) {
	sec := time.Second
	var h heardMaster
	for _, at := range []time.Duration{0, sec, 2 * sec, 4*sec + 100*time.Millisecond} {
		h.heard("m", t0.Add(at), time.Millisecond, sec)
	}
	if h.reach != 0b11101 {
		t.Fatalf("reach %b, want 11101", h.reach)
	}
	if r := h.reachAt(t0.Add(5*sec+400*time.Millisecond), sec); r != 0b11101 {
		t.Errorf("1.3 rounds on: %b, want 11101 (not yet late)", r)
	}
	if r := h.reachAt(t0.Add(5*sec+700*time.Millisecond), sec); r != 0b111010 {
		t.Errorf("1.6 rounds on: %b, want 111010", r)
	}
	if r := h.reachAt(t0.Add(time.Hour), sec); r != 0 {
		t.Errorf("an hour on: %b, want 0", r)
	}
	h.heard("other", t0.Add(6*sec), time.Millisecond, sec)
	if h.reach != 1 || h.name != "other" {
		t.Errorf("new master: %+v", h)
	}
	// Adaptive rounds shorter than the sync interval: each correction
	// still counts as a round.
	h = heardMaster{}
	for i := range 4 {
		h.heard("m", t0.Add(time.Duration(i)*8*sec), time.Millisecond, 240*sec)
	}
	if h.reach != 0b1111 {
		t.Errorf("corrections 8 s apart, 240 s interval: reach %b, want 1111", h.reach)
	}
}

// TestRoundMeasured: each slave's row after a round: kept, outlier or
// unreachable, its reach, its method and stamps; and the round's record.
func TestRoundMeasured(t *testing.T) {
	a, b, c := netip.MustParseAddrPort("10.0.0.1:525"), netip.MustParseAddrPort("10.0.0.2:525"), netip.MustParseAddrPort("10.0.0.3:525")
	var s netStatus
	s.setSlaves([]election.Peer{{Name: "a", Addr: a}, {Name: "b", Addr: b}, {Name: "c", Addr: c}})
	if s.slaves["a"].State != "new" {
		t.Fatalf("a new slave's state %q", s.slaves["a"].State)
	}
	ms := time.Millisecond
	round := syncDone{
		slaves: []election.Peer{{Name: "a", Addr: a}, {Name: "b", Addr: b}, {Name: "c", Addr: c}},
		measured: []clocksync.Result{
			{Host: a, Measurement: clocksync.Measurement{Offset: 2 * ms, ErrorBound: ms / 10, RTT: ms / 5, Stamps: clocksync.StampsKernel}},
			{Host: b, Err: errors.New("no reply")},
			{Host: c, Measurement: clocksync.Measurement{Offset: time.Second, ErrorBound: 3 * ms, RTT: 6 * ms}},
		},
		network: clocksync.NetworkResult{Offset: ms, Voters: 3, Used: []bool{true, false, false}},
	}
	method := func(h netip.AddrPort) string {
		if h == c {
			return "icmp"
		}
		return "probe"
	}
	s.roundMeasured(round, t0, method)
	s.roundMeasured(round, t0.Add(time.Second), method)
	for name, want := range map[string]struct {
		state  string
		reach  uint8
		method string
	}{"a": {"kept", 0b11, "probe"}, "b": {"unreachable", 0, ""}, "c": {"outlier", 0b11, "icmp"}} {
		sl := s.slaves[name]
		if sl.State != want.state || sl.Reach != want.reach || sl.Method != want.method {
			t.Errorf("%s: state %q reach %b method %q, want %+v", name, sl.State, sl.Reach, sl.Method, want)
		}
	}
	if r := s.round; r.measured != 2 || r.slaves != 3 || r.bound != 3*ms || r.offset != ms || r.dictated || !r.at.Equal(t0.Add(time.Second)) {
		t.Errorf("round %+v", r)
	}
	src := slaveSource(*s.slaves["c"], "lan", t0.Add(1500*time.Millisecond))
	if src.Role != "slave" || *src.OffsetSecs != 1 || *src.ErrorBoundSecs != 0.003 || *src.RTTSecs != 0.006 || *src.AgeSecs != 0.5 {
		t.Errorf("c's row: %+v", src)
	}
	if src := slaveSource(*s.slaves["a"], "lan", t0); src.Stamps != clocksync.StampsKernel || src.Method != "probe" {
		t.Errorf("a's row: stamps %q, method %q", src.Stamps, src.Method)
	}
	if src := slaveSource(*s.slaves["b"], "lan", t0); src.OffsetSecs != nil || src.AgeSecs != nil || src.Failures != 2 {
		t.Errorf("b's row (never measured): %+v", src)
	}
}

// TestMasterSource: a slave's row for its master: the correction, its
// age and reach, and how the master measures us (probes seen, or ICMP).
func TestMasterSource(t *testing.T) {
	m := election.Peer{Name: "m", Addr: netip.MustParseAddrPort("10.0.0.9:525")}
	d := &Daemon{}
	var h heardMaster
	if src := d.masterSource(m, &h, "lan", t0, time.Second); src.State != "new" || src.OffsetSecs != nil || src.Role != "master" {
		t.Errorf("before any correction: %+v", src)
	}
	h.heard("m", t0, 3*time.Millisecond, time.Second)
	src := d.masterSource(m, &h, "lan", t0.Add(500*time.Millisecond), time.Second)
	if src.State != "current" || *src.OffsetSecs != 0.003 || *src.AgeSecs != 0.5 || src.Reach != 1 || src.Method != "icmp" || src.RTTSecs != nil {
		t.Errorf("corrections without probes: %+v", src)
	}
	d.st.probedBy(m.Addr, t0)
	if src := d.masterSource(m, &h, "lan", t0.Add(500*time.Millisecond), time.Second); src.Method != "probe" {
		t.Errorf("with its probes: method %q", src.Method)
	}
	if src := d.masterSource(m, &h, "lan", t0.Add(3*time.Second), time.Second); src.State != "silent" || src.Method != "" || src.Reach != 0b100 {
		t.Errorf("3 s on: %+v", src)
	}
}

// TestLoneDaemonStatus: a daemon alone becomes master; its status says
// synchronised (alone), the network it serves with its state, and its
// sources are none.
func TestLoneDaemonStatus(t *testing.T) {
	log, _ := test.NewNullLogger()
	d, err := New(testConfig(t, "-M"), log, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	var st *control.Status
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := d.handleControl(ctx, control.Request{Cmd: control.CmdStatus})
		if st = r.Status; st != nil && st.State == "master" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not master: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := st.Sync; s == nil || s.State != control.Synchronised || !strings.Contains(s.Reason, "alone") || s.Basis != "alone" || *s.OffsetSecs != 0 {
		t.Errorf("sync %+v", st.Sync)
	}
	if len(st.Networks) != 1 || !st.Networks[0].Served || st.Networks[0].State != "master" || st.Networks[0].Master == nil ||
		st.Networks[0].Master.Name != "here" || len(st.Networks[0].Slaves) != 0 {
		t.Errorf("networks %+v", st.Networks)
	}
	r := d.handleControl(ctx, control.Request{Cmd: control.CmdSources})
	if !r.OK || r.Sources == nil || r.Sources.Hostname != "here" || r.Sources.Sources == nil || len(r.Sources.Sources) != 0 {
		t.Errorf("sources %+v", r)
	}
}

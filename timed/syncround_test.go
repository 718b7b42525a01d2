package timed

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/config"
	"github.com/timed-project/timed/election"
)

// TestMaxSourceInfluenceSetting: the configured bound reaches the network
// time, and 0 in the configuration means no bound (not clocksync's
// default). The master and one slave 990 s off: BSD's midpoint unbounded.
func TestMaxSourceInfluenceSetting(t *testing.T) {
	liar := []clocksync.HostOffset{{Offset: 990 * time.Second, ErrorBound: time.Millisecond, Trusted: true, Responsive: true}}
	for _, c := range []struct {
		bound, want time.Duration
	}{
		{50 * time.Millisecond, 50 * time.Millisecond},
		{10 * time.Millisecond, 10 * time.Millisecond},
		{0, 495 * time.Second},
	} {
		cfg := &config.Config{Sync: config.Sync{MaxSourceInfluence: c.bound}}
		if got := clocksync.NetworkTime(liar, networkOptions(cfg)).Offset; got != c.want {
			t.Errorf("max-source-influence %v: network time %v, want %v", c.bound, got, c.want)
		}
	}
}

// TestPlanRoundOutlier: a slave whose round trip is far above its recent
// minimum (a scheduling delay on its side) neither votes nor gets the
// correction its bad reading asks for; the round after, back at its usual
// round trip, it is corrected in full.
func TestPlanRoundOutlier(t *testing.T) {
	us := time.Microsecond
	slaves := []election.Peer{{Name: "a", Addr: netip.MustParseAddrPort("192.0.2.1:525")},
		{Name: "b", Addr: netip.MustParseAddrPort("192.0.2.2:525")}, {Name: "c", Addr: netip.MustParseAddrPort("192.0.2.3:525")}}
	trusted := []bool{true, true, true}
	rtt := clocksync.NewRTTHistory(0)
	round := func(offC, rttC time.Duration) (clocksync.NetworkResult, []election.Correction) {
		res := make([]clocksync.Result, 3)
		for i, s := range slaves {
			res[i] = clocksync.Result{Host: s.Addr, Measurement: clocksync.Measurement{Offset: 20 * us, RTT: 200 * us, ErrorBound: 100 * us}}
		}
		res[2].Offset, res[2].RTT, res[2].ErrorBound = offC, rttC, rttC/2
		return planRound(res, slaves, trusted, rtt, false, clocksync.NetworkOptions{}, clocksync.CorrectOptions{})
	}
	nt, corr := round(20*us, 200*us) // everyone at +20 µs, usual round trips
	if nt.Offset != 15*us || len(corr) != 3 || corr[2].Delta != -5*us {
		t.Fatalf("clean round: network %v, corrections %+v", nt.Offset, corr)
	}
	// c's reply left 3 ms late: its offset reads 1.5 ms low, its RTT 3 ms high.
	nt, corr = round(20*us-1500*us, 3200*us)
	if nt.Used[2] || nt.Offset != 40*us/3 { // the master (0), a and b
		t.Fatalf("the delayed sample voted: network %v, used %v", nt.Offset, nt.Used)
	}
	if corr[2].Delta != 0 || corr[2].Set {
		t.Fatalf("the delayed slave was sent %+v, want nothing (the delay explains it)", corr[2])
	}
	if _, corr = round(20*us, 200*us); corr[2].Delta != -5*us {
		t.Fatalf("back to normal: %+v", corr[2])
	}
}

// TestPlanRoundNear: planRound marks the corrections a slave not set yet
// may be sent as ADJTIME (Near): those below the slaves' slewing range
// (AdjustNewBelow). Beyond it the machine sets such a slave (SETTIME),
// and at or above the step threshold everyone (Set).
func TestPlanRoundNear(t *testing.T) {
	ms := time.Millisecond
	slaves := []election.Peer{{Name: "near", Addr: netip.MustParseAddrPort("192.0.2.1:525")},
		{Name: "off", Addr: netip.MustParseAddrPort("192.0.2.2:525")}, {Name: "far", Addr: netip.MustParseAddrPort("192.0.2.3:525")}}
	res := []clocksync.Result{
		{Host: slaves[0].Addr, Measurement: clocksync.Measurement{Offset: -300 * time.Microsecond, RTT: 200 * time.Microsecond, ErrorBound: 100 * time.Microsecond}},
		{Host: slaves[1].Addr, Measurement: clocksync.Measurement{Offset: 500 * ms, RTT: 200 * time.Microsecond, ErrorBound: 100 * time.Microsecond}},
		{Host: slaves[2].Addr, Measurement: clocksync.Measurement{Offset: 30 * time.Second, RTT: 200 * time.Microsecond, ErrorBound: 100 * time.Microsecond}},
	}
	opt := clocksync.CorrectOptions{StepThreshold: 20 * time.Second, AdjustNewBelow: 100 * ms}
	_, corr := planRound(res, slaves, []bool{true, true, true}, clocksync.NewRTTHistory(0), true, clocksync.NetworkOptions{}, opt)
	want := []election.Correction{
		{Name: "near", Delta: 300 * time.Microsecond, Near: true},
		{Name: "off", Delta: -500 * ms},
		{Name: "far", Set: true},
	}
	if !slices.Equal(corr, want) {
		t.Fatalf("corrections %+v, want %+v", corr, want)
	}
}

// TestNextRound: the master's round interval from its rounds' corrections.
// Fixed rounds (sync-interval-min = sync-interval) leave it to the
// machine (0: the sync-interval); adaptive ones start at the floor and
// lengthen while the corrections stay small; a BSD slave (measured by
// ICMP), whose corrections grow with any interval, is served but does
// not hold them short; a slave our probe measures does.
func TestNextRound(t *testing.T) {
	slaves := []election.Peer{{Name: "a", Addr: netip.MustParseAddrPort("192.0.2.1:525")}, {Name: "bsd", Addr: netip.MustParseAddrPort("192.0.2.2:525")}}
	icmp := &fallbackMeasurer{hosts: map[netip.AddrPort]*hostProtocol{slaves[1].Addr: {bsd: true, last: "icmp"}}}
	rt := func(floor time.Duration) *netRuntime {
		cfg := &config.Config{Election: election.Config{SyncInterval: 240 * time.Second},
			Sync: config.Sync{IntervalFloor: floor, IntervalTarget: 20 * time.Microsecond}}
		d := &Daemon{hostname: "m", measurer: icmp, log: logrus.New(), cfg: cfg}
		return &netRuntime{d: d, log: logrus.NewEntry(d.log), rounds: clocksync.NewIntervalController(intervalConfig(cfg))}
	}
	// round runs one round on r, the BSD slave off by bsd and "a" by a.
	round := func(r *netRuntime, a, bsd time.Duration) time.Duration {
		r.prevAt, r.roundAt = r.roundAt, r.roundAt.Add(r.rounds.Interval())
		s := syncDone{slaves: slaves,
			measured: []clocksync.Result{{Host: slaves[0].Addr}, {Host: slaves[1].Addr}},
			result:   election.SyncResult{Corrections: []election.Correction{{Name: "a", Delta: a}, {Name: "bsd", Delta: bsd}}}}
		return r.nextRound(s)
	}
	fixed := rt(240 * time.Second)
	if got := round(fixed, time.Millisecond, time.Millisecond); got != 0 {
		t.Fatalf("fixed rounds: next %v, want 0 (the sync-interval)", got)
	}
	ad := rt(8 * time.Second)
	ad.roundAt = t0
	var got []time.Duration
	for range 12 {
		// The BSD slave drifts 40 ppm: 320 µs over 8 s, 9.6 ms over 240 s.
		bsd := time.Duration(40e-6 * float64(ad.rounds.Interval()))
		got = append(got, round(ad, 2*time.Microsecond, bsd))
	}
	if got[0] != 8*time.Second || got[len(got)-1] != 240*time.Second {
		t.Fatalf("adaptive rounds with a BSD slave: %v, want from the floor to the ceiling", got)
	}
	// What the status shows: the interval the rounds run at.
	if ad.roundInterval() != 240*time.Second || fixed.roundInterval() != 240*time.Second {
		t.Fatalf("round intervals shown: adaptive %v, fixed %v; want 240s", ad.roundInterval(), fixed.roundInterval())
	}
	// Our slave's corrections grow (its temperature changed): shorter.
	if next := round(ad, 200*time.Microsecond, 0); next >= 240*time.Second {
		t.Fatalf("a slave corrected by 200 µs after 240 s: next %v, want shorter", next)
	}
}

package timed

import (
	"net/netip"
	"testing"
	"time"

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

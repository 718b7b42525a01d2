package timed

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/clocksync/probesim"
	"github.com/timed-project/timed/election"
)

// TestRoundHalfStoppedNoneDropped is the scene in the daemon's
// round, in virtual time: a master with 300 slaves (fast profile, a 2 s
// measuring budget) measures all of them once; then every other slave
// stops. In each of the next rounds, more than LostHost of them, every
// live slave is measured (so it gets its correction and the machine
// never drops it), each stopped one fails, and the round ends within its
// budget. The measurer is the daemon's: probe first, ICMP for a host
// that ignores it (here ICMP goes unanswered too).
func TestRoundHalfStoppedNoneDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 300
		cfg := election.FastConfig("master")
		budget := roundBudget(cfg.SyncInterval)
		src := clocksync.NewMonotonicSource()
		net := probesim.New(netip.MustParseAddrPort("10.0.0.1:525"), clocksync.NewSimClock(src, clocksync.SimConfig{}), clocksync.ProbeConfig{}, 100*time.Microsecond)
		measurer := newFallbackMeasurer(net.Client, silentMeasurer{})
		var list []election.Peer
		for i := range n {
			p := election.Peer{Name: fmt.Sprintf("s%03d", i), Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 525)}
			list = append(list, p)
			net.Start(p.Addr, clocksync.NewProbeResponder(clocksync.NewSimClock(src, clocksync.SimConfig{Offset: time.Duration(i) * time.Millisecond}), p.Name))
		}
		var st netStatus
		st.setSlaves(list)
		stopped := func(i int) bool { return i%2 == 1 }
		for round := range 2 + cfg.LostHost {
			if round == 1 {
				for i, p := range list {
					if stopped(i) {
						net.Stop(p.Addr)
					}
				}
			}
			slaves, hosts := st.roundHosts(list)
			start := time.Now()
			res := clocksync.MeasureRound(context.Background(), measurer, hosts, clocksync.RoundOptions{Deadline: start.Add(budget)})
			if took := time.Since(start); took > budget {
				t.Fatalf("round %d took %v, over its budget %v", round, took, budget)
			}
			st.roundMeasured(syncDone{slaves: slaves, measured: res}, time.Now(), measurer.method)
			for i, p := range list {
				sl := st.slaves[p.Name]
				switch {
				case round == 0 || !stopped(i):
					if sl.Failures != 0 || sl.State != "measured" {
						t.Fatalf("round %d: live slave %s: %d failed rounds, state %s", round, p.Name, sl.Failures, sl.State)
					}
				case sl.Failures != round:
					t.Fatalf("round %d: stopped slave %s: %d failed rounds, want %d", round, p.Name, sl.Failures, round)
				}
			}
			t.Logf("round %d: %d live of %d measured in %v of virtual time (budget %v)", round, liveCount(res), n, time.Since(start), budget)
		}
	})
}

func liveCount(res []clocksync.Result) int {
	k := 0
	for _, r := range res {
		if r.Err == nil {
			k++
		}
	}
	return k
}

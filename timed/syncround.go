package timed

import (
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/config"
	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp"
)

// syncDone carries a finished round back to the loop: whose round it
// was, what the machine needs, and the measurements for the status.
type syncDone struct {
	rt       *netRuntime
	result   election.SyncResult
	slaves   []election.Peer
	measured []clocksync.Result
	network  clocksync.NetworkResult
}

// roundBudget is the share of the sync interval a round may spend
// measuring: the rest is left for the corrections to be sent and
// acknowledged before the next round.
func (d *Daemon) roundBudget() time.Duration {
	return min(d.cfg.Election.SyncInterval/2, 3*time.Second)
}

// startSyncRound measures every slave concurrently, off the loop, and
// posts the result back. A master with no slaves needs no measurement.
func (rt *netRuntime) startSyncRound(r election.SyncRound) {
	d := rt.d
	hosts := make([]netip.AddrPort, len(r.Slaves))
	for i, s := range r.Slaves {
		hosts[i] = s.Addr
	}
	trusted := make([]bool, len(r.Slaves))
	for i, s := range r.Slaves {
		trusted[i] = rt.m().Trusted(s.Addr)
	}
	deadline := time.Now().Add(d.roundBudget())
	// The master's clock is the truth of the round (BSD dictate) when the
	// Host says so (a submaster, or a network other than the one whose
	// rounds vote) and for a few rounds after a date change.
	dictate := r.Dictate || rt.date.dictate > 0
	if rt.date.dictate > 0 {
		rt.date.dictate--
	}
	// Read on the loop: a SIGHUP reload replaces d.cfg while the round runs.
	opt := clocksync.CorrectOptions{StepThreshold: d.cfg.Sync.StepThreshold}
	netOpt := networkOptions(d.cfg)
	d.rounds.Add(1)
	go func() {
		defer d.rounds.Done()
		res := clocksync.MeasureAll(d.roundCtx, d.measurer, hosts, deadline, 0)
		done := syncDone{rt: rt, result: election.SyncResult{Round: r.Round}, slaves: r.Slaves, measured: res}
		offsets := make([]clocksync.HostOffset, len(res))
		for i, m := range res {
			offsets[i] = clocksync.HostOffset{Offset: m.Offset, ErrorBound: m.ErrorBound, Trusted: trusted[i], Responsive: m.Err == nil}
		}
		// Dictating, the slaves follow the master's clock: no vote, and
		// Own stays 0.
		if !dictate {
			done.network = clocksync.NetworkTime(offsets, netOpt)
		}
		done.result.Own = done.network.Offset
		for i, m := range res {
			if m.Err != nil {
				continue // the machine counts a missing slave as a failed round
			}
			// BSD's correct(): ADJTIME below the step threshold, SETTIME
			// (carrying the network time, which the machine stamps) at or
			// above it.
			plan := clocksync.PlanCorrection(done.network.Offset, m.Offset, false, time.Time{}, opt)
			done.result.Corrections = append(done.result.Corrections, election.Correction{
				Name: r.Slaves[i].Name, Delta: plan.Adjust, Set: plan.Type == tsp.SetTime})
		}
		select {
		case d.syncCh <- done:
		case <-d.roundCtx.Done():
		}
	}()
}

// networkOptions maps the configuration onto clocksync's: there zero
// means the default bound and a negative value none; in the configuration
// 0 is "no bound", as a sysadmin reads it.
func networkOptions(cfg *config.Config) clocksync.NetworkOptions {
	b := cfg.Sync.MaxSourceInfluence
	if b <= 0 {
		b = -1
	}
	return clocksync.NetworkOptions{MaxSourceInfluence: b}
}

// syncFinished hands the corrections to the Host (whose machine sends
// them) and applies the master's own share to its clock, if this network
// still votes for it: a round that started voting, after which the host
// came to follow a master elsewhere (or lost this network), leaves the
// clock to that.
func (rt *netRuntime) syncFinished(s syncDone) {
	d := rt.d
	rt.st.roundMeasured(s)
	d.metrics.roundMeasured(rt.label, s)
	failed := 0
	for i, m := range s.measured {
		if m.Err != nil {
			failed++
			rt.log.WithError(m.Err).WithField("slave", s.slaves[i].Name).Debug("slave not measured")
		}
	}
	rt.log.WithFields(logrus.Fields{"round": s.result.Round, "slaves": len(s.slaves), "unmeasured": failed,
		"network_offset": s.network.Offset, "kept": s.network.Kept}).Debug("sync round measured")
	votes := d.host.Running(rt.i) && d.host.State(rt.i).IsMaster() && !d.host.Dictates(rt.i)
	rt.step(s.result, time.Time{})
	if s.result.Own != 0 && votes {
		d.applyAdjust(s.result.Own, d.hostname)
	}
}

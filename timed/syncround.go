package timed

import (
	"slices"
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

// roundBudget is the share of the round's interval a round may spend
// measuring: the rest is left for the corrections to be sent and
// acknowledged before the next round.
func roundBudget(interval time.Duration) time.Duration {
	return min(interval/2, 3*time.Second)
}

// startSyncRound measures every slave concurrently, off the loop, and
// posts the result back. A master with no slaves needs no measurement.
func (rt *netRuntime) startSyncRound(r election.SyncRound) {
	d := rt.d
	slaves, hosts := rt.st.roundHosts(r.Slaves)
	trusted := make([]bool, len(slaves))
	for i, s := range slaves {
		trusted[i] = rt.m().Trusted(s.Addr)
	}
	rt.prevAt, rt.roundAt = rt.roundAt, time.Now()
	deadline := rt.roundAt.Add(roundBudget(rt.roundInterval()))
	// The master's clock is the truth of the round (BSD dictate) when the
	// Host says so (a submaster, or a network other than the one whose
	// rounds vote) and for a few rounds after a date change.
	// A reference's clock is the truth while it claims to be one.
	dictate := r.Dictate || rt.date.dictate > 0 || d.refClaiming()
	if rt.date.dictate > 0 {
		rt.date.dictate--
	}
	// Read on the loop: a SIGHUP reload replaces d.cfg while the round runs.
	opt := clocksync.CorrectOptions{StepThreshold: d.cfg.Sync.StepThreshold, AdjustNewBelow: localStepThreshold(d.cfg)}
	netOpt := networkOptions(d.cfg)
	d.rounds.Add(1)
	go func() {
		defer d.rounds.Done()
		res := clocksync.MeasureRound(d.roundCtx, d.measurer, hosts, clocksync.RoundOptions{Deadline: deadline})
		done := syncDone{rt: rt, result: election.SyncResult{Round: r.Round}, slaves: slaves, measured: res}
		done.network, done.result.Corrections = planRound(res, slaves, trusted, d.rtt, dictate, netOpt, opt)
		done.result.Own = done.network.Offset
		select {
		case d.syncCh <- done:
		case <-d.roundCtx.Done():
		}
	}()
}

// planRound is the round's arithmetic once the slaves are measured: the
// network time (none when dictating: the slaves follow the master's
// clock, and Own stays 0) and each measured slave's correction, in the
// order of res, which is that of slaves and trusted.
//
// A sample whose round trip is far above the slave's recent minimum (rtt)
// was delayed on the way: it does not vote, and its slave is sent only
// what the delay cannot explain (clocksync.PlanJustified).
func planRound(res []clocksync.Result, slaves []election.Peer, trusted []bool, rtt *clocksync.RTTHistory, dictate bool,
	netOpt clocksync.NetworkOptions, opt clocksync.CorrectOptions) (clocksync.NetworkResult, []election.Correction) {
	offsets := make([]clocksync.HostOffset, len(res))
	hosts, ms, ok := make([]string, len(res)), make([]clocksync.Measurement, len(res)), make([]bool, len(res))
	for i, m := range res {
		hosts[i], ms[i], ok[i] = m.Host.String(), m.Measurement, m.Err == nil
	}
	verdicts := rtt.JudgeRound(hosts, ms, ok)
	for i, m := range res {
		offsets[i] = clocksync.HostOffset{Offset: m.Offset, ErrorBound: m.ErrorBound, Trusted: trusted[i], Responsive: m.Err == nil && !verdicts[i].Outlier}
	}
	var network clocksync.NetworkResult
	if !dictate {
		network = clocksync.NetworkTime(offsets, netOpt)
	}
	var corrections []election.Correction
	for i, m := range res {
		if m.Err != nil {
			continue // the machine counts a missing slave as a failed round
		}
		// BSD's correct(): ADJTIME below the step threshold, SETTIME
		// (carrying the network time, which the machine stamps) at or
		// above it. Near: what a slave the machine has not set yet
		// (after a master change, every slave) would get is ADJTIME too
		// (clocksync.CorrectOptions.AdjustNewBelow).
		plan := clocksync.PlanJustified(network.Offset, m.Offset, verdicts[i].Slack, false, time.Time{}, opt)
		asNew := clocksync.PlanJustified(network.Offset, m.Offset, verdicts[i].Slack, true, time.Time{}, opt)
		corrections = append(corrections, election.Correction{Name: slaves[i].Name, Delta: plan.Adjust,
			Set: plan.Type == tsp.SetTime, Near: asNew.Type == tsp.AdjTime})
	}
	return network, corrections
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
// still votes for it and the machine takes the round: a round that
// started voting, after which the host came to follow a master elsewhere
// (or lost this network), leaves the clock to that; and a round the
// machine discards as stale (a SETDATE landed while it measured, which
// started a new one) would undo the date change.
func (rt *netRuntime) syncFinished(s syncDone) {
	d := rt.d
	rt.st.roundMeasured(s, time.Now(), d.methodOf)
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
	// RoundOpen covers a stopped or ignored network too: its machine is
	// then no master.
	votes := !d.host.Dictates(rt.i) && d.host.Machine(rt.i).RoundOpen(s.result.Round)
	if d.host.Machine(rt.i).RoundOpen(s.result.Round) {
		s.result.Next = rt.nextRound(s)
	}
	rt.step(s.result, time.Time{})
	var own clocksync.Applied
	var err error
	if s.result.Own != 0 && votes && d.ref == nil {
		own, err = d.applyAdjust(s.result.Own, d.hostname)
	}
	d.st.basis = d.roundBasis(rt.st.round, own, err == nil && own.Action != clocksync.Refused)
	d.ks.dirty = true
}

// roundHosts is the round's slaves in measureOrder, and each one's host
// for MeasureRound: a slave that answered the last round is given up
// after eight unanswered probes' waits, any other (new, or silent last
// round) after four, so that dead slaves cost the round little.
func (s *netStatus) roundHosts(list []election.Peer) ([]election.Peer, []clocksync.RoundHost) {
	order := s.measureOrder(list)
	hosts := make([]clocksync.RoundHost, len(order))
	for i, p := range order {
		hosts[i] = clocksync.RoundHost{Addr: p.Addr, Answered: s.answered(p.Name) && s.slaves[p.Name].Failures == 0}
	}
	return order, hosts
}

// answered: the slave has answered a measurement before.
func (s *netStatus) answered(name string) bool {
	sl := s.slaves[name]
	return sl != nil && !sl.LastSeen.IsZero()
}

// measureOrder is the order a round measures the slaves in: those that
// have answered a measurement before first, then the others, each part in
// the machine's order (by name). MeasureRound starts the hosts in this
// order, and gives one that did not answer last round only a short
// deadline; before it did, a host that never answered held one of a
// bounded number of places until the round's deadline: in name order,
// enough names that answer nothing (an outsider's SLAVEUPs and ACCEPTs
// under made-up names, which sort anywhere) kept the real slaves from
// being measured at all, so that they got no correction, dropped out of
// the table and ran for election.
func (s *netStatus) measureOrder(list []election.Peer) []election.Peer {
	out := slices.Clone(list)
	slices.SortStableFunc(out, func(a, b election.Peer) int {
		switch aa, ba := s.answered(a.Name), s.answered(b.Name); {
		case aa == ba:
			return 0
		case aa:
			return -1
		}
		return 1
	})
	return out
}

// nextRound is when the next round begins, from the start of this one:
// the interval controller's choice from this round's corrections (0, the
// sync-interval, with fixed rounds). Slaves measured by ICMP timestamps
// are BSD daemons, which do not discipline their frequency: their
// corrections grow with any interval, and they are served at whatever
// interval the others need (they accept ADJTIME whenever it comes).
func (rt *netRuntime) nextRound(s syncDone) time.Duration {
	if rt.rounds.Fixed() {
		return 0
	}
	sent := make(map[string]election.Correction, len(s.result.Corrections))
	for _, c := range s.result.Corrections {
		sent[c.Name] = c
	}
	hosts := []clocksync.HostCorrection{{Host: rt.d.hostname, Correction: s.result.Own}}
	for i, sl := range s.slaves {
		c, ok := sent[sl.Name]
		if !ok || s.measured[i].Err != nil || rt.d.methodOf(s.measured[i].Host) == "icmp" {
			continue
		}
		hosts = append(hosts, clocksync.HostCorrection{Host: sl.Name, Correction: c.Delta, New: c.Set})
	}
	var since time.Duration
	if !rt.prevAt.IsZero() {
		since = rt.roundAt.Sub(rt.prevAt)
	}
	dec := rt.rounds.Round(since, hosts)
	if dec.Change != "hold" {
		rt.log.WithFields(logrus.Fields{"change": dec.Change, "next": dec.Next, "reason": dec.Reason,
			"noise": dec.Noise, "error": dec.Drift}).Debug("sync interval")
	}
	return dec.Next
}

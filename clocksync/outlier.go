package clocksync

import (
	"slices"
	"sync"
	"time"
)

// Outliers: a measurement whose round trip is far above what the same
// host's path gave in recent rounds was delayed on the way (a queue, or a
// daemon that read its clock and was then descheduled before the packet
// left). Such a delay on one side moves the offset by half of it and the
// RTT by all of it, so the excess RTT bounds the extra error, and the
// master uses it twice:
//
//   - it leaves the sample out of the network time (Judged.Outlier), and
//   - it sends the slave only the part of its correction the excess cannot
//     explain (Justify, PlanJustified): a correction the delay alone could
//     account for is not sent.
//
// The same samples were already weighed by their error bound (RTT/2) in
// the network time's mean; what was missing is the per-slave correction,
// which took the outlier in full.

// Defaults of the RTT history.
const (
	// RTTRounds is how many rounds a host's minimum RTT is remembered: a
	// path that became slower for good is the new normal after that.
	RTTRounds = 8
	// DefaultMaxRTTHosts bounds the history (the election's table holds at
	// most a few thousand slaves; beyond, the least recently seen go).
	DefaultMaxRTTHosts = 4096
)

type rttEntry struct {
	min  [RTTRounds]time.Duration // the round minima, a ring
	n    int                      // rounds held
	next int                      // index of the next to write
	seen uint64                   // the history's clock when last observed
}

// RTTHistory remembers each host's round-trip time over its last RTTRounds
// rounds, for at most a bounded number of hosts. It is safe for
// concurrent use.
type RTTHistory struct {
	mu    sync.Mutex
	max   int
	clock uint64
	hosts map[string]*rttEntry
}

// NewRTTHistory returns a history of at most maxHosts hosts (≤ 0:
// DefaultMaxRTTHosts).
func NewRTTHistory(maxHosts int) *RTTHistory {
	if maxHosts <= 0 {
		maxHosts = DefaultMaxRTTHosts
	}
	return &RTTHistory{max: maxHosts, hosts: make(map[string]*rttEntry)}
}

// Len is the number of hosts remembered.
func (h *RTTHistory) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.hosts)
}

// Observe records host's RTT of this round and returns the least RTT of
// its remembered rounds, this one included. Call it once per host and
// round; a negative RTT is taken as 0.
func (h *RTTHistory) Observe(host string, rtt time.Duration) time.Duration {
	least, _ := h.observe(host, rtt)
	return least
}

// observe is Observe, also returning the rounds now held.
func (h *RTTHistory) observe(host string, rtt time.Duration) (time.Duration, int) {
	rtt = max(rtt, 0)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clock++
	e := h.hosts[host]
	if e == nil {
		if len(h.hosts) >= h.max {
			h.evict()
		}
		e = &rttEntry{}
		h.hosts[host] = e
	}
	e.seen = h.clock
	e.min[e.next] = rtt
	e.next = (e.next + 1) % RTTRounds
	e.n = min(e.n+1, RTTRounds)
	return e.least(), e.n
}

// least is the least RTT of the rounds held (e.n ≥ 1).
func (e *rttEntry) least() time.Duration {
	return slices.Min(e.min[:e.n])
}

// Floor is the least RTT of host's remembered rounds, 0 if none: the
// floor its path has shown lately, which the probe's filter weighs
// samples against. It records nothing.
func (h *RTTHistory) Floor(host string) time.Duration {
	if h == nil {
		return 0 // no history (BSD settings): no floor known
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.hosts[host]
	if e == nil || e.n == 0 {
		return 0
	}
	return e.least()
}

// evict drops the host observed least recently. Called with mu held, and
// only when the table is full: a linear scan, as rare as a new host.
func (h *RTTHistory) evict() {
	var oldest string
	var at uint64
	first := true
	for k, e := range h.hosts {
		if first || e.seen < at {
			oldest, at, first = k, e.seen, false
		}
	}
	delete(h.hosts, oldest)
}

// Judged is a measurement compared with its host's recent minimum RTT.
type Judged struct {
	MinRTT time.Duration // the least RTT of the host's recent rounds
	// Excess is (RTT − MinRTT)/2: how much more the offset may be off
	// than with the host's best recent path.
	Excess time.Duration
	// Outlier: the RTT is more than twice the minimum and more than
	// 2·DefaultMinErrorBound above it (Excess beyond the path's usual
	// jitter); the sample does not vote.
	Outlier bool
	// Slack is what the correction sent is moved towards zero by
	// (PlanJustified): for an outlier Excess, or what its error bound
	// allows beyond half the minimum RTT if that is more; 0 otherwise.
	Slack time.Duration
}

// Judge records m's RTT for host and judges m against the host's recent
// minimum. A nil history judges nothing (BSD: every sample in full).
func (h *RTTHistory) Judge(host string, m Measurement) Judged {
	return h.judge(host, m, 0)
}

// youngRounds: a host with fewer rounds than this in its history has not
// shown its path's floor yet (its first rounds may all have been
// delayed), and is judged against the round's typical RTT as well.
const youngRounds = RTTRounds / 2

// JudgeRound judges one round's measurements (those with ok[i]) of hosts:
// each against its host's recent minimum, as Judge, and a host young in
// the history also against the median RTT of the round, the path a slave
// on this network typically has. Without that, a slave whose first two
// rounds were both delayed would set its own floor at the delay and be
// followed in full. A host far away for good is judged by its own
// history after youngRounds rounds.
func (h *RTTHistory) JudgeRound(hosts []string, ms []Measurement, ok []bool) []Judged {
	out := make([]Judged, len(ms))
	var rtts []time.Duration
	for i, m := range ms {
		if ok[i] {
			rtts = append(rtts, m.RTT)
		}
	}
	var typical time.Duration
	if len(rtts) >= 3 { // a median of fewer says little
		slices.Sort(rtts)
		typical = rtts[len(rtts)/2]
	}
	for i, m := range ms {
		if ok[i] {
			out[i] = h.judge(hosts[i], m, typical)
		}
	}
	return out
}

// judge is Judge with typical, the round's median RTT (0: none), as the
// reference of a young host.
func (h *RTTHistory) judge(host string, m Measurement, typical time.Duration) Judged {
	if h == nil {
		return Judged{MinRTT: m.RTT}
	}
	least, n := h.observe(host, m.RTT)
	if typical > 0 && n < youngRounds {
		least = min(least, typical)
	}
	j := Judged{MinRTT: least, Excess: max(m.RTT-least, 0) / 2}
	j.Outlier = m.RTT > 2*least && m.RTT-least > 2*DefaultMinErrorBound
	if j.Outlier {
		// A measurement that combines several samples (SampleSet) can
		// sit anywhere in its error bound, not only where the best
		// sample's delay puts it: the slack covers what its bound
		// allows beyond the path's best, whichever is more.
		j.Slack = max(j.Excess, m.ErrorBound-least/2)
	}
	return j
}

// Justify is the part of a correction that a measurement can justify when
// excess of its error may come from a delay on one side: corr moved
// towards zero by excess, and zero if it is within excess. With a
// measured offset m = x + e, the delay's share of e at most excess, the
// justified correction is never further past the true one than the
// path's usual error allows: a reading the delay explains moves nobody.
//
// The master passes Judged.Slack: the Excess of outliers only. Shrinking
// every correction by its error bound (RTT/2) would be a dead band around
// zero, in which every clock wanders to the edge of its error bound;
// shrinking every one by its Excess still did that at the scale of the
// path's jitter (simsync, N = 50: p99 spread up to 150 µs against 80 µs),
// and shrinking outliers only by their Excess beyond the jitter let a
// busy slave's errors through (p95 130 µs against 70 µs). Clean samples
// are sent in full and averaged out by the network time and the
// frequency discipline.
func Justify(corr, excess time.Duration) time.Duration {
	switch {
	case excess <= 0:
		return corr
	case corr > excess:
		return corr - excess
	case corr < -excess:
		return corr + excess
	}
	return 0
}

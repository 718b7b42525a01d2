package netbench

import (
	"math"
	"slices"
	"time"
)

// Sample is what one poll of every daemon saw.
type Sample struct {
	At time.Duration // since the simultaneous start
	// Offsets is each daemon's simulated clock minus the kernel clock, in
	// seconds; nil unless every daemon answered.
	Offsets []float64
	// Master is the index of the one master every other daemon follows,
	// or -1.
	Master int
	// Packets is each daemon's TSP and extension packets, sent and
	// received, so far; nil unless every daemon answered.
	Packets []uint64
	// Loops is each daemon's LOOP packets among Packets: the master's
	// broadcast, one a round, which BSD's count of ~12 leaves out.
	Loops []uint64
	// CPU is each daemon's CPU time so far, in seconds; nil unless it
	// could be read for all.
	CPU []float64
	// Rounds is the master's sync rounds counter (its metrics), or -1.
	Rounds float64
	// Poll is how long reading every daemon's status took: the offsets
	// were read that far apart at most.
	Poll time.Duration
}

// Spread is the largest offset between two clocks: max − min.
func Spread(offsets []float64) float64 {
	if len(offsets) == 0 {
		return math.NaN()
	}
	return slices.Max(offsets) - slices.Min(offsets)
}

// Percentile is the nearest-rank p-th percentile of xs (p in 0–100), NaN
// for none.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	k := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// FirstMaster is when the samples first saw one master followed by all.
func FirstMaster(ss []Sample) (time.Duration, bool) {
	for _, s := range ss {
		if s.Master >= 0 {
			return s.At, true
		}
	}
	return 0, false
}

// ForGood is the time of the first sample from which on every sample's
// spread is under bound: the spread fell below it and stayed there to
// the end, for hold at least (a run that ends just after the spread
// first dips under the bound has not shown that it stays there).
// Samples where some daemon did not answer are passed over. False if the
// last known spread is not under bound, or has been for less than hold.
func ForGood(ss []Sample, bound float64, hold time.Duration) (time.Duration, bool) {
	var at time.Duration
	ok := false
	for _, s := range ss {
		if s.Offsets == nil {
			continue
		}
		switch under := Spread(s.Offsets) < bound; {
		case !under:
			ok = false
		case !ok:
			at, ok = s.At, true
		}
	}
	if ok && ss[len(ss)-1].At-at < hold {
		return 0, false
	}
	return at, ok
}

// Figures are one run's results.
type Figures struct {
	MasterAfter   time.Duration
	HasMaster     bool
	P50, P95, Max float64       // spread over the steady window, seconds
	SpreadSamples int           // samples in the steady window with every offset
	PollP95       time.Duration // p95 of the window's samples' Poll
	Under1ms      time.Duration
	Settled1ms    bool
	Under100us    time.Duration
	Settled100us  bool
	// PacketsPerSlaveRound: the slaves' packets (sent and received, all
	// types) over the window, per slave and per sync round the master
	// counted; NaN where the master changed or its rounds are unknown.
	PacketsPerSlaveRound float64
	// MeasurePacketsPerSlaveRound is the same without the LOOPs: the
	// measurement and the correction, BSD's anchor's basis.
	MeasurePacketsPerSlaveRound float64
	Rounds                      float64 // sync rounds in the window
	// PerSlaveMinute is the slaves' packets without LOOP (sent and
	// received) per slave and per minute, from the release to the end of
	// the run; PerSlaveMinuteSteady the same over the steady window. NaN
	// where unknown (or, in the window, the master changed). BSD's
	// anchor: 12 a 240 s round, 3 a minute.
	PerSlaveMinute, PerSlaveMinuteSteady float64
	// CPU over the window, as a fraction of one core: the master's, and
	// the median slave's; NaN when unknown.
	CPUMaster, CPUSlave float64
}

// Analyze draws the figures from a run's samples (in time order). The
// steady window is the last window of the run (the samples taken after
// the last one's time less window); a spread is under a bound for good
// when it has been for hold at the end.
func Analyze(ss []Sample, window, hold time.Duration) Figures {
	f := Figures{PacketsPerSlaveRound: math.NaN(), MeasurePacketsPerSlaveRound: math.NaN(), CPUMaster: math.NaN(), CPUSlave: math.NaN(),
		P50: math.NaN(), P95: math.NaN(), Max: math.NaN(), PerSlaveMinute: math.NaN(), PerSlaveMinuteSteady: math.NaN()}
	f.MasterAfter, f.HasMaster = FirstMaster(ss)
	f.Under1ms, f.Settled1ms = ForGood(ss, 1e-3, hold)
	f.Under100us, f.Settled100us = ForGood(ss, 100e-6, hold)
	if len(ss) == 0 {
		return f
	}
	from := ss[len(ss)-1].At - window
	var spreads, polls []float64
	var first, last *Sample
	for i := range ss {
		s := &ss[i]
		if s.At <= from {
			continue
		}
		if s.Offsets != nil {
			spreads = append(spreads, Spread(s.Offsets))
			polls = append(polls, float64(s.Poll))
		}
		if s.Master >= 0 && s.Packets != nil && s.Rounds >= 0 {
			if first == nil {
				first = s
			}
			last = s
		}
	}
	f.SpreadSamples = len(spreads)
	if len(spreads) > 0 {
		f.P50, f.P95, f.Max = Percentile(spreads, 50), Percentile(spreads, 95), slices.Max(spreads)
		f.PollP95 = time.Duration(Percentile(polls, 95))
	}
	f.PerSlaveMinute, f.PerSlaveMinuteSteady = budget(ss, from)
	if first == nil || first == last || first.Master != last.Master {
		return f
	}
	m := first.Master
	f.Rounds = last.Rounds - first.Rounds
	f.PacketsPerSlaveRound = perSlaveRound(first.Packets, last.Packets, m, f.Rounds)
	if loops := perSlaveRound(first.Loops, last.Loops, m, f.Rounds); !math.IsNaN(loops) {
		f.MeasurePacketsPerSlaveRound = f.PacketsPerSlaveRound - loops
	}
	if first.CPU != nil && last.CPU != nil && last.At > first.At {
		wall := (last.At - first.At).Seconds()
		var slaves []float64
		for i := range last.CPU {
			c := (last.CPU[i] - first.CPU[i]) / wall
			if i == m {
				f.CPUMaster = c
			} else {
				slaves = append(slaves, c)
			}
		}
		f.CPUSlave = Percentile(slaves, 50)
	}
	return f
}

// budget is packets per slave per minute from the release to the last
// sample with packets and a master, and from the first such sample after
// from to that one (NaN if the master changed between them).
func budget(ss []Sample, from time.Duration) (run, steady float64) {
	var first, last *Sample
	for i := range ss {
		s := &ss[i]
		if s.Master < 0 || s.Packets == nil {
			continue
		}
		if first == nil && s.At > from {
			first = s
		}
		last = s
	}
	run, steady = math.NaN(), math.NaN()
	if last == nil {
		return run, steady
	}
	run = PerSlaveMinute(Sample{}, *last)
	if first != nil && first.Master == last.Master {
		steady = PerSlaveMinute(*first, *last)
	}
	return run, steady
}

// PerSlaveMinute is the growth of the slaves' packets without LOOP
// (every daemon's but to's master) from one sample to a later one, per
// slave and per minute: BSD's budget's measure. A from without packets
// stands for the release, when every count was 0. NaN where to has no
// master or no packets, or no time passed.
func PerSlaveMinute(from, to Sample) float64 {
	n := len(to.Packets)
	if to.Master < 0 || n < 2 || len(to.Loops) != n || to.At <= from.At {
		return math.NaN()
	}
	if from.Packets == nil {
		from.Packets, from.Loops = make([]uint64, n), make([]uint64, n)
	}
	if len(from.Packets) != n || len(from.Loops) != n {
		return math.NaN()
	}
	var p uint64
	for i := range n {
		if i != to.Master {
			p += (to.Packets[i] - to.Loops[i]) - (from.Packets[i] - from.Loops[i])
		}
	}
	return float64(p) / float64(n-1) / (to.At - from.At).Minutes()
}

// Point is the spread of one sample: its time since the release, and
// max − min of the offsets, in seconds.
type Point struct {
	At     time.Duration
	Spread float64
}

// Series is the spread over time: a point per sample in which every
// daemon answered, in the samples' order.
func Series(ss []Sample) []Point {
	var ps []Point
	for _, s := range ss {
		if s.Offsets != nil {
			ps = append(ps, Point{At: s.At, Spread: Spread(s.Offsets)})
		}
	}
	return ps
}

// perSlaveRound is the slaves' (every daemon but the master m) growth of
// a counter from first to last, per slave and per round; NaN when either
// is missing or there are no rounds.
func perSlaveRound(first, last []uint64, m int, rounds float64) float64 {
	if rounds <= 0 || len(last) < 2 || len(first) != len(last) {
		return math.NaN()
	}
	var n uint64
	for i := range last {
		if i != m {
			n += last[i] - first[i]
		}
	}
	return float64(n) / float64(len(last)-1) / rounds
}

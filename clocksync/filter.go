package clocksync

import (
	"fmt"
	"time"
)

// Error bound of one sample. RTT/2 bounds the offset error by causality
// alone, as long as every send stamp is taken no later than its packet
// leaves and every receive stamp no earlier than it arrives: true of clock
// readings before the write, of kernel transmit stamps and of kernel
// receive stamps, whatever the scheduling delays (they lengthen the RTT,
// and the bound with it). What it leaves out is added:
//   - the resolution of the stamps: userStampRes for clock readings in
//     user space (the granularity of clock_gettime on common hardware is
//     well under it), nothing for the kernel's nanosecond stamps;
//   - the rates of the two clocks over the exchange and over the age of
//     the sample when samples are combined: rateTolerance, two clocks
//     each slewing (500 ppm) or drifting.
const (
	userStampRes  = time.Microsecond
	rateTolerance = 1000 // ppm, as a divisor: 1/1000 = 1000 ppm
)

// Weights. A sample whose RTT exceeds the path's floor by e has an offset
// error of at most e/2 from queueing; its weight is 1/(e + noise)², noise
// being what the stamps themselves add: a little for the kernel's, more
// for readings in user space, where a preemption sits between the reading
// and the write.
const (
	kernelNoise = time.Microsecond
	userNoise   = 5 * time.Microsecond
)

// Adaptive probe count (SampleSet.Enough).
const (
	// DefaultMinReplies is how many replies a measurement has at least,
	// unless it runs out of probes. Two end it only on a path at its
	// floor (SampleSet.Enough); otherwise settledReplies do.
	DefaultMinReplies = 2
	// settledReplies is how many replies the other stop rules need: the
	// minimum can only be seen to settle over three.
	settledReplies = 3
	// DefaultMaxReplies caps the replies of one measurement: a path that
	// stays noisy gets this many, as BSD's 12 did every time.
	DefaultMaxReplies = 8
	// stableFraction: a new reply that lowers the best RTT by no more
	// than this fraction of it means the minimum has settled.
	stableFraction = 0.1
	// nearFloorFraction: a best RTT within this fraction of the host's
	// floor from earlier rounds is as good as the path gets.
	nearFloorFraction = 0.2
	// kernelFloorSlack: a sample stamped by the kernel at both ends
	// within this of the floor is at the floor, however small the floor:
	// on a LAN the floor is a few µs and its jitter as much, and a sample
	// this far above it is off by at most half of it.
	kernelFloorSlack = 5 * time.Microsecond
	// stableCeiling: a minimum that has settled more than this many
	// times above the floor is still queueing: probe on.
	stableCeiling = 2
)

// SampleSet gathers the samples of one host's measurement, tells when
// enough have come, and combines them. It is not safe for concurrent use.
type SampleSet struct {
	// Floor is the host's smallest RTT in recent rounds (RTTHistory), 0
	// when unknown.
	Floor time.Duration
	// MinReplies and MaxReplies bound the replies Enough waits for
	// (defaults DefaultMinReplies, DefaultMaxReplies).
	MinReplies, MaxReplies int

	samples []Sample
	valid   int
	best    time.Duration // smallest RTT among valid samples
	gain    time.Duration // how much the last valid sample lowered best
}

// Add takes a sample (invalid ones are kept, and counted as bad).
func (s *SampleSet) Add(x Sample) {
	s.samples = append(s.samples, x)
	if !x.Valid() {
		return
	}
	s.valid++
	s.gain = 0
	if r := x.RTT(); s.valid == 1 || r < s.best {
		if s.valid > 1 {
			s.gain = s.best - r
		}
		s.best = r
	}
}

// Samples returns the samples added, in order; Update may change one.
func (s *SampleSet) Samples() []Sample { return s.samples }

// Update replaces sample i (a later exchange brought a better stamp).
func (s *SampleSet) Update(i int, x Sample) {
	if i < 0 || i >= len(s.samples) || !x.Valid() || !s.samples[i].Valid() {
		return
	}
	s.samples[i] = x
	s.best = x.RTT()
	for _, y := range s.samples {
		if y.Valid() {
			s.best = min(s.best, y.RTT())
		}
	}
}

func (s *SampleSet) limits() (lo, hi int) {
	lo, hi = s.MinReplies, s.MaxReplies
	if lo <= 0 {
		lo = DefaultMinReplies
	}
	if hi <= 0 {
		hi = DefaultMaxReplies
	}
	return min(lo, hi), hi
}

// Enough reports whether the measurement may stop: MaxReplies valid
// replies; or two (MinReplies allowing) of which one is stamped by the
// kernel at both ends and at the host's floor, so that the exchange the
// offset leans on is as clean as the path gets (this is what keeps a
// steady path to 2 probes a round); or at least three and a minimum RTT
// that is either as low as the host's floor allows or has stopped
// improving (the last reply did not lower it by more than stableFraction)
// without being far above the floor. Queueing only ever adds delay, so a
// minimum that keeps falling, or sits far above what the path has shown,
// is worth more probes.
func (s *SampleSet) Enough() bool {
	lo, hi := s.limits()
	switch {
	case s.valid >= hi:
		return true
	case s.valid < lo:
		return false
	case s.valid < settledReplies:
		return s.kernelAtFloor()
	case s.Floor > 0 && s.best <= s.nearFloor():
		return true
	}
	settled := float64(s.gain) <= stableFraction*float64(s.best)
	return settled && (s.Floor <= 0 || s.best <= stableCeiling*s.Floor)
}

func (s *SampleSet) nearFloor() time.Duration {
	return s.Floor + time.Duration(nearFloorFraction*float64(s.Floor))
}

// kernelAtFloor: a valid sample stamped by the kernel at both ends (its
// t3 came in a later reply) whose RTT is within kernelFloorSlack, or
// nearFloorFraction, of the host's known floor.
func (s *SampleSet) kernelAtFloor() bool {
	if s.Floor <= 0 {
		return false
	}
	near := max(s.nearFloor(), s.Floor+kernelFloorSlack)
	for _, x := range s.samples {
		if x.Valid() && x.KernelT1 && x.KernelT3 && x.RTT() <= near {
			return true
		}
	}
	return false
}

// sampleBound is a sample's honest error bound, aged to at.
func sampleBound(x Sample, at time.Time) time.Duration {
	b := x.RTT()/2 + x.T4.Sub(x.T1)/rateTolerance + at.Sub(x.T4)/rateTolerance
	if !x.KernelT1 || !x.KernelT3 {
		b += userStampRes
	}
	return b
}

func sampleNoise(x Sample) time.Duration {
	if x.KernelT1 && x.KernelT3 {
		return kernelNoise
	}
	return userNoise
}

// Measurement combines the valid samples within twice the best RTT, weighted by 1/(excess RTT over the floor + stamp noise)², their
// mean kept inside every sample's error interval. Its error bound is the
// distance from that mean to the farther end of the intersection of the
// intervals: every one holds the true offset, so their intersection does.
// sent is how many probes went.
func (s *SampleSet) Measurement(sent int) (Measurement, error) {
	if s.valid == 0 {
		if len(s.samples) > 0 {
			return Measurement{Sent: sent}, fmt.Errorf("%d replies: %w", len(s.samples), ErrBadSample)
		}
		return Measurement{Sent: sent}, ErrNoReply
	}
	best := s.best
	floor := best
	if s.Floor > 0 {
		floor = min(floor, s.Floor)
	}
	// used: the samples combined; Stamps tells which sides gave kernel
	// stamps, in any valid sample.
	used := func(x Sample) bool { return x.Valid() && x.RTT() <= 2*best }
	var at time.Time
	kernelT1, kernelT3 := false, false
	for _, x := range s.samples {
		if !x.Valid() {
			continue
		}
		kernelT1, kernelT3 = kernelT1 || x.KernelT1, kernelT3 || x.KernelT3
		if used(x) && x.T4.After(at) {
			at = x.T4
		}
	}
	var sw, so float64
	lo, hi := time.Duration(-1<<63), time.Duration(1<<63-1)
	var bestBound time.Duration
	var bestOff time.Duration
	for _, x := range s.samples {
		if !used(x) {
			continue
		}
		e := float64(x.RTT() - floor + sampleNoise(x))
		w := 1 / (e * e)
		off := x.Offset()
		sw += w
		so += w * float64(off)
		b := sampleBound(x, at)
		lo, hi = max(lo, off-b), min(hi, off+b)
		if x.RTT() == best {
			bestBound, bestOff = b, off
		}
	}
	off := time.Duration(so / sw)
	bound := bestBound
	if lo <= hi {
		off = max(lo, min(hi, off))
		bound = max(off-lo, hi-off)
	} else {
		// Disjoint intervals: a bound was not honest after all (a clock
		// stepped between the samples). Trust the best sample alone.
		off = bestOff
	}
	m := Measurement{Offset: off, ErrorBound: bound, RTT: best, At: at, Samples: s.valid, Sent: sent}
	switch {
	case kernelT1 && kernelT3:
		m.Stamps = StampsKernel
	case !kernelT1 && !kernelT3:
		m.Stamps = StampsUser
	default:
		m.Stamps = StampsMixed
	}
	return m, nil
}

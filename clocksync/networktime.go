package clocksync

import (
	"math"
	"slices"
	"time"
)

// HostOffset is one host's input to the network time: its measured offset
// from the master (positive = ahead of the master) and how it was measured.
type HostOffset struct {
	Offset     time.Duration
	ErrorBound time.Duration // RTT/2 of the measurement
	Trusted    bool          // passes the trust list (BSD good_host_name)
	Responsive bool          // measured this round (BSD: noanswer = 0, not HOSTDOWN)
}

// NetworkOptions are the parameters of the network time. The zero value
// means BSD's windows and our weighted mean (see the package doc).
type NetworkOptions struct {
	// Window keeps, in the second stage, trusted hosts within this distance
	// of the first-stage median (BSD GOOD_RANGE, 14 ms).
	Window time.Duration
	// UntrustedWindow is the same for untrusted hosts (BSD VGOOD_RANGE, 6 ms).
	UntrustedWindow time.Duration
	// BSD takes the median of the kept hosts, as networkdelta.c does,
	// instead of their weighted mean.
	BSD bool
	// MinErrorBound floors the error bound in the weights (default 100 µs), so
	// that the master's own exact zero does not outweigh everyone and
	// all LAN samples weigh about the same: only slow or congested paths
	// count for less.
	MinErrorBound time.Duration
	// MaxSourceInfluence bounds how far one host that disagrees with the
	// result (is more than Window from it) can move it in a round: the
	// result stays within this of the result without that host (see
	// NetworkTime). Zero: DefaultMaxSourceInfluence, or no bound with
	// BSD set; negative: no bound.
	MaxSourceInfluence time.Duration
}

// BSD's exclusion windows (facts §4, G: GOOD_RANGE, VGOOD_RANGE).
const (
	DefaultWindow          = 14 * time.Millisecond
	DefaultUntrustedWindow = 6 * time.Millisecond
	DefaultMinErrorBound   = 100 * time.Microsecond
	// DefaultMaxSourceInfluence is half of SlewStepThreshold: one host
	// alone never makes the master step, whatever it reports.
	DefaultMaxSourceInfluence = SlewStepThreshold / 2
)

func (o NetworkOptions) withDefaults() NetworkOptions {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.UntrustedWindow <= 0 {
		o.UntrustedWindow = DefaultUntrustedWindow
	}
	if o.MinErrorBound <= 0 {
		o.MinErrorBound = DefaultMinErrorBound
	}
	if o.MaxSourceInfluence == 0 && !o.BSD {
		o.MaxSourceInfluence = DefaultMaxSourceInfluence
	}
	return o
}

// NetworkResult is the network time as an offset from the master's clock,
// with how it was reached.
type NetworkResult struct {
	Offset time.Duration // network time − master's clock
	Median time.Duration // first-stage median
	Voters int           // hosts in the first stage, the master included
	Kept   int           // hosts in the second stage, the master included
	// Bounded: MaxSourceInfluence moved Offset from Unbounded, what the
	// two stages gave.
	Bounded   bool
	Unbounded time.Duration
	// Used[i] says whether hosts[i] was kept in the second stage, so that
	// its offset counted in the result (a responsive host left out is
	// beyond the window of the median: an outlier). Nil when no host was
	// responsive and trusted, and so only the master voted.
	Used []bool
}

// NetworkTimeBSD is BSD's networkdelta: the master (offset 0) and every
// trusted, responsive slave vote; if only the master is left the result
// is 0; otherwise the median of the votes, then the median of the hosts
// within 14 ms of it (6 ms for untrusted hosts).
func NetworkTimeBSD(hosts []HostOffset) time.Duration {
	return NetworkTime(hosts, NetworkOptions{BSD: true}).Offset
}

// NetworkTime computes the fault-tolerant network time from the slaves'
// offsets; the master itself is added as a trusted host at offset 0, with no
// measurement error.
//
//  1. Voters: the master and every trusted, responsive host. Only the master
//     → 0: the master never chases the others.
//  2. Their median.
//  3. Kept: responsive hosts, the master included, within Window of the
//     median (UntrustedWindow if untrusted). None kept → the median. One kept →
//     its offset. Otherwise their median (BSD) or their mean weighted by
//     1/max(ErrorBound, MinErrorBound)² (ours).
//  4. Bound (ours; BSD only if MaxSourceInfluence is set): for each
//     responsive slave more than Window from the result, the result
//     without it (steps 1–3). Those further than MaxSourceInfluence from
//     the result are its bounds: the result moves to the nearest point
//     within MaxSourceInfluence of each, if there is one.
//
// Step 4 is for small networks, where one host is a large share of the
// vote: with the master and one slave, the slave alone moves the result to
// the midpoint, 495 s for a slave set 990 s off by one forged SETTIME; now
// 50 ms. Hosts within Window of the result are not bounds: they agree with
// it, and when two hosts collude, removing an honest one can swing the
// median to the liars, which must not make the honest majority's answer
// suspect. When no point is within the bound of every result without a
// disagreeing host, two such hosts each pull further than the bound, the
// opposite ways; neither alone decides, and the result is left as steps
// 1–3 gave it.
func NetworkTime(hosts []HostOffset, opt NetworkOptions) NetworkResult {
	opt = opt.withDefaults()
	res := networkTime(hosts, opt, true)
	res.Unbounded = res.Offset
	if opt.MaxSourceInfluence > 0 {
		boundInfluence(&res, hosts, opt)
	}
	return res
}

// boundInfluence is step 4 of NetworkTime.
func boundInfluence(res *NetworkResult, hosts []HostOffset, opt NetworkOptions) {
	b := opt.MaxSourceInfluence
	lo, hi := -maxDuration-1, maxDuration
	var without []HostOffset
	for i, h := range hosts {
		if !h.Responsive || distance(h.Offset, res.Offset) <= opt.Window {
			continue // took no part, or agrees with the result
		}
		without = append(append(without[:0], hosts[:i]...), hosts[i+1:]...)
		r := networkTime(without, opt, false).Offset
		if distance(r, res.Offset) <= b {
			continue // within the bound already
		}
		lo, hi = max(lo, addSat(r, -b)), min(hi, addSat(r, b))
	}
	if lo > hi {
		return
	}
	if off := min(max(res.Offset, lo), hi); off != res.Offset {
		res.Offset, res.Bounded = off, true
	}
}

// networkTime is steps 1–3 of NetworkTime; opt has its defaults. With
// used it reports which hosts were kept (NetworkResult.Used).
func networkTime(hosts []HostOffset, opt NetworkOptions, used bool) NetworkResult {
	self := HostOffset{Trusted: true, Responsive: true}
	votes := []time.Duration{0}
	for _, h := range hosts {
		if h.Trusted && h.Responsive {
			votes = append(votes, h.Offset)
		}
	}
	if len(votes) == 1 {
		return NetworkResult{Voters: 1, Kept: 1}
	}
	med := median(votes)
	res := NetworkResult{Median: med, Voters: len(votes)}
	if used {
		res.Used = make([]bool, len(hosts))
	}
	var kept []HostOffset
	for i, h := range append([]HostOffset{self}, hosts...) {
		if !h.Responsive {
			continue
		}
		dist := distance(h.Offset, med)
		if dist <= opt.Window && (h.Trusted || dist <= opt.UntrustedWindow) {
			kept = append(kept, h)
			if used && i > 0 {
				res.Used[i-1] = true
			}
		}
	}
	res.Kept = len(kept)
	switch {
	case len(kept) == 0:
		res.Offset = med
	case len(kept) == 1:
		res.Offset = kept[0].Offset
	case opt.BSD:
		vals := make([]time.Duration, len(kept))
		for i, h := range kept {
			vals[i] = h.Offset
		}
		res.Offset = median(vals)
	default:
		res.Offset = weightedMean(kept, opt.MinErrorBound)
	}
	return res
}

// median of vals (reordered); for an even count the midpoint of the two
// middle values, where BSD's iterative estimator also ends up.
func median(vals []time.Duration) time.Duration {
	slices.Sort(vals)
	n := len(vals)
	if n%2 == 1 {
		return vals[n/2]
	}
	a, b := vals[n/2-1], vals[n/2]
	return a + time.Duration((uint64(b)-uint64(a))/2) // b ≥ a: no overflow
}

func weightedMean(hosts []HostOffset, floor time.Duration) time.Duration {
	// Offsets relative to the first kept host keep the sums small.
	ref := hosts[0].Offset
	var sw, swx float64
	for _, h := range hosts {
		eb := max(h.ErrorBound, floor)
		w := 1 / (float64(eb) * float64(eb))
		sw += w
		swx += w * float64(h.Offset-ref)
	}
	return ref + time.Duration(swx/sw)
}

const maxDuration = time.Duration(math.MaxInt64)

// absDur is |d|, saturated: −MinInt64 is not a Duration.
func absDur(d time.Duration) time.Duration {
	switch {
	case d == math.MinInt64:
		return maxDuration
	case d < 0:
		return -d
	}
	return d
}

// distance is |a − b|, saturated.
func distance(a, b time.Duration) time.Duration {
	if a < b {
		a, b = b, a
	}
	return time.Duration(min(uint64(a)-uint64(b), math.MaxInt64))
}

// addSat is a + b, saturated at the Durations' range rather than wrapped:
// offsets come from remote timestamps and may be anything.
func addSat(a, b time.Duration) time.Duration {
	sum := a + b
	switch {
	case a > 0 && b > 0 && sum < 0:
		return maxDuration
	case a < 0 && b < 0 && sum >= 0:
		return -maxDuration - 1
	}
	return sum
}

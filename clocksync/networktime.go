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
}

// BSD's exclusion windows (facts §4, G: GOOD_RANGE, VGOOD_RANGE).
const (
	DefaultWindow          = 14 * time.Millisecond
	DefaultUntrustedWindow = 6 * time.Millisecond
	DefaultMinErrorBound   = 100 * time.Microsecond
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
	return o
}

// NetworkResult is the network time as an offset from the master's clock,
// with how it was reached.
type NetworkResult struct {
	Offset time.Duration // network time − master's clock
	Median time.Duration // first-stage median
	Voters int           // hosts in the first stage, the master included
	Kept   int           // hosts in the second stage, the master included
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
func NetworkTime(hosts []HostOffset, opt NetworkOptions) NetworkResult {
	opt = opt.withDefaults()
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
	var kept []HostOffset
	for _, h := range append([]HostOffset{self}, hosts...) {
		if !h.Responsive {
			continue
		}
		dist := absDur(h.Offset - med)
		if dist <= opt.Window && (h.Trusted || dist <= opt.UntrustedWindow) {
			kept = append(kept, h)
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
	return a + (b-a)/2
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

package clocksync

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// Measurement is the result of measuring one remote clock.
type Measurement struct {
	// Offset is the remote clock minus ours: positive means the remote clock
	// is ahead (BSD's measure() sign).
	Offset time.Duration
	// ErrorBound bounds |Offset − true offset| given the path's delays: half
	// the round-trip time of the sample used (plus the timestamp resolution).
	ErrorBound time.Duration
	// RTT is the round-trip time of the sample used, remote processing
	// excluded.
	RTT time.Duration
	// At is our clock's reading when the sample was taken (its t4).
	At time.Time
	// Samples is how many replies were received; Sent how many probes went.
	Samples, Sent int
	// Stamps is how the send times of the samples were taken:
	// StampsKernel (the kernel's transmit timestamps on both sides: ours
	// for t1, theirs for t3 in a later reply), StampsUser (clock readings
	// before the write on both), StampsMixed (kernel stamps on one side
	// only, as with a peer that knows only format 1); "" for ICMP.
	Stamps string
}

// Values of Measurement.Stamps.
const (
	StampsKernel = "kernel"
	StampsUser   = "user"
	StampsMixed  = "mixed"
)

// Measurer measures the clock of one host.
type Measurer interface {
	Measure(ctx context.Context, host netip.AddrPort) (Measurement, error)
}

// MeasurerFunc adapts a function to Measurer.
type MeasurerFunc func(ctx context.Context, host netip.AddrPort) (Measurement, error)

// Measure calls f.
func (f MeasurerFunc) Measure(ctx context.Context, host netip.AddrPort) (Measurement, error) {
	return f(ctx, host)
}

// Errors of measurement.
var (
	ErrNoReply    = errors.New("no reply")            // BSD HOSTDOWN
	ErrBadSample  = errors.New("inconsistent sample") // negative RTT and the like
	ErrNonStdTime = errors.New("non-standard time")   // ICMP: high bit set (BSD NONSTDTIME)
)

// Sample is one four-timestamp exchange: t1 our send, t2 their receive,
// t3 their send, t4 our receive.
type Sample struct {
	T1, T2, T3, T4 time.Time
	// KernelT1 and KernelT3: the send time is the kernel's software
	// transmit timestamp, not the clock read in user space before the
	// write (which precedes the packet by the scheduling delay).
	KernelT1, KernelT3 bool
}

// Offset is ((t2−t1)+(t3−t4))/2: the remote clock minus ours.
func (s Sample) Offset() time.Duration {
	return (s.T2.Sub(s.T1) + s.T3.Sub(s.T4)) / 2
}

// RTT is (t4−t1)−(t3−t2): the round trip without the remote's processing.
func (s Sample) RTT() time.Duration { return s.T4.Sub(s.T1) - s.T3.Sub(s.T2) }

// Valid reports whether the sample can be used: ordered on each side and a
// non-negative round trip.
func (s Sample) Valid() bool {
	return !s.T4.Before(s.T1) && !s.T3.Before(s.T2) && s.RTT() >= 0
}

// BestSample returns the measurement from the valid sample with the smallest
// RTT: its error bound, RTT/2, is the tightest, and queueing delays, which
// only ever add, are least likely to have made the path asymmetric.
func BestSample(samples []Sample, sent int) (Measurement, error) {
	best, n := -1, 0
	for i, s := range samples {
		if !s.Valid() {
			continue
		}
		n++
		if best < 0 || s.RTT() < samples[best].RTT() {
			best = i
		}
	}
	if best < 0 {
		if len(samples) > 0 {
			return Measurement{Sent: sent}, fmt.Errorf("%d replies: %w", len(samples), ErrBadSample)
		}
		return Measurement{Sent: sent}, ErrNoReply
	}
	s := samples[best]
	return Measurement{Offset: s.Offset(), RTT: s.RTT(), ErrorBound: s.RTT() / 2, At: s.T4, Samples: n, Sent: sent}, nil
}

// Result is one host's outcome in MeasureAll.
type Result struct {
	Host netip.AddrPort
	Measurement
	Err error
}

// DefaultConcurrency is how many hosts MeasureAll measures at once.
const DefaultConcurrency = 128

// MeasureAll measures every host concurrently (at most concurrency at a time;
// ≤ 0 means DefaultConcurrency) and returns when all are done or the round's
// deadline passes; hosts not measured by then get an error wrapping
// context.DeadlineExceeded. Results are in the order of hosts.
func MeasureAll(ctx context.Context, m Measurer, hosts []netip.AddrPort, deadline time.Time, concurrency int) []Result {
	if concurrency <= 0 {
		concurrency = DefaultConcurrency
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	res := make([]Result, len(hosts))
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i, h := range hosts {
		res[i].Host = h
		if err := ctx.Err(); err != nil {
			res[i].Err = fmt.Errorf("measure %v: not started: %w", h, err)
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			res[i].Err = fmt.Errorf("measure %v: not started: %w", h, ctx.Err())
			continue
		}
		wg.Add(1)
		go func(i int, h netip.AddrPort) {
			defer wg.Done()
			defer func() { <-sem }()
			meas, err := m.Measure(ctx, h)
			if err != nil {
				err = fmt.Errorf("measure %v: %w", h, err)
			}
			res[i].Measurement, res[i].Err = meas, err
		}(i, h)
	}
	wg.Wait()
	return res
}

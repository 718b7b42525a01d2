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

// Defaults of RoundOptions.
const (
	// DefaultMaxInFlight bounds the hosts a round measures at once. It is
	// above BSD's NHOSTS (1013, the election's slave table), so that for a
	// real network it never binds: no host waits for another's slot.
	DefaultMaxInFlight = 4096
	// DefaultDeadAfter is how long a host that did not answer the last
	// round is given: four of the probe's 100 ms waits. A dead host is
	// given up then, where the probe alone would wait out 24 of them
	// (2.4 s) and hold its place for the round.
	DefaultDeadAfter = 400 * time.Millisecond
	// DefaultLiveAfter is how long a host that answered the last round is
	// given: eight of the probe's waits. A live host on a LAN is done in
	// milliseconds; one cut by its deadline keeps the replies it had, so
	// only a host that lost eight probes in a row fails the round.
	DefaultLiveAfter = 800 * time.Millisecond
	// DefaultStartInterval spaces the hosts' first probes (10,000 hosts a
	// second), so that N slaves' replies do not reach the socket as one
	// burst: a live host on a LAN is done within a few milliseconds, so
	// a few dozen are measured at once, each with one probe out. It
	// shrinks for a round too short to start every host at it.
	DefaultStartInterval = 100 * time.Microsecond
)

// RoundHost is one host of a round, in the order it is to be measured.
type RoundHost struct {
	Addr netip.AddrPort
	// Answered: the host answered the last round. It is given LiveAfter
	// from its start, any other host DeadAfter.
	Answered bool
}

// RoundOptions schedules MeasureRound.
type RoundOptions struct {
	// Deadline ends the round; a host not measured by then fails with an
	// error wrapping context.DeadlineExceeded. Zero: the context's.
	Deadline time.Time
	// DeadAfter bounds a host that did not answer the last round, and
	// LiveAfter one that did (defaults DefaultDeadAfter, DefaultLiveAfter;
	// never more than the round has left). A host cut by its deadline
	// keeps the replies it had.
	DeadAfter, LiveAfter time.Duration
	// StartInterval spaces the hosts' starts (default
	// DefaultStartInterval; a negative value starts them all at once). It
	// is shortened so that the last host starts within the first half of
	// the round, with at least half of it left to be measured in.
	StartInterval time.Duration
	// MaxInFlight bounds the hosts measured at once (default
	// DefaultMaxInFlight).
	MaxInFlight int
}

// MeasureRound measures every host of a sync round and returns the
// results in the order of hosts, by the round's deadline.
//
// Each host has its own deadline from its start: LiveAfter if it answered
// the last round, DeadAfter if not. So a dead host costs the round a few
// of the probe's waits, not a slot held until it times out: however many
// of the hosts are dead, every live one is measured, and the round takes
// at most N·StartInterval + LiveAfter (N ≤ MaxInFlight). The hosts are started in their
// order (those that answered last round first), StartInterval apart.
func MeasureRound(ctx context.Context, m Measurer, hosts []RoundHost, opt RoundOptions) []Result {
	if !opt.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, opt.Deadline)
		defer cancel()
	}
	deadline, bounded := ctx.Deadline()
	start := time.Now()
	interval := opt.StartInterval
	if interval == 0 {
		interval = DefaultStartInterval
	}
	if bounded && len(hosts) > 0 {
		interval = min(interval, time.Until(deadline)/time.Duration(2*len(hosts)))
	}
	deadAfter, liveAfter := opt.DeadAfter, opt.LiveAfter
	if deadAfter <= 0 {
		deadAfter = DefaultDeadAfter
	}
	if liveAfter <= 0 {
		liveAfter = DefaultLiveAfter
	}
	inFlight := opt.MaxInFlight
	if inFlight <= 0 {
		inFlight = DefaultMaxInFlight
	}
	res := make([]Result, len(hosts))
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	var pace *time.Timer
	defer func() {
		if pace != nil {
			pace.Stop()
		}
	}()
	for i, h := range hosts {
		res[i].Host = h.Addr
		// Due at start + i·interval: a late wake-up starts the hosts due
		// since at once, so timer granularity does not slow the round.
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 && i > 0 {
			if pace == nil {
				pace = time.NewTimer(wait)
			} else {
				pace.Reset(wait)
			}
			select {
			case <-pace.C:
			case <-ctx.Done():
			}
		}
		if ctx.Err() == nil {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
		}
		if err := ctx.Err(); err != nil {
			res[i].Err = fmt.Errorf("measure %v: not started: %w", h.Addr, err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			after := deadAfter
			if h.Answered {
				after = liveAfter
			}
			hctx, cancel := context.WithTimeout(ctx, after)
			meas, err := m.Measure(hctx, h.Addr)
			cut := hctx.Err() != nil && ctx.Err() == nil
			cancel()
			switch {
			case err != nil && cut:
				err = fmt.Errorf("measure %v: given up after %v: %w", h.Addr, after, err)
			case err != nil:
				err = fmt.Errorf("measure %v: %w", h.Addr, err)
			}
			res[i].Measurement, res[i].Err = meas, err
		}()
	}
	wg.Wait()
	return res
}

// MeasureAll measures every host until deadline, at most concurrency at
// once (≤ 0: DefaultMaxInFlight), each allowed the whole round: the
// schedule before MeasureRound, kept for callers that know nothing of the
// hosts (and, with 128, as the tests' anchor).
func MeasureAll(ctx context.Context, m Measurer, hosts []netip.AddrPort, deadline time.Time, concurrency int) []Result {
	rh := make([]RoundHost, len(hosts))
	for i, h := range hosts {
		rh[i] = RoundHost{Addr: h, Answered: true}
	}
	return MeasureRound(ctx, m, rh, RoundOptions{Deadline: deadline, MaxInFlight: concurrency, LiveAfter: time.Until(deadline)})
}

package clocksync

import (
	"fmt"
	"math"
	"time"
)

// Adaptive sync rounds.
//
// BSD's master measures its slaves every 240 s, whatever the clocks do:
// for the first rounds the slaves' frequencies are unknown and the spread
// grows by their drifts (17 ms at 240 s for clocks ±43 ppm apart), and
// once they are known 240 s is long enough for a wandering crystal to
// add tens of µs. chrony instead starts with a burst of short polls
// (iburst) and then adapts its poll interval to the clock's stability.
// IntervalController does that for a master's rounds: it starts at the
// floor, lengthens the interval (at most doubling, up to the ceiling, the
// sync-interval) while the error it predicts for the next interval stays
// within the target, and shortens it when the corrections grow.
//
// A slave's correction c after an interval T is what its clock drifted
// from network time in T (its residual frequency error, times T, plus
// the wander of its frequency) plus the error of the measurements (noise,
// which does not grow with T). The controller takes the spread of each
// round's corrections, m (the largest less the smallest: what the clocks'
// spread was before them; a correction common to all, the network time
// moving every clock, leaves them together). At the floor, where the drift adds least,
// the mean μ and standard deviation σ of m are the noise; over longer
// rounds, m − μ is the part that grows with the interval, fitted as
// b·T^1.5 (faster than linearly: a random walk of the frequency makes the
// error grow as T^1.5). The budget is the target less the noise (at least
// half the target, and at least half the noise: drift below that is lost
// in it). The controller lengthens the interval to where b·T^1.5 is 70 %
// of the budget (at most doubling it, and not for less than a quarter);
// it shortens it, in proportion, when a
// round's m − μ exceeds the budget by more than 2σ; a new slave (one the
// last rounds did not have, or one sent SETTIME) or a jump (a correction
// beyond max(1 ms, 50 × target)) sends it back to the floor, where it
// holds for a few rounds while the slaves' frequency disciplines learn.
// Rounds longer than the floor are forgotten after 8 of them, so a
// network held at the floor by a growth that has gone is tried at twice
// the floor again every 9 rounds or so.
//
// It is pure: no clock, no goroutine; the master calls Round once per
// round with the round's corrections and the time since the last one.

// IntervalConfig tunes an IntervalController.
type IntervalConfig struct {
	// Floor is the shortest interval (DefaultIntervalFloor), Ceiling the
	// longest (the sync-interval; BSD's 240 s by default). Floor ≥
	// Ceiling is fixed rounds of Ceiling, as BSD's.
	Floor, Ceiling time.Duration
	// Target is the error the rounds aim to keep each clock within
	// between two rounds (DefaultIntervalTarget).
	Target time.Duration
}

// Defaults of adaptive rounds.
const (
	DefaultIntervalFloor  = 8 * time.Second
	DefaultIntervalTarget = 20 * time.Microsecond
	// MinIntervalTarget and MaxIntervalTarget bound the target.
	MinIntervalTarget = time.Microsecond
	MaxIntervalTarget = time.Second
)

// intervalHistory is how many rounds the noise floor and the hosts
// seen are remembered for.
const intervalHistory = 8

// learnRounds is how many rounds the controller holds at the floor after
// it went there (a new slave, a jump), before it judges the corrections:
// the slaves' frequency disciplines take a few rounds to learn their
// frequencies (at the 8 s floor, four corrections over 32 s give a
// frequency within about 0.5 ppm with 10 µs of measurement noise), and
// while they do the corrections shrink, which is not noise.
const learnRounds = 3

// jump is the correction that counts as a jump (a clock stepped, a slave
// restarted) whatever the target: back to the floor.
func (c IntervalConfig) jump() time.Duration { return max(time.Millisecond, 50*c.Target) }

// Fixed reports whether the rounds do not adapt (Floor ≥ Ceiling).
func (c IntervalConfig) Fixed() bool { return c.Floor >= c.Ceiling }

// HostCorrection is one host's correction in a round.
type HostCorrection struct {
	Host       string        // the slave's name (the master's own share under the master's)
	Correction time.Duration // what it was sent (network time − its clock)
	New        bool          // sent SETTIME: a new slave, or one far off
}

// IntervalDecision is what the controller decided after a round.
type IntervalDecision struct {
	Next time.Duration // the interval until the next round
	// Change is "hold", "lengthen", "shorten" or "floor".
	Change string
	// Reason says why, for a debug log line.
	Reason string
	// Noise and Drift are the noise floor (μ) and the part of the
	// round's largest correction above it; Predicted is the growth the
	// fit predicts over Next.
	Noise, Drift, Predicted time.Duration
}

// IntervalController chooses the interval between a master's rounds.
// It is not safe for concurrent use.
type IntervalController struct {
	cfg   IntervalConfig
	cur   time.Duration
	round int
	learn int            // rounds still to hold at the floor
	seen  map[string]int // host → the last round it was in
	// atFloor holds the largest correction of the last rounds at the
	// floor, longer the rounds longer than it (their length, and that),
	// both since the controller last went to the floor.
	atFloor []time.Duration
	longer  []roundSample
}

// roundSample is a round's length and its largest correction.
type roundSample struct {
	since time.Duration
	max   time.Duration
}

// meanStd is the mean and standard deviation of ds (0, 0 if empty).
func meanStd(ds []time.Duration) (mean, std float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	for _, d := range ds {
		mean += float64(d)
	}
	mean /= float64(len(ds))
	for _, d := range ds {
		std += (float64(d) - mean) * (float64(d) - mean)
	}
	return mean, math.Sqrt(std / float64(len(ds)))
}

// growth is b of m − noise = b·T^1.5 over rounds, least squares through
// the origin, at least 0 (ns per s^1.5).
func growth(rounds []roundSample, noise float64) float64 {
	var sxy, sxx float64
	for _, r := range rounds {
		x := math.Pow(r.since.Seconds(), 1.5)
		sxy += x * (float64(r.max) - noise)
		sxx += x * x
	}
	if sxx == 0 {
		return 0
	}
	return math.Max(sxy/sxx, 0)
}

// push appends v to a list kept to the last intervalHistory.
func push[T any](list []T, v T) []T {
	list = append(list, v)
	if len(list) > intervalHistory {
		list = list[1:]
	}
	return list
}

// NewIntervalController starts at the floor (at the ceiling when fixed).
// Zero Target means DefaultIntervalTarget; a Floor ≤ 0 DefaultIntervalFloor.
func NewIntervalController(cfg IntervalConfig) *IntervalController {
	if cfg.Target <= 0 {
		cfg.Target = DefaultIntervalTarget
	}
	if cfg.Floor <= 0 {
		cfg.Floor = DefaultIntervalFloor
	}
	c := &IntervalController{cfg: cfg, seen: map[string]int{}}
	c.cur = c.floor()
	return c
}

func (c *IntervalController) floor() time.Duration { return min(c.cfg.Floor, c.cfg.Ceiling) }

// Fixed reports whether the rounds do not adapt.
func (c *IntervalController) Fixed() bool { return c.cfg.Fixed() }

// Interval is the current interval.
func (c *IntervalController) Interval() time.Duration { return c.cur }

// Restart goes back to the floor and forgets the hosts (a new
// mastership).
func (c *IntervalController) Restart() {
	c.cur, c.learn, c.atFloor, c.longer = c.floor(), 0, nil, nil
	clear(c.seen)
}

// Round takes a round's corrections, since being the time since the
// previous round began (0: unknown, the current interval), and returns
// the interval to the next round.
func (c *IntervalController) Round(since time.Duration, corrections []HostCorrection) IntervalDecision {
	c.round++
	if c.cfg.Fixed() {
		return IntervalDecision{Next: c.cfg.Ceiling, Change: "hold", Reason: "fixed rounds"}
	}
	if since <= 0 {
		since = c.cur
	}
	var m time.Duration
	lo, hi := time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
	var joined, jumped string
	var isNew bool
	for _, h := range corrections {
		abs := h.Correction.Abs()
		if last, ok := c.seen[h.Host]; (!ok || last < c.round-intervalHistory || h.New) && !isNew {
			joined, isNew = h.Host, true
		}
		if abs >= c.cfg.jump() && jumped == "" {
			jumped = fmt.Sprintf("%q corrected by %v", h.Host, h.Correction)
		}
		c.seen[h.Host] = c.round
		if !h.New {
			lo, hi = min(lo, h.Correction), max(hi, h.Correction)
		}
	}
	if hi >= lo {
		m = hi - lo
	}
	for h, last := range c.seen {
		if last < c.round-intervalHistory {
			delete(c.seen, h) // bounded by the hosts of the last rounds
		}
	}
	switch {
	case isNew || jumped != "":
		c.cur, c.learn, c.atFloor, c.longer = c.floor(), learnRounds, nil, nil
		why := fmt.Sprintf("new host %q", joined)
		if !isNew {
			why = jumped
		}
		if c.round == 1 {
			why = "first round"
		}
		return IntervalDecision{Next: c.cur, Change: "floor", Reason: why}
	case c.learn > 0:
		c.learn--
		return IntervalDecision{Next: c.cur, Change: "hold", Reason: "at the floor while the slaves' frequencies are learnt"}
	}
	// The rounds before this one are the model this one is judged by.
	mu, sigma := meanStd(c.atFloor)
	rate := growth(c.longer, mu)
	if since < c.floor()*3/2 {
		c.atFloor = push(c.atFloor, m)
	} else {
		c.longer = push(c.longer, roundSample{since: since, max: m})
	}
	noise := time.Duration(mu)
	drift := max(m-noise, 0)
	budget := max(c.cfg.Target-noise, c.cfg.Target/2, noise/2)
	// Beyond the budget by more than the noise's own scatter: the
	// corrections grew.
	grew := float64(drift) > float64(budget)+2*sigma
	predict := func(next time.Duration) time.Duration {
		return time.Duration(rate * math.Pow(next.Seconds(), 1.5))
	}
	d := IntervalDecision{Noise: noise, Drift: drift}
	switch {
	case grew && c.cur > c.floor():
		// The interval at which d would be 70 % of the budget, at most
		// half the last.
		next := time.Duration(float64(since) * math.Pow(0.7*float64(budget)/float64(drift), 2.0/3))
		next = max(min(next, since/2), c.floor())
		d.Change, d.Reason = "shorten", fmt.Sprintf("error %v over %v beyond the budget %v", drift, since.Round(time.Millisecond), budget)
		if next >= c.cur {
			d.Change = "hold"
		}
		c.cur = min(next, c.cur)
	case grew:
		d.Change, d.Reason = "hold", fmt.Sprintf("error %v over %v beyond the budget %v, at the floor", drift, since.Round(time.Millisecond), budget)
	case c.cur >= c.cfg.Ceiling:
		d.Change, d.Reason = "hold", "at the ceiling"
	case len(c.atFloor) < 2:
		d.Change, d.Reason = "hold", "measuring the noise at the floor"
	case predict(c.cur*5/4) <= budget*7/10:
		// To the interval over which the fit predicts 70 % of the
		// budget, at most twice the last; a step of less than a quarter
		// is not worth a change.
		next := 2 * c.cur
		if rate > 0 {
			fit := time.Duration(math.Pow(0.7*float64(budget)/rate, 2.0/3) * float64(time.Second)).Round(time.Second)
			next = min(max(fit, c.cur*5/4), next)
		}
		c.cur = min(next, c.cfg.Ceiling)
		d.Change, d.Reason = "lengthen", fmt.Sprintf("error %v predicted over %v, within the budget %v", predict(c.cur), c.cur, budget)
	default:
		d.Change, d.Reason = "hold", fmt.Sprintf("error %v predicted over %v, budget %v", predict(c.cur*5/4), c.cur*5/4, budget)
	}
	d.Next, d.Predicted = c.cur, predict(c.cur)
	return d
}

package clocksync

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// TimeSource is the "true" time a simulated clock drifts away from. A
// *vtime.Scheduler is one (deterministic tests and the simulator); the
// real monotonic clock is another (NewMonotonicSource).
type TimeSource interface {
	Now() time.Time
}

// monotonicSource is wall time at creation advanced by the monotonic clock,
// so that it is immune to steps of the host clock.
type monotonicSource struct{ start time.Time }

// NewMonotonicSource returns a TimeSource that reads the host clock once and
// then advances only with the monotonic clock. Simulated clocks of daemons in
// containers or namespaces run over it, each with its own offset and drift,
// unaffected by anything that happens to the host clock.
func NewMonotonicSource() TimeSource { return monotonicSource{start: time.Now()} }

func (m monotonicSource) Now() time.Time {
	// Round(0) strips the monotonic reading, so that differences between
	// simulated readings use their wall values, offsets included.
	return m.start.Add(time.Since(m.start)).Round(0)
}

// SimConfig describes a simulated clock.
type SimConfig struct {
	Offset   time.Duration // initial offset from the source's time
	DriftPPM float64       // natural frequency error, positive = runs fast
	SlewPPM  float64       // slew rate of Adjust; 0 means MaxSlewPPM (adjtime's 500 ppm)
	// Osc is how the frequency wanders around DriftPPM; the zero value:
	// not at all (a constant drift, exact arithmetic).
	Osc Oscillator
}

// MaxSimDriftPPM bounds the drift a simulated clock accepts (10 %).
const MaxSimDriftPPM = 100_000

// SimClock is a simulated clock: source time plus its own offset, drifting
// at DriftPPM plus whatever frequency correction was set, and wandering
// around that as its Oscillator says, slewed by Adjust at no more than
// SlewPPM (500 ppm by default, like adjtime). It is safe for concurrent use.
type SimClock struct {
	src TimeSource

	mu      sync.Mutex
	last    time.Time // source time of the state below
	off     float64   // offset from source time, ns
	pending float64   // slew still to apply, ns
	drift   float64   // ppm
	freq    float64   // ppm, set by SetFrequency
	slew    float64   // ppm

	osc      *oscillator // nil: constant drift
	origin   time.Time   // source time the oscillator's phase counts from
	oscPhase float64     // its phase at last, ns
}

// NewSimClock returns a simulated clock over src.
func NewSimClock(src TimeSource, cfg SimConfig) *SimClock {
	slew := cfg.SlewPPM
	if slew <= 0 {
		slew = MaxSlewPPM
	}
	now := src.Now()
	return &SimClock{src: src, last: now, off: float64(cfg.Offset), drift: cfg.DriftPPM, slew: slew,
		osc: newOscillator(cfg.Osc), origin: now}
}

// advance brings the state to source time now. Called with mu held.
func (c *SimClock) advance(now time.Time) {
	dt := float64(now.Sub(c.last))
	if dt <= 0 {
		return
	}
	c.last = now
	c.off += (c.drift + c.freq) * 1e-6 * dt
	if c.osc != nil {
		p := c.osc.phase(float64(now.Sub(c.origin)))
		c.off += p - c.oscPhase
		c.oscPhase = p
	}
	if c.pending != 0 {
		maxSlew := c.slew * 1e-6 * dt
		if math.Abs(c.pending) <= maxSlew {
			c.off += c.pending
			c.pending = 0
		} else {
			step := math.Copysign(maxSlew, c.pending)
			c.off += step
			c.pending -= step
		}
	}
}

// Now reads the simulated clock.
func (c *SimClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.src.Now()
	c.advance(now)
	return now.Add(time.Duration(math.Round(c.off)))
}

// nowWithSource reads the clock and the source time that reading is of,
// from one read of the source (pairedClock).
func (c *SimClock) nowWithSource() (clock, source time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.src.Now()
	c.advance(now)
	return now.Add(time.Duration(math.Round(c.off))), now
}

// Adjust slews by d at the clock's slew rate, replacing any pending slew.
func (c *SimClock) Adjust(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(c.src.Now())
	c.pending = float64(d)
	return nil
}

// Step sets the clock to t and cancels any pending slew.
func (c *SimClock) Step(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.src.Now()
	c.advance(now)
	c.off = float64(t.Sub(now))
	c.pending = 0
	return nil
}

// SetFrequency sets the frequency correction, added to the natural drift.
func (c *SimClock) SetFrequency(ppm float64) error {
	if err := checkFrequency(ppm); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(c.src.Now())
	c.freq = ppm
	return nil
}

// State reports the simulated clock's state.
func (c *SimClock) State() (ClockState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.src.Now()
	c.advance(now)
	detail := fmt.Sprintf("offset %v, drift %+g ppm", time.Duration(math.Round(c.off)), c.drift)
	if c.osc != nil {
		detail += fmt.Sprintf(" (wandering: %+.4f ppm now)", c.drift+c.osc.frequencyAt(float64(now.Sub(c.origin))))
	}
	return ClockState{
		Kind:         "sim",
		Now:          now.Add(time.Duration(math.Round(c.off))),
		PendingSlew:  time.Duration(math.Round(c.pending)),
		FrequencyPPM: c.freq,
		Synchronized: true,
		Detail:       detail,
	}, nil
}

// NaturalPPM is the clock's own frequency error now, without the
// correction SetFrequency set: the drift, plus the oscillator's wander.
func (c *SimClock) NaturalPPM() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.src.Now()
	c.advance(now)
	if c.osc == nil {
		return c.drift
	}
	return c.drift + c.osc.frequencyAt(float64(now.Sub(c.origin)))
}

// Offset is the clock's current offset from its source's time: the "truth"
// a simulator compares clocks by.
func (c *SimClock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(c.src.Now())
	return time.Duration(math.Round(c.off))
}

// ParseSimSpec parses
// "sim:offset=+350ms,drift=-40ppm[,slew=500ppm][,wander=0.03ppm,temp=1ppm,period=24h,seed=7]".
// Keys may come in any order, each at most once; missing keys are zero
// (slew: 500 ppm; period: 24 h; seed: 0). wander, temp, period and seed
// make the frequency wander like a real crystal's (Oscillator): "sim"
// without them keeps a constant drift.
func ParseSimSpec(spec string) (SimConfig, error) {
	var cfg SimConfig
	bad := func(format string, a ...any) (SimConfig, error) {
		return SimConfig{}, fmt.Errorf("%w %q: %s (want sim:offset=+350ms,drift=-40ppm[,wander=0.03ppm,temp=1ppm,period=24h,seed=7])", ErrBadClockSpec, spec, fmt.Sprintf(format, a...))
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(spec), "sim")
	if !ok {
		return bad("does not start with \"sim:\"")
	}
	if rest == "" {
		return cfg, nil
	}
	rest, ok = strings.CutPrefix(rest, ":")
	if !ok {
		return bad("\"sim\" must be followed by \":\"")
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(rest, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			return bad("empty setting")
		}
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if !ok || v == "" {
			return bad("setting %q has no value", kv)
		}
		if seen[k] {
			return bad("%q given twice", k)
		}
		seen[k] = true
		switch k {
		case "offset":
			d, err := time.ParseDuration(v)
			if err != nil {
				return bad("offset %q is not a duration such as +350ms or -1.5s", v)
			}
			cfg.Offset = d
		case "drift", "slew", "wander", "temp":
			num := strings.TrimSuffix(strings.ToLower(v), "ppm")
			p, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || math.IsNaN(p) || math.IsInf(p, 0) {
				return bad("%s %q is not a number of ppm such as -40ppm", k, v)
			}
			switch k {
			case "drift":
				if math.Abs(p) > MaxSimDriftPPM {
					return bad("drift %g ppm beyond ±%d ppm", p, MaxSimDriftPPM)
				}
				cfg.DriftPPM = p
			case "slew":
				if p <= 0 || p > MaxSimDriftPPM {
					return bad("slew %g ppm must be in (0, %d]", p, MaxSimDriftPPM)
				}
				cfg.SlewPPM = p
			case "wander":
				cfg.Osc.WanderPPM = p
			case "temp":
				cfg.Osc.TempPPM = p
			}
		case "period":
			d, err := time.ParseDuration(v)
			if err != nil {
				return bad("period %q is not a duration such as 24h", v)
			}
			if d < MinTempPeriod || d > MaxTempPeriod {
				return bad("period %v out of range: want %v to %v", d, MinTempPeriod, MaxTempPeriod)
			}
			cfg.Osc.TempPeriod = d
		case "seed":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return bad("seed %q is not a whole number from 0 to %d", v, uint64(math.MaxUint64))
			}
			cfg.Osc.Seed = n
		default:
			return bad("unknown setting %q (known: offset, drift, slew, wander, temp, period, seed)", k)
		}
	}
	if err := cfg.Osc.Check(); err != nil {
		return bad("%v", err)
	}
	return cfg, nil
}

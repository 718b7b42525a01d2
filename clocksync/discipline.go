package clocksync

import (
	"math"
	"time"
)

// DisciplineConfig tunes the frequency discipline.
type DisciplineConfig struct {
	// MaxPPM bounds the frequency correction (default MaxFrequencyPPM).
	// A single estimate beyond it is taken for a phase error (a step, a
	// faulty clock), not a rate, and ignored.
	MaxPPM float64
	// Horizon is how far back the estimate looks at most (default 32
	// min, eight 240 s rounds): corrections are averaged over the time
	// since the first one until it reaches the horizon, then with
	// exponential forgetting of that time constant, which keeps
	// following slow wander. Once the corrections' noise is learnt the
	// horizon shortens to where the oscillator's wander (Stability)
	// would cost more than the noise (Discipline).
	Horizon time.Duration
	// Stability is the wander assumed of the oscillator: its Allan
	// deviation at τ = 1000 s, in ppm, as random-walk frequency noise
	// (default DefaultStabilityPPM).
	Stability float64
	// MinInterval: corrections closer together than this (default 30 s)
	// are too short a baseline; they restart the interval.
	MinInterval time.Duration
	// SlewPPM is the clock's slew rate (default MaxSlewPPM), used to tell
	// whether the previous correction had finished before this one.
	SlewPPM float64
	// InitialPPM is the frequency setting to start from, normally the
	// clock's own (ClockState.FrequencyPPM), so that a restart does not
	// throw away what the kernel had learnt.
	InitialPPM float64
	// PriorPPM is how far the clock's true frequency may be from
	// InitialPPM (default DefaultPriorPPM, a crystal's tolerance; less
	// when InitialPPM comes from a drift file).
	PriorPPM float64
	// PhaseError is the error of one correction's phase assumed at first
	// (default DefaultPhaseError): its measurement, and the one-way delay
	// SETTIME leaves uncorrected. It decides how much an average over a
	// baseline is trusted against the prior. From the second estimate on
	// it is learnt from the corrections themselves: how far each one was
	// from what the mean rate predicted.
	PhaseError time.Duration
	// WanderPPM is how fast, in ppm per minute, the frequency may change
	// once known (default DefaultWanderPPM; a crystal under a fast
	// temperature swing).
	WanderPPM float64
}

// Defaults of the discipline.
const (
	DefaultPriorPPM   = 100
	DefaultPhaseError = time.Millisecond
	DefaultWanderPPM  = 1
	DefaultHorizon    = 8 * 240 * time.Second
	// DefaultStabilityPPM is a commodity crystal's wander
	// (TypicalWanderPPM) with a margin: assuming too little wander
	// makes the mean lag the frequency, which costs more than the
	// noise a shorter mean lets in.
	DefaultStabilityPPM = 4 * TypicalWanderPPM
)

// Discipline estimates a clock's frequency error from successive
// corrections and returns the frequency to set.
//
// A correction c received Δt after the previous one, which had been fully
// slewed, is what the clock drifted by in Δt at its current frequency
// setting f: the clock needs the rate a = f + c/Δt (positive: our clock is
// slow and must run faster). Successive rates are averaged, weighted by
// their Δt: the phase errors e of the corrections telescope, so the mean
// over a baseline T is off by (e₀ − eₖ)/T at most, whatever the number of
// corrections in between.
//
// The mean is trusted against the prior (InitialPPM ± PriorPPM) by the
// weight w = σ₀²/(σ₀² + σ_T²), σ_T = 2·PhaseError/T: over the 4 s rounds
// of the fast profile, with 1 ms of phase error, one round's estimate is
// ±500 ppm of noise and gets w = 0.04; over a 240 s round it is ±8 ppm and
// gets w = 0.99. Taken at full weight (the earlier gain schedule 1, 1/2,
// 1/3, …), a first estimate after a step from a noisy measurement set the
// frequency hundreds of ppm off, and the schedule's 1/k decay then took
// several rounds to bring the spread back under 1 ms (the package
// doc has the figures; simsync's BenchmarkConverge measures it).
//
// Once the frequency is known (w near 1) it may change by at most
// WanderPPM per minute plus what the remaining uncertainty allows: one
// wild correction does not swing it.
//
// It is not safe for concurrent use; an Applier owns one.
type Discipline struct {
	cfg      DisciplineConfig
	freq     float64 // the setting
	initial  float64 // the prior's centre
	mean     float64 // the Δt-weighted mean of the rates a
	span     float64 // the baseline the mean covers, seconds (≤ Horizon)
	weight   float64 // w of the last update
	logNoise float64 // log of a correction's phase error in s, learnt
	have     bool
	stepped  bool // the interval being read began with a step or SETTIME
	lastAt   time.Time
	lastCorr time.Duration
	n        int
}

// NewDiscipline returns a discipline starting at cfg.InitialPPM (0 if
// out of range).
func NewDiscipline(cfg DisciplineConfig) *Discipline {
	if cfg.MaxPPM <= 0 || cfg.MaxPPM > MaxFrequencyPPM {
		cfg.MaxPPM = MaxFrequencyPPM
	}
	if cfg.Horizon <= 0 {
		cfg.Horizon = DefaultHorizon
	}
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = 30 * time.Second
	}
	if cfg.SlewPPM <= 0 {
		cfg.SlewPPM = MaxSlewPPM
	}
	if !(cfg.PriorPPM > 0) {
		cfg.PriorPPM = DefaultPriorPPM
	}
	if cfg.PhaseError <= 0 {
		cfg.PhaseError = DefaultPhaseError
	}
	if !(cfg.WanderPPM > 0) {
		cfg.WanderPPM = DefaultWanderPPM
	}
	if !(cfg.Stability > 0) {
		cfg.Stability = DefaultStabilityPPM
	}
	freq := cfg.InitialPPM
	if !(freq >= -cfg.MaxPPM && freq <= cfg.MaxPPM) {
		freq = 0
	}
	return &Discipline{cfg: cfg, freq: freq, initial: freq, mean: freq, logNoise: math.Log(cfg.PhaseError.Seconds())}
}

// Frequency is the current frequency setting in ppm.
func (d *Discipline) Frequency() float64 { return d.freq }

// Estimates is how many rate estimates have been taken in.
func (d *Discipline) Estimates() int { return d.n }

// Weight is how much the last estimate was trusted against the prior,
// 0 to 1 (0 before the first).
func (d *Discipline) Weight() float64 { return d.weight }

// horizon is the time constant of the mean, in seconds: the τ that
// minimises the error of a mean rate over τ as a prediction of the next
// interval's, 2σ_e/τ from the corrections' phase error σ_e (learnt) and
// b·√τ from the frequency's random walk since (b = Stability/√1000 s):
// τ = (4σ_e/b)^(2/3), at most Horizon. With 1.5 µs of noise on a LAN and
// a typical crystal (0.03 ppm) that is 342 s (136 s with the default
// Stability, four times that wander), where the 32 min mean lags
// a random walk by several times its noise: a 30-minute simulation of
// N = 50 such clocks in 240 s rounds held the spread within 53 µs
// (p95) with the long mean and 29 µs with a 4-minute one. While the
// noise is still the assumed millisecond it is the Horizon.
func (d *Discipline) horizon() float64 {
	b := d.cfg.Stability * 1e-6 / math.Sqrt(1000)
	tau := math.Pow(4*math.Exp(d.logNoise)/b, 2.0/3)
	return math.Min(tau, d.cfg.Horizon.Seconds())
}

// Reset restarts the interval at time at, after the clock was stepped
// (pending 0) or set by a slew that carries no rate information (pending:
// that slew). The frequency setting is kept, and so is the mean: the
// clock's rate did not change with its phase.
func (d *Discipline) Reset(at time.Time, pending time.Duration) {
	d.have, d.lastAt, d.lastCorr, d.stepped = true, at, pending, true
}

// Observe takes in a correction applied at time at (our clock) and reports
// the new frequency and whether it changed.
func (d *Discipline) Observe(at time.Time, corr time.Duration) (ppm float64, changed bool) {
	prevAt, prevCorr, had, stepped := d.lastAt, d.lastCorr, d.have, d.stepped
	d.have, d.lastAt, d.lastCorr, d.stepped = true, at, corr, false
	if !had {
		return d.freq, false
	}
	dt := at.Sub(prevAt)
	if dt < d.cfg.MinInterval {
		return d.freq, false
	}
	// The previous correction must have been slewed completely before this
	// interval's drift can be read from this one.
	// (A 10 % margin covers the difference between the clocks' rates.)
	if float64(absDur(prevCorr)) > 0.9*d.cfg.SlewPPM*1e-6*float64(dt) {
		return d.freq, false
	}
	est := float64(corr) / float64(dt) * 1e6
	if math.IsNaN(est) || math.Abs(est) > d.cfg.MaxPPM {
		return d.freq, false
	}
	secs := dt.Seconds()
	rate := d.freq + est
	if d.n > 0 {
		// What the mean so far predicted this correction to be, against
		// what it was: about twice a correction's phase error (the
		// mean's own error is smaller). Averaged as logarithms, with the
		// assumed PhaseError as one more sample, and later with weight
		// 1/8: a lucky or wild miss moves it by a factor, not to zero or
		// to everything. Floored at a microsecond, TSP's resolution.
		miss := math.Max(math.Abs(rate-d.mean)*1e-6*secs/2, 1e-6)
		d.logNoise += (math.Log(miss) - d.logNoise) / float64(min(d.n+1, 8))
	}
	d.n++
	prior := d.cfg.PriorPPM
	// sigma is the error of a mean rate over span seconds, in ppm, from
	// phase errors of noise seconds at its ends; trust its weight
	// against the prior.
	sigma := func(span, noise float64) float64 { return 2 * noise / span * 1e6 }
	trust := func(sigma float64) float64 { return prior * prior / (prior*prior + sigma*sigma) }
	// An interval that began with a step (or SETTIME) is read against a
	// phase whose error nobody measured, the one-way delay of a SETTIME
	// or the error of the measurement stepped to: it enters the mean
	// with the weight one interval of that length earns against the
	// prior with the assumed PhaseError, lest its error stay in the mean
	// long after the later corrections have shown the clock's rate.
	in := secs
	if stepped {
		in *= trust(sigma(secs, d.cfg.PhaseError.Seconds()))
	}
	d.span = math.Min(d.span+in, d.horizon())
	d.mean += in / math.Max(d.span, in) * (rate - d.mean)
	sigmaT := sigma(d.span, math.Exp(d.logNoise))
	w := trust(sigmaT)
	target := d.initial + w*(d.mean-d.initial)
	// How far the setting may move: the wander, three standard errors of
	// the mean, and what was still unknown before this estimate (1 − w of
	// the prior's range).
	allowed := d.cfg.WanderPPM*secs/60 + 3*sigmaT + (1-d.weight)*2*prior
	d.weight = w
	next := min(max(target, d.freq-allowed), d.freq+allowed)
	d.freq = math.Max(-d.cfg.MaxPPM, math.Min(d.cfg.MaxPPM, next))
	return d.freq, true
}

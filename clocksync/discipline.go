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
	// MinGain is the floor of the gain schedule 1, 1/2, 1/3, … (default
	// 1/8): the first estimate is taken whole, later ones are averaged in
	// with decreasing weight, and from the 8th on each moves the frequency
	// by an eighth of its residual, which keeps following slow wander.
	MinGain float64
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
}

// Discipline estimates a clock's frequency error from successive
// corrections and returns the frequency to set.
//
// A correction c received Δt after the previous one, which had been fully
// slewed, is what the clock drifted by in Δt at its current frequency
// setting: the residual rate is c/Δt (positive: our clock is slow and must
// run faster). Adding it, scaled by the gain, to the frequency setting
// removes the drift, so the offset between rounds grows only with the
// residual of the estimate.
//
// It is not safe for concurrent use; an Applier owns one.
type Discipline struct {
	cfg      DisciplineConfig
	freq     float64
	have     bool
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
	if cfg.MinGain <= 0 || cfg.MinGain > 1 {
		cfg.MinGain = 1.0 / 8
	}
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = 30 * time.Second
	}
	if cfg.SlewPPM <= 0 {
		cfg.SlewPPM = MaxSlewPPM
	}
	freq := cfg.InitialPPM
	if !(freq >= -cfg.MaxPPM && freq <= cfg.MaxPPM) {
		freq = 0
	}
	return &Discipline{cfg: cfg, freq: freq}
}

// Frequency is the current frequency setting in ppm.
func (d *Discipline) Frequency() float64 { return d.freq }

// Estimates is how many rate estimates have been taken in.
func (d *Discipline) Estimates() int { return d.n }

// Reset restarts the interval at time at, after the clock was stepped
// (pending 0) or set by a slew that carries no rate information (pending:
// that slew). The frequency setting is kept.
func (d *Discipline) Reset(at time.Time, pending time.Duration) {
	d.have, d.lastAt, d.lastCorr = true, at, pending
}

// Observe takes in a correction applied at time at (our clock) and reports
// the new frequency and whether it changed.
func (d *Discipline) Observe(at time.Time, corr time.Duration) (ppm float64, changed bool) {
	prevAt, prevCorr, had := d.lastAt, d.lastCorr, d.have
	d.have, d.lastAt, d.lastCorr = true, at, corr
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
	gain := max(1/float64(d.n+1), d.cfg.MinGain)
	d.n++
	d.freq = math.Max(-d.cfg.MaxPPM, math.Min(d.cfg.MaxPPM, d.freq+gain*est))
	return d.freq, true
}

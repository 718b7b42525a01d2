package clocksync

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Oscillator is how a simulated clock's frequency wanders around its
// constant drift, as a real crystal's does: a random walk of the
// frequency (ageing, and the small temperature changes nobody models)
// and a slow periodic term (the room's daily temperature cycle). The
// zero value wanders not at all: the clock keeps its constant drift, and
// its arithmetic stays exact.
//
// Typical values for the crystal of a commodity PC or server, from
// measurements of such clocks under NTP (package doc, "Simulated
// oscillators"): WanderPPM TypicalWanderPPM, TempPPM TypicalTempPPM over
// TempPeriod TypicalTempPeriod.
type Oscillator struct {
	// WanderPPM is the random walk's Allan deviation at τ = 1000 s, in
	// ppm (0: none). For random-walk frequency noise σ_y(τ) = √(qτ/3),
	// so the frequency's own standard deviation after a time t is
	// WanderPPM·√(3t/1000 s): 0.03 ppm at 1000 s gives 0.05 ppm an hour
	// later and 0.5 ppm a day later.
	WanderPPM float64
	// TempPPM is the amplitude of the periodic term, in ppm (0: none):
	// the frequency swings by ±TempPPM over TempPeriod.
	TempPPM float64
	// TempPeriod is the periodic term's period (default 24 h).
	TempPeriod time.Duration
	// Seed makes the random walk and the periodic term's phase; the
	// same seed gives the same wander, whatever the pattern of reads.
	// Clocks meant to wander independently need different seeds.
	Seed uint64
}

// Typical values of a commodity crystal (package doc, "Simulated
// oscillators").
const (
	TypicalWanderPPM  = 0.03
	TypicalTempPPM    = 1.0
	TypicalTempPeriod = 24 * time.Hour
)

// TypicalOscillator is a typical commodity crystal with the given seed.
func TypicalOscillator(seed uint64) Oscillator {
	return Oscillator{WanderPPM: TypicalWanderPPM, TempPPM: TypicalTempPPM, TempPeriod: TypicalTempPeriod, Seed: seed}
}

// Ranges the oscillator's settings must be in.
const (
	MaxWanderPPM     = 10
	MaxTempPPM       = 100
	MinTempPeriod    = time.Minute
	MaxTempPeriod    = 365 * 24 * time.Hour
	wanderTau        = 1000.0 // s: the τ WanderPPM is the Allan deviation at
	oscillatorStepNS = 1e9    // the random walk's grid: 1 s
)

// Wanders reports whether the oscillator adds anything to constant drift.
func (o Oscillator) Wanders() bool { return o.WanderPPM > 0 || o.TempPPM > 0 }

// Check reports a setting out of range, naming it and its range.
func (o Oscillator) Check() error {
	switch {
	case !(o.WanderPPM >= 0 && o.WanderPPM <= MaxWanderPPM):
		return fmt.Errorf("wander %g ppm out of range: want 0 to %d ppm (the Allan deviation at τ = 1000 s)", o.WanderPPM, MaxWanderPPM)
	case !(o.TempPPM >= 0 && o.TempPPM <= MaxTempPPM):
		return fmt.Errorf("temp %g ppm out of range: want 0 to %d ppm (the periodic term's amplitude)", o.TempPPM, MaxTempPPM)
	case o.TempPeriod != 0 && (o.TempPeriod < MinTempPeriod || o.TempPeriod > MaxTempPeriod):
		return fmt.Errorf("period %v out of range: want %v to %v", o.TempPeriod, MinTempPeriod, MaxTempPeriod)
	}
	return nil
}

// oscillator integrates an Oscillator's frequency into phase. The random
// walk's frequency is drawn on a 1 s grid of source time, from the clock's
// creation, and is linear between grid points, so the phase (its
// integral) is smooth and the same at a time t however the clock was read
// before; the periodic term is integrated exactly. Reading it costs one
// draw per second of source time passed since the last read.
type oscillator struct {
	rng   *rand.Rand
	sigma float64 // the random walk's step per grid step, fraction
	amp   float64 // TempPPM as a fraction
	omega float64 // 2π/TempPeriod, per ns
	phi   float64 // the periodic term's phase at t = 0

	k      int64   // grid steps done
	y0, y1 float64 // the random walk's frequency at steps k and k+1
	base   float64 // the random walk's phase at step k, ns
}

func newOscillator(o Oscillator) *oscillator {
	if !o.Wanders() {
		return nil
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x05c111a7))
	period := o.TempPeriod
	if period <= 0 {
		period = TypicalTempPeriod
	}
	// Allan variance of random-walk FM: σ²(τ) = qτ/3, q the frequency's
	// variance per second.
	w := o.WanderPPM * 1e-6
	q := 3 * w * w / wanderTau
	x := &oscillator{
		rng:   rng,
		sigma: math.Sqrt(q * oscillatorStepNS / 1e9),
		amp:   o.TempPPM * 1e-6,
		omega: 2 * math.Pi / float64(period),
		phi:   2 * math.Pi * rng.Float64(),
	}
	x.y1 = x.sigma * rng.NormFloat64()
	return x
}

// phase is the oscillator's phase (ns) at t ns after the clock's
// creation, relative to t = 0; t must not go backwards between calls by
// more than the current grid step (the clock only ever reads forwards).
func (x *oscillator) phase(t float64) float64 {
	h := float64(oscillatorStepNS)
	for t >= float64(x.k+1)*h {
		x.base += (x.y0 + x.y1) * h / 2
		x.k++
		x.y0, x.y1 = x.y1, x.y1+x.sigma*x.rng.NormFloat64()
	}
	u := t - float64(x.k)*h
	walk := x.base + x.y0*u + (x.y1-x.y0)*u*u/(2*h)
	var periodic float64
	if x.amp > 0 {
		periodic = x.amp / x.omega * (math.Cos(x.phi) - math.Cos(x.omega*t+x.phi))
	}
	return walk + periodic
}

// frequency is the oscillator's frequency (ppm) at the last phase read.
func (x *oscillator) frequencyAt(t float64) float64 {
	h := float64(oscillatorStepNS)
	u := t - float64(x.k)*h
	return (x.y0+(x.y1-x.y0)*u/h)*1e6 + x.amp*math.Sin(x.omega*t+x.phi)*1e6
}

package clocksync

import (
	"math"
	"testing"
	"time"

	"github.com/timed-project/timed/internal/vtime"
)

// phases reads a simulated clock's offset every step for span, in
// virtual time, as seconds.
func phases(cfg SimConfig, step, span time.Duration) []float64 {
	s, c := newVSim(cfg)
	x := make([]float64, 0, int(span/step)+1)
	for range int(span/step) + 1 {
		x = append(x, c.Offset().Seconds())
		s.RunFor(step)
	}
	return x
}

// adev is the overlapping Allan deviation at τ = m·tau0 of phase samples
// x taken every tau0 (NIST SP 1065, eq. 11).
func adev(x []float64, tau0 time.Duration, m int) float64 {
	tau := float64(m) * tau0.Seconds()
	var sum float64
	n := len(x) - 2*m
	for i := range n {
		d := x[i+2*m] - 2*x[i+m] + x[i]
		sum += d * d
	}
	return math.Sqrt(sum / (2 * tau * tau * float64(n)))
}

// The random walk's Allan deviation follows √(qτ/3), with WanderPPM its
// value at τ = 1000 s: measured over 30 simulated days, for several seeds,
// at τ = 10, 100 and 1000 s. The three seeds land within 2 % (the
// overlapping estimator over 2600 periods of 1000 s); the tolerance is
// 10 %. A constant drift adds nothing (the Allan deviation removes it).
func TestOscillatorWanderAllanDeviation(t *testing.T) {
	const span = 30 * 24 * time.Hour
	const tau0 = 10 * time.Second
	for _, seed := range []uint64{1, 2, 3} {
		cfg := SimConfig{DriftPPM: 37, Osc: Oscillator{WanderPPM: 0.03, Seed: seed}}
		x := phases(cfg, tau0, span)
		for _, m := range []int{1, 10, 100} {
			tau := float64(m) * tau0.Seconds()
			want := 0.03e-6 * math.Sqrt(tau/1000)
			got := adev(x, tau0, m)
			t.Logf("seed %d: σ_y(%g s) ratio %.3f", seed, tau, got/want)
			if r := got / want; r < 0.9 || r > 1.1 {
				t.Errorf("seed %d: σ_y(%g s) = %.3g, want %.3g ±10 %% (ratio %.2f)", seed, tau, got, want, r)
			}
		}
	}
}

// The periodic term: frequency A·sin(2πt/P + φ) has the Allan deviation
// A·sin²(πτ/P)/(πτ/P) (sinusoidal FM, NIST SP 1065 §5.2.10): 2A/π at
// τ = P/2, and nothing at τ = P.
func TestOscillatorTemperatureAllanDeviation(t *testing.T) {
	const period = time.Hour
	const tau0 = 10 * time.Second
	x := phases(SimConfig{Osc: Oscillator{TempPPM: 1, TempPeriod: period, Seed: 5}}, tau0, 200*period)
	for _, c := range []struct {
		m    int
		want float64
	}{
		{m: int(period / 2 / tau0), want: 2e-6 / math.Pi},
		{m: int(period / 4 / tau0), want: 1e-6 * 0.5 / (math.Pi / 4)},
	} {
		got := adev(x, tau0, c.m)
		if r := got / c.want; r < 0.95 || r > 1.05 {
			t.Errorf("σ_y(%v) = %.4g, want %.4g ±5 %%", time.Duration(c.m)*tau0, got, c.want)
		}
	}
	if got := adev(x, tau0, int(period/tau0)); got > 1e-9 {
		t.Errorf("σ_y(P) = %.3g, want ≈ 0", got)
	}
}

// The wander is a function of time alone: the same seed gives the same
// offsets however often the clock was read, and the readings never go
// backwards. Different seeds wander differently.
func TestOscillatorDeterministic(t *testing.T) {
	cfg := SimConfig{DriftPPM: -12, Osc: TypicalOscillator(9)}
	coarse := phases(cfg, time.Hour, 48*time.Hour)
	s, c := newVSim(cfg)
	prev := c.Now()
	for i := range 48*3600/7 + 1 {
		// Read every 7 s, compare at every whole hour.
		at := time.Duration(i) * 7 * time.Second
		if at%time.Hour == 0 {
			if got, want := c.Offset().Seconds(), coarse[at/time.Hour]; math.Abs(got-want) > 2e-9 {
				t.Fatalf("at %v: offset %.9f s read every 7 s, %.9f s read hourly", at, got, want)
			}
		}
		s.RunFor(7 * time.Second)
		if now := c.Now(); now.Before(prev) {
			t.Fatalf("clock went backwards: %v then %v", prev, now)
		} else {
			prev = now
		}
	}
	other := phases(SimConfig{DriftPPM: -12, Osc: TypicalOscillator(10)}, time.Hour, 48*time.Hour)
	if math.Abs(other[48]-coarse[48]) < 1e-6 {
		t.Errorf("seeds 9 and 10 ended within 1 µs of each other: %.9f, %.9f", coarse[48], other[48])
	}
}

// Without oscillator settings the clock keeps its constant drift exactly
// (the tests of exact arithmetic rely on it), and NaturalPPM is the drift.
func TestOscillatorOffIsExact(t *testing.T) {
	s, c := newVSim(SimConfig{DriftPPM: 25})
	s.RunFor(1000 * time.Second)
	if got := c.Offset(); got != 25*time.Millisecond {
		t.Fatalf("offset %v, want exactly 25ms", got)
	}
	if got := c.NaturalPPM(); got != 25 {
		t.Fatalf("NaturalPPM %g, want 25", got)
	}
	s2, w := newVSim(SimConfig{DriftPPM: 25, Osc: Oscillator{TempPPM: 2, TempPeriod: time.Hour}})
	s2.RunFor(10 * time.Minute)
	if got := w.NaturalPPM(); got < 23 || got > 27 || got == 25 {
		t.Fatalf("NaturalPPM %g with ±2 ppm of temperature: want in [23, 27], not 25", got)
	}
}

// Reading a wandering clock stays cheap: one normal draw per second of
// source time passed.
func BenchmarkSimClockWander(b *testing.B) {
	s := vtime.New(vtime.Epoch)
	c := NewSimClock(s, SimConfig{DriftPPM: 10, Osc: TypicalOscillator(1)})
	for b.Loop() {
		s.RunFor(time.Second)
		_ = c.Now()
	}
}

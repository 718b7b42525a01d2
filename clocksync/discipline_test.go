package clocksync

import (
	"math"
	"testing"
	"time"
)

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Fatalf("%s: %v, want %v ± %v", what, got, want, tol)
	}
}

func TestDisciplineEstimates(t *testing.T) {
	// A very stable oscillator: the mean's horizon stays the 32 min.
	d := NewDiscipline(DisciplineConfig{Stability: 1e-6})
	at := t0
	// First correction: reference only.
	if _, ok := d.Observe(at, 3*ms); ok {
		t.Fatal("first correction changed the frequency")
	}
	// +24 ms after 240 s: the clock is 100 ppm slow. Over 240 s, 1 ms of
	// phase error is ±8 ppm against the prior's 100: nearly full weight.
	at = at.Add(240 * time.Second)
	f, ok := d.Observe(at, 24*ms)
	if !ok {
		t.Fatal("no first estimate")
	}
	near(t, "first estimate", f, 100, 1)
	near(t, "its weight", d.Weight(), 1, 0.01)
	// Residual −2.4 ms: the clock needs f − 10 ppm; the mean of the two
	// rates over their baselines is 5 ppm lower than the first.
	at = at.Add(240 * time.Second)
	f2, _ := d.Observe(at, -2400*time.Microsecond)
	near(t, "second estimate", f2, (100+f-10)/2, 0.5)
	// Too soon after the previous one: no estimate, the interval restarts.
	at = at.Add(10 * time.Second)
	if _, ok := d.Observe(at, time.Millisecond); ok {
		t.Fatal("estimate from a 10 s baseline")
	}
	// A phase jump (1 s in 240 s = 4167 ppm) is not a rate: ignored…
	at = at.Add(240 * time.Second)
	if _, ok := d.Observe(at, time.Second); ok {
		t.Fatal("took a 1 s jump for a rate")
	}
	// …and the next interval, while that second was still being slewed
	// (1 s needs 2000 s at 500 ppm), is not read either.
	at = at.Add(240 * time.Second)
	if _, ok := d.Observe(at, 2*ms); ok {
		t.Fatal("estimate while the previous correction was still slewing")
	}
	at = at.Add(240 * time.Second)
	if f, ok := d.Observe(at, 0); !ok || math.Abs(f-f2) > 0.2 || d.Estimates() != 3 {
		t.Fatalf("after recovery %v %v, %d estimates", f, ok, d.Estimates())
	}
	// Past the horizon (32 min) each 240 s estimate moves the mean by
	// 240/1920 = 1/8 of its residual, which keeps following wander.
	for range 20 {
		at = at.Add(240 * time.Second)
		d.Observe(at, 0)
	}
	before := d.Frequency()
	at = at.Add(240 * time.Second)
	f, _ = d.Observe(at, 2400*time.Microsecond) // +10 ppm residual
	near(t, "late estimate's move", f-before, 10.0/8, 0.01)
}

// The regression: a first estimate after a step, over the fast
// profile's 4 s round, from a step that left the clock 1 ms off, was
// taken whole: −150 ppm here, hundreds in the run. Now it gets the
// weight its baseline earns against the prior.
func TestDisciplineFirstEstimateAfterStep(t *testing.T) {
	d := NewDiscipline(DisciplineConfig{MinInterval: 3 * time.Second})
	// The clock runs 100 ppm slow at setting 0; x is its offset, e the
	// error each correction leaves it with.
	x, at := time.Millisecond, t0 // stepped, 1 ms off
	d.Reset(at, 0)
	round := func(e time.Duration) (float64, bool) {
		at = at.Add(4 * time.Second)
		x += time.Duration((d.Frequency() - 100) * 4e3) // ns per ppm over 4 s
		c := -x + e
		x += c
		return d.Observe(at, c)
	}
	f, ok := round(0)
	if !ok {
		t.Fatal("no estimate")
	}
	if math.Abs(f) > 15 || d.Weight() > 0.05 {
		t.Fatalf("first estimate after a step over 4 s: %v ppm (weight %v), want a few ppm", f, d.Weight())
	}
	// Corrections that agree (±5 µs) earn the weight within a few rounds:
	// the phase error is learnt from how well they agree.
	for k := range 6 {
		f, _ = round(time.Duration(k%2*10-5) * time.Microsecond)
	}
	near(t, "after 7 rounds", f, 100, 10)
}

// Once the frequency is known, one wild correction does not swing it:
// the change is clamped to the wander plus the estimate's uncertainty.
func TestDisciplineClampsChange(t *testing.T) {
	d := NewDiscipline(DisciplineConfig{})
	at := t0
	d.Reset(at, 0)
	for range 12 {
		at = at.Add(240 * time.Second)
		d.Observe(at, 0)
	}
	before := d.Frequency()
	at = at.Add(240 * time.Second)
	f, ok := d.Observe(at, 50*ms) // 208 ppm
	if !ok {
		t.Fatal("no estimate")
	}
	// Unclamped, 1/8 of 208 ppm; the wander allows 4 ppm in 240 s.
	if ch := f - before; ch <= 0 || ch > 4.5 {
		t.Fatalf("a 50 ms correction moved the frequency by %v ppm", ch)
	}
}

func TestDisciplineClampAndReset(t *testing.T) {
	d := NewDiscipline(DisciplineConfig{MaxPPM: 50})
	d.Reset(t0, 0)
	f, ok := d.Observe(t0.Add(240*time.Second), 9600*time.Microsecond)
	if !ok {
		t.Fatal("no estimate")
	}
	near(t, "40 ppm", f, 40, 0.5)
	f, ok = d.Observe(t0.Add(480*time.Second), 9600*time.Microsecond) // the clock needs f + 40
	if !ok || f != 50 {
		t.Fatalf("clamped: %v %v, want 50", f, ok)
	}
	// Reset with a pending slew the next interval cannot finish.
	d.Reset(t0.Add(500*time.Second), 200*ms)
	if _, ok := d.Observe(t0.Add(740*time.Second), 0); ok {
		t.Fatal("estimate after a reset with a long pending slew")
	}
}

func TestDisciplineInitial(t *testing.T) {
	if f := NewDiscipline(DisciplineConfig{InitialPPM: -12.5}).Frequency(); f != -12.5 {
		t.Fatalf("initial %v", f)
	}
	if f := NewDiscipline(DisciplineConfig{InitialPPM: 900}).Frequency(); f != 0 {
		t.Fatalf("out-of-range initial kept: %v", f)
	}
}

// Once the corrections show little noise, the mean forgets faster: over
// 240 s rounds with corrections within a microsecond, the horizon tends
// to (4 µs / b)^(2/3) = 104 s for the default stability (b = 0.12
// ppm/√1000 s), shorter than a round, so a new rate is taken whole (up to the wander
// clamp, 4 ppm in 240 s), where the 32 min horizon took 1/8 of it.
func TestDisciplineHorizonShortens(t *testing.T) {
	d := NewDiscipline(DisciplineConfig{})
	at := t0
	d.Reset(at, 0)
	if h := d.horizon(); h != DefaultHorizon.Seconds() {
		t.Fatalf("horizon %v s before any noise is learnt, want the 32 min", h)
	}
	for range 20 {
		at = at.Add(240 * time.Second)
		d.Observe(at, 0)
	}
	if h := d.horizon(); h < 100 || h > 240 {
		t.Fatalf("horizon %v s after 20 quiet rounds, want about 104 s, under a round", h)
	}
	before := d.Frequency()
	at = at.Add(240 * time.Second)
	f, _ := d.Observe(at, 240*time.Microsecond) // +1 ppm residual
	near(t, "move", f-before, 1, 0.01)
}

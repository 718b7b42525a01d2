package clocksync

import (
	"math"
	"testing"
	"time"
)

func TestDisciplineEstimates(t *testing.T) {
	d := NewDiscipline(DisciplineConfig{})
	at := t0
	// First correction: reference only.
	if _, ok := d.Observe(at, 3*ms); ok {
		t.Fatal("first correction changed the frequency")
	}
	// +24 ms after 240 s: the clock is 100 ppm slow; gain 1.
	at = at.Add(240 * time.Second)
	if f, ok := d.Observe(at, 24*ms); !ok || math.Abs(f-100) > 1e-9 {
		t.Fatalf("first estimate %v %v, want 100", f, ok)
	}
	// Residual −2.4 ms: −10 ppm, gain 1/2 → 95.
	at = at.Add(240 * time.Second)
	if f, _ := d.Observe(at, -2400*time.Microsecond); math.Abs(f-95) > 1e-9 {
		t.Fatalf("second estimate %v, want 95", f)
	}
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
	if f, ok := d.Observe(at, 0); !ok || f != 95 || d.Estimates() != 3 {
		t.Fatalf("after recovery %v %v, %d estimates", f, ok, d.Estimates())
	}
	// The gain never drops below MinGain (1/8).
	for range 20 {
		at = at.Add(240 * time.Second)
		d.Observe(at, 0)
	}
	before := d.Frequency()
	at = at.Add(240 * time.Second)
	f, _ := d.Observe(at, 2400*time.Microsecond) // +10 ppm residual
	if math.Abs(f-before-10.0/8) > 1e-9 {
		t.Fatalf("late gain moved %v → %v", before, f)
	}
}

func TestDisciplineClampAndReset(t *testing.T) {
	d := NewDiscipline(DisciplineConfig{MaxPPM: 50})
	d.Reset(t0, 0)
	if f, ok := d.Observe(t0.Add(240*time.Second), 9600*time.Microsecond); !ok || f != 40 {
		t.Fatalf("40 ppm: %v %v", f, ok)
	}
	f, ok := d.Observe(t0.Add(480*time.Second), 4800*time.Microsecond) // +20 ppm, gain 1/2
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

package clocksync

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/internal/vtime"
)

func newVSim(cfg SimConfig) (*vtime.Scheduler, *SimClock) {
	s := vtime.New(vtime.Epoch)
	return s, NewSimClock(s, cfg)
}

func TestSimClockOffsetAndDrift(t *testing.T) {
	s, c := newVSim(SimConfig{Offset: 350 * time.Millisecond, DriftPPM: -40})
	if got := c.Now().Sub(s.Now()); got != 350*time.Millisecond {
		t.Fatalf("offset at start = %v, want 350ms", got)
	}
	s.RunFor(1000 * time.Second) // −40 ppm × 1000 s = −40 ms
	if got := c.Offset(); got != 310*time.Millisecond {
		t.Fatalf("offset after 1000 s = %v, want 310ms", got)
	}
}

// The slew limit: adjtime moves the clock by at most 500 µs per second.
func TestSimClockSlewLimit(t *testing.T) {
	s, c := newVSim(SimConfig{})
	if err := c.Adjust(time.Second); err != nil {
		t.Fatal(err)
	}
	s.RunFor(time.Second)
	if got := c.Offset(); got != 500*time.Microsecond {
		t.Fatalf("after 1 s of a 1 s slew: %v, want 500µs (500 ppm)", got)
	}
	s.RunFor(999 * time.Second)
	if got := c.Offset(); got != 500*time.Millisecond {
		t.Fatalf("after 1000 s: %v, want 500ms", got)
	}
	st, _ := c.State()
	if st.PendingSlew != 500*time.Millisecond {
		t.Fatalf("pending = %v, want 500ms", st.PendingSlew)
	}
	s.RunFor(2000 * time.Second)
	if got := c.Offset(); got != time.Second {
		t.Fatalf("after the slew completed: %v, want exactly 1s", got)
	}
	// Negative slews, and a new Adjust replaces the pending one.
	_ = c.Adjust(-time.Second)
	s.RunFor(10 * time.Second)
	_ = c.Adjust(-time.Millisecond)
	s.RunFor(10 * time.Second)
	if got := c.Offset(); got != time.Second-5*time.Millisecond-time.Millisecond {
		t.Fatalf("after replaced slew: %v, want 994ms", got)
	}
	// Never faster than 500 ppm, even sampled at fine grain.
	_ = c.Adjust(time.Hour)
	prev := c.Offset()
	for range 100 {
		s.RunFor(10 * time.Millisecond)
		if d := c.Offset() - prev; d > 5*time.Microsecond {
			t.Fatalf("slewed %v in 10 ms, limit 5µs", d)
		}
		prev = c.Offset()
	}
}

func TestSimClockStepAndFrequency(t *testing.T) {
	s, c := newVSim(SimConfig{DriftPPM: 100})
	_ = c.Adjust(time.Second)
	target := s.Now().Add(time.Hour)
	if err := c.Step(target); err != nil {
		t.Fatal(err)
	}
	if !c.Now().Equal(target) {
		t.Fatalf("after step: %v, want %v", c.Now(), target)
	}
	if st, _ := c.State(); st.PendingSlew != 0 {
		t.Fatalf("step left a pending slew of %v", st.PendingSlew)
	}
	if err := c.SetFrequency(-100); err != nil {
		t.Fatal(err)
	}
	before := c.Offset()
	s.RunFor(time.Hour)
	if got := c.Offset(); got != before {
		t.Fatalf("drift +100 with frequency −100 moved the clock by %v", got-before)
	}
	for _, bad := range []float64{500.5, -501, 1e9} {
		if err := c.SetFrequency(bad); !errors.Is(err, ErrFrequencyRange) {
			t.Errorf("SetFrequency(%g) = %v, want ErrFrequencyRange", bad, err)
		}
	}
}

func TestSimClockMonotonicSource(t *testing.T) {
	c := NewSimClock(NewMonotonicSource(), SimConfig{Offset: -2 * time.Second})
	a := c.Now()
	if d := time.Since(a); d < time.Second || d > 3*time.Second {
		t.Fatalf("sim clock at −2 s is %v behind the host clock", d)
	}
	time.Sleep(2 * time.Millisecond)
	if b := c.Now(); !b.After(a) {
		t.Fatalf("not advancing: %v then %v", a, b)
	}
	// Readings carry no monotonic part, so Sub sees the offsets.
	_ = c.Step(c.Now().Add(time.Minute))
	if d := c.Now().Sub(a); d < time.Minute {
		t.Fatalf("step not visible through Sub: %v", d)
	}
}

func TestParseSimSpec(t *testing.T) {
	good := map[string]SimConfig{
		"sim":                             {},
		"sim:offset=+350ms,drift=-40ppm":  {Offset: 350 * time.Millisecond, DriftPPM: -40},
		"sim:drift=12.5,offset=-1.5s":     {Offset: -1500 * time.Millisecond, DriftPPM: 12.5},
		" sim: offset = 2s , slew=100ppm": {Offset: 2 * time.Second, SlewPPM: 100},
		"sim:drift=5000ppm":               {DriftPPM: 5000},
		// The oscillator (oscillator.go).
		"sim:wander=0.03ppm":                      {Osc: Oscillator{WanderPPM: 0.03}},
		"sim:drift=4,temp=1ppm,period=12h,seed=7": {DriftPPM: 4, Osc: Oscillator{TempPPM: 1, TempPeriod: 12 * time.Hour, Seed: 7}},
		"sim:seed=18446744073709551615":           {Osc: Oscillator{Seed: math.MaxUint64}},
		"sim:wander=10,temp=100,period=1m":        {Osc: Oscillator{WanderPPM: 10, TempPPM: 100, TempPeriod: time.Minute}},
		"sim:wander=0,temp=0":                     {},
	}
	for spec, want := range good {
		got, err := ParseSimSpec(spec)
		if err != nil || got != want {
			t.Errorf("ParseSimSpec(%q) = %+v, %v; want %+v", spec, got, err, want)
		}
	}
	bad := map[string]string{
		"simulated":               "followed by",
		"system":                  "does not start",
		"sim:":                    "empty setting",
		"sim:offset":              "no value",
		"sim:offset=":             "no value",
		"sim:offset=350":          "not a duration",
		"sim:drift=fast":          "not a number",
		"sim:drift=NaN":           "not a number",
		"sim:drift=1e6ppm":        "beyond",
		"sim:offset=1s,offset=2s": "twice",
		"sim:colour=blue":         "unknown setting",
		"sim:offset=1s,,drift=1":  "empty setting",
		"sim:slew=0ppm":           "must be in",
		// The oscillator: each option named, with its range.
		"sim:wander=-0.1ppm":     "wander -0.1 ppm out of range: want 0 to 10 ppm",
		"sim:wander=11":          "wander 11 ppm out of range: want 0 to 10 ppm",
		"sim:wander=lots":        "wander \"lots\" is not a number of ppm",
		"sim:wander=NaN":         "wander \"NaN\" is not a number of ppm",
		"sim:temp=-1":            "temp -1 ppm out of range: want 0 to 100 ppm",
		"sim:temp=101ppm":        "temp 101 ppm out of range: want 0 to 100 ppm",
		"sim:temp=+Inf":          "temp \"+Inf\" is not a number of ppm",
		"sim:period=30s":         "period 30s out of range: want 1m0s to 8760h0m0s",
		"sim:period=9000h":       "period 9000h0m0s out of range: want 1m0s to 8760h0m0s",
		"sim:period=daily":       "period \"daily\" is not a duration",
		"sim:seed=-1":            "seed \"-1\" is not a whole number from 0 to 18446744073709551615",
		"sim:seed=1.5":           "seed \"1.5\" is not a whole number",
		"sim:seed=1,seed=2":      "\"seed\" given twice",
		"sim:wobble=1ppm":        "known: offset, drift, slew, wander, temp, period, seed",
		"sim:wander=0.1,wander=": "no value",
	}
	for spec, frag := range bad {
		_, err := ParseSimSpec(spec)
		if !errors.Is(err, ErrBadClockSpec) || !strings.Contains(err.Error(), frag) {
			t.Errorf("ParseSimSpec(%q) = %v; want ErrBadClockSpec mentioning %q", spec, err, frag)
		}
	}
}

func TestParseClock(t *testing.T) {
	s := vtime.New(vtime.Epoch)
	for spec, kind := range map[string]string{"system": "system", "dry-run": "dry-run", "sim:offset=1s": "sim"} {
		c, err := ParseClock(spec, s)
		if err != nil {
			t.Fatalf("ParseClock(%q): %v", spec, err)
		}
		if kind == "system" {
			if _, ok := c.(*SystemClock); !ok {
				t.Fatalf("ParseClock(system) = %T", c)
			}
			continue // do not even read its state here
		}
		st, err := c.State()
		if err != nil || st.Kind != kind {
			t.Fatalf("ParseClock(%q).State() = %+v, %v", spec, st, err)
		}
	}
	if _, err := ParseClock("ntp", nil); !errors.Is(err, ErrBadClockSpec) || !strings.Contains(err.Error(), "dry-run") {
		t.Fatalf("ParseClock(ntp) = %v", err)
	}
}

package clocksync

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/timed-project/timed/tsp"
)

func TestPlanCorrection(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name           string
		network, slave time.Duration
		needSet        bool
		opt            CorrectOptions
		typ            tsp.Type
		adj            time.Duration
	}{
		{"plain", 3 * ms, -2 * ms, false, CorrectOptions{}, tsp.AdjTime, 5 * ms},
		{"microsecond rounding", 0, 1234567, false, CorrectOptions{}, tsp.AdjTime, -1235 * time.Microsecond},
		{"bsd 5 ms rounding", 0, 7400 * time.Microsecond, false, CorrectOptions{Rounding: BSDRounding}, tsp.AdjTime, -5 * ms},
		{"bsd rounds up", 0, -7600 * time.Microsecond, false, CorrectOptions{Rounding: BSDRounding}, tsp.AdjTime, 10 * ms},
		{"below threshold", 0, -(20*time.Second - time.Microsecond), false, CorrectOptions{}, tsp.AdjTime, 20*time.Second - time.Microsecond},
		{"at threshold", 0, 20 * time.Second, false, CorrectOptions{}, tsp.SetTime, 0},
		{"negative at threshold", 0, -20 * time.Second, false, CorrectOptions{}, tsp.SetTime, 0},
		{"new slave", 0, 0, true, CorrectOptions{}, tsp.SetTime, 0},
		// A master change: every slave is new to the new master, and one
		// already synchronised is adjusted by what it measured, not set.
		{"new slave near", 3 * ms, 2 * ms, true, CorrectOptions{AdjustNewBelow: 100 * ms}, tsp.AdjTime, ms},
		{"new slave just near", 0, 100*ms - time.Microsecond, true, CorrectOptions{AdjustNewBelow: 100 * ms}, tsp.AdjTime, -(100*ms - time.Microsecond)},
		{"new slave not near", 0, -100 * ms, true, CorrectOptions{AdjustNewBelow: 100 * ms}, tsp.SetTime, 0},
		{"new slave far off", 0, 20 * time.Second, true, CorrectOptions{AdjustNewBelow: time.Hour}, tsp.SetTime, 0},
		{"custom threshold", 0, 2 * time.Second, false, CorrectOptions{StepThreshold: time.Second}, tsp.SetTime, 0},
	}
	for _, c := range cases {
		got := PlanCorrection(c.network, c.slave, c.needSet, now, c.opt)
		if got.Type != c.typ || got.Adjust != c.adj {
			t.Errorf("%s: %+v, want %v %v", c.name, got, c.typ, c.adj)
		}
		if c.typ == tsp.SetTime && !got.SetTo.Equal(now.Add(c.network)) {
			t.Errorf("%s: SETTIME carries %v", c.name, got.SetTo)
		}
	}
}

func TestCorrectionPacket(t *testing.T) {
	adj := Correction{Type: tsp.AdjTime, Adjust: -10 * ms}
	p, err := adj.Packet(9, "master")
	if err != nil || p.Time != (tsp.Timeval{Sec: -1, Usec: 990000}) || p.Seq != 9 || p.Type != tsp.AdjTime {
		t.Fatalf("ADJTIME packet %+v, %v", p, err)
	}
	to := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	set := Correction{Type: tsp.SetTime, SetTo: to}
	p, _ = set.Packet(1, "m")
	if !p.Time.Time().Equal(to) {
		t.Fatalf("SETTIME carries %v", p.Time.Time())
	}
	// A retry 400 ms later carries a current time.
	p, _ = set.PacketAfter(1, "m", 400*ms)
	if !p.Time.Time().Equal(to.Add(400 * ms)) {
		t.Fatalf("re-stamped SETTIME carries %v", p.Time.Time())
	}
}

func quietLog() (*logrus.Logger, *test.Hook) {
	l, h := test.NewNullLogger()
	l.SetOutput(io.Discard)
	return l, h
}

func TestApplierSlewStepRefuse(t *testing.T) {
	s, c := newVSim(SimConfig{})
	log, hook := quietLog()
	a := &Applier{Clock: c, Log: log}

	r, err := a.ApplyAdjust(30 * ms)
	if err != nil || r.Action != Slewed {
		t.Fatalf("30 ms: %+v %v", r, err)
	}
	s.RunFor(time.Minute)
	if c.Offset() != 30*ms {
		t.Fatalf("after slew: %v", c.Offset())
	}
	r, err = a.ApplyAdjust(-25 * time.Second)
	if err != nil || r.Action != Stepped || c.Offset() != 30*ms-25*time.Second {
		t.Fatalf("−25 s: %+v %v, offset %v", r, err, c.Offset())
	}
	// Beyond max-step: refused, logged as an error, clock untouched.
	before := c.Offset()
	r, err = a.ApplyAdjust(1001 * time.Second)
	if !errors.Is(err, ErrBeyondMaxStep) || r.Action != Refused {
		t.Fatalf("1001 s: %+v %v", r, err)
	}
	if c.Offset() != before {
		t.Fatalf("refused correction moved the clock by %v", c.Offset()-before)
	}
	if e := hook.LastEntry(); e == nil || e.Level != logrus.ErrorLevel {
		t.Fatalf("refusal not logged as an error: %+v", e)
	}
	// Exactly max-step is allowed; a SETTIME beyond it is refused too.
	if r, err := a.ApplyAdjust(-DefaultMaxStep); err != nil || r.Action != Stepped {
		t.Fatalf("exactly max-step: %+v %v", r, err)
	}
	before = c.Offset()
	if _, err := a.ApplySetTime(c.Now().Add(2*time.Hour), 0); !errors.Is(err, ErrBeyondMaxStep) || c.Offset() != before {
		t.Fatalf("SETTIME +2 h: %v, moved %v", err, c.Offset()-before)
	}
	// A custom max-step.
	a.MaxStep = time.Minute
	if _, err := a.ApplyAdjust(-61 * time.Second); !errors.Is(err, ErrBeyondMaxStep) {
		t.Fatalf("custom max-step: %v", err)
	}
}

// SETTIME: the time carried plus the time spent in the queue.
func TestApplierSetTimeQueueCorrection(t *testing.T) {
	s, c := newVSim(SimConfig{Offset: -10 * time.Minute})
	a := &Applier{Clock: c, Log: logrus.New()}
	a.Log.(*logrus.Logger).SetOutput(io.Discard)
	// The master sent "now" 300 ms ago; the packet then sat in our queue.
	sent := s.Now().Add(-300 * ms)
	r, err := a.ApplySetTime(sent, 300*ms)
	if err != nil || r.Action != Stepped || c.Offset() != 0 {
		t.Fatalf("%+v %v, offset %v", r, err, c.Offset())
	}
	// Small differences are slewed, as BSD does.
	r, err = a.ApplySetTime(s.Now().Add(2*time.Second), 0)
	if err != nil || r.Action != Slewed {
		t.Fatalf("small SETTIME: %+v %v", r, err)
	}
	if QueueCorrected(sent, -time.Second) != sent {
		t.Fatal("negative queue time applied")
	}
}

// With a discipline, the Applier sets the frequency from the corrections.
func TestApplierDiscipline(t *testing.T) {
	s, c := newVSim(SimConfig{DriftPPM: 37})
	log, _ := quietLog()
	a := &Applier{Clock: c, Log: log, Discipline: NewDiscipline(DisciplineConfig{}), StepThreshold: SlewStepThreshold}
	for range 6 {
		_, err := a.ApplyAdjust(-c.Offset())
		if err != nil {
			t.Fatal(err)
		}
		s.RunFor(240 * time.Second)
	}
	st, _ := c.State()
	if d := st.FrequencyPPM + 37; d > 0.01 || d < -0.01 {
		t.Fatalf("frequency %v, want −37", st.FrequencyPPM)
	}
	if off := absDur(c.Offset()); off > time.Microsecond {
		t.Fatalf("offset after discipline %v", off)
	}
	if ppm, n, ok := a.Frequency(); !ok || ppm != st.FrequencyPPM || n < 1 {
		t.Fatalf("Frequency() = %v, %d, %v; want the clock's %v after estimates", ppm, n, ok, st.FrequencyPPM)
	}
	if _, _, ok := (&Applier{Clock: c}).Frequency(); ok {
		t.Fatal("Frequency() ok without a Discipline")
	}
}

// MakeStep: while unsynchronised (the first Count corrections after start
// or after an alarm) corrections at or above its threshold are stepped,
// below the step threshold too; then slewed again. Max-step still holds.
func TestApplierMakeStep(t *testing.T) {
	s, c := newVSim(SimConfig{})
	log, _ := quietLog()
	a := &Applier{Clock: c, Log: log, StepThreshold: SlewStepThreshold, MaxStep: time.Minute, MakeStep: DefaultMakeStep,
		Discipline: NewDiscipline(DisciplineConfig{})}
	apply := func(d time.Duration, want Action) Applied {
		t.Helper()
		r, err := a.ApplyAdjust(d)
		if r.Action != want {
			t.Fatalf("%v: %v (%v), want %v", d, r.Action, err, want)
		}
		return r
	}
	before := c.Offset()
	apply(40*ms, Stepped)
	if c.Offset()-before != 40*ms {
		t.Fatalf("makestep moved the clock by %v", c.Offset()-before)
	}
	apply(500*time.Microsecond, Slewed) // below its threshold: slewed, but counted
	s.RunFor(240 * time.Second)
	// Stepped, and still read as a rate: 24 ms in 240 s is 100 ppm.
	if r := apply(24*ms, Stepped); !r.FreqChanged || r.FrequencyPPM < 90 {
		t.Fatalf("a makestep ADJTIME did not feed the discipline: %+v", r)
	}
	apply(40*ms, Slewed) // the 4th: synchronised, slewed as before
	// Beyond max-step: refused whatever MakeStep says (the alarm)…
	if _, err := a.ApplyAdjust(2 * time.Minute); !errors.Is(err, ErrBeyondMaxStep) {
		t.Fatalf("beyond max-step: %v", err)
	}
	// …and once the alarm ends the clock is unsynchronised again.
	apply(time.Second, Stepped) // ends the alarm (≥ step threshold anyway)
	for range DefaultMakeStep.Count {
		apply(30*ms, Stepped)
	}
	apply(30*ms, Slewed)
	// Off (the zero value): BSD's slew below the step threshold.
	b := &Applier{Clock: c, Log: log, StepThreshold: SlewStepThreshold}
	if r, _ := b.ApplyAdjust(40 * ms); r.Action != Slewed {
		t.Fatalf("without MakeStep: %v", r.Action)
	}
}

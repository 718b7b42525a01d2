package clocksync

import (
	"errors"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

const round = 240 * time.Second // BSD's sync round

// masterRounds plays the master: every round it corrects the clock by
// minus its offset from true time, as measured exactly. It stops when a
// correction leaves the clock within 1 ms, and returns what was applied.
func masterRounds(t *testing.T, s interface{ RunFor(time.Duration) }, c *SimClock, a *Applier, most int) []Applied {
	t.Helper()
	var out []Applied
	for range most {
		r, err := a.ApplyAdjust(-c.Offset())
		if err != nil && !errors.Is(err, ErrBeyondMaxStep) {
			t.Fatal(err)
		}
		out = append(out, r)
		s.RunFor(round)
		if absDur(c.Offset()) < ms {
			return out
		}
	}
	t.Fatalf("clock still %v off after %d rounds: %+v", c.Offset(), most, out)
	return nil
}

// Forged corrections, each within max-step, push a slave +4995 s. The
// master's −4995 s undoes them: it is taken at once, in moves of max-step
// one round apart; the alarm is on meanwhile, then off.
func TestApplierAlarmUndoesForgedSteps(t *testing.T) {
	s, c := newVSim(SimConfig{})
	log, hook := quietLog()
	log.SetLevel(logrus.DebugLevel)
	a := &Applier{Clock: c, Log: log, MaxStep: 1000 * time.Second}
	for range 5 {
		if r, err := a.ApplyAdjust(999 * time.Second); err != nil || r.Action != Stepped {
			t.Fatalf("forged step: %+v %v", r, err)
		}
	}
	if c.Offset() != 4995*time.Second || a.Alarm().On {
		t.Fatalf("after the forgery: offset %v, alarm %+v", c.Offset(), a.Alarm())
	}

	// First master round: −4995 s undoes the forged steps: moved −1000 s.
	r, err := a.ApplyAdjust(-c.Offset())
	if err != nil || r.Action != Stepped || r.By != -1000*time.Second || r.Requested != -4995*time.Second || !r.Alarm {
		t.Fatalf("first master correction: %+v %v", r, err)
	}
	al := a.Alarm()
	if !al.On || al.Offset != 3995*time.Second || al.Refused != 0 {
		t.Fatalf("alarm %+v", al)
	}
	// The daemon says it at Warn, once; the Applier's own line is Debug.
	if e := hook.LastEntry(); e.Level != logrus.DebugLevel || e.Data["by"] != "-16m40s" {
		t.Fatalf("move not logged: %+v", e)
	}
	// The same correction re-sent (a lost ACK) does not move it again.
	before := c.Offset()
	s.RunFor(2 * time.Second)
	if _, err := a.ApplyAdjust(-4995 * time.Second); !errors.Is(err, ErrBeyondMaxStep) || c.Offset() != before {
		t.Fatalf("re-sent correction: %v, moved %v", err, c.Offset()-before)
	}
	// A correction away from network time is refused.
	if r, err := a.ApplyAdjust(2000 * time.Second); !errors.Is(err, ErrBeyondMaxStep) || r.Action != Refused || c.Offset() != before {
		t.Fatalf("correction away: %+v %v, moved %v", r, err, c.Offset()-before)
	}
	s.RunFor(round)

	// The following rounds bring it back, never refused.
	rounds := masterRounds(t, s, c, a, 10)
	for i, r := range rounds {
		if r.Action == Refused || absDur(r.By) > a.MaxStep {
			t.Fatalf("round %d: %+v", i+2, r)
		}
	}
	// 3 more moves of −1000 s, then −995 s within max-step: out of alarm.
	if len(rounds) != 4 || rounds[3].By != -995*time.Second || rounds[3].Alarm || a.Alarm().On {
		t.Fatalf("rounds %+v, alarm %+v", rounds, a.Alarm())
	}

	// Beyond max-step and undoing nothing: refused, as ever.
	before = c.Offset()
	if r, err := a.ApplyAdjust(1500 * time.Second); !errors.Is(err, ErrBeyondMaxStep) || r.Action != Refused || c.Offset() != before || !a.Alarm().On {
		t.Fatalf("correction away: %+v %v, moved %v, alarm %+v", r, err, c.Offset()-before, a.Alarm())
	}
}

// A clock far off with no history (set wrong at boot): the first
// correction beyond max-step is refused, the master's next one, the same
// way, confirms it and the clock comes back by max-step a round.
func TestApplierAlarmConfirmedByNextRound(t *testing.T) {
	s, c := newVSim(SimConfig{Offset: 4995 * time.Second})
	log, _ := quietLog()
	a := &Applier{Clock: c, Log: log, MaxStep: 1000 * time.Second}
	rounds := masterRounds(t, s, c, a, 10)
	want := []struct {
		act Action
		by  time.Duration
	}{
		{Refused, -4995 * time.Second},
		{Stepped, -1000 * time.Second},
		{Stepped, -1000 * time.Second},
		{Stepped, -1000 * time.Second},
		{Stepped, -1000 * time.Second},
		{Stepped, -995 * time.Second},
	}
	if len(rounds) != len(want) {
		t.Fatalf("rounds %+v", rounds)
	}
	for i, w := range want {
		if rounds[i].Action != w.act || rounds[i].By != w.by {
			t.Fatalf("round %d: %+v, want %v %v", i+1, rounds[i], w.act, w.by)
		}
	}
	if a.Alarm().On {
		t.Fatalf("alarm still on: %+v", a.Alarm())
	}
}

// Forged corrections the other way, between the master's rounds, do not
// keep the master's from being confirmed.
func TestApplierAlarmConfirmedDespiteForgery(t *testing.T) {
	s, c := newVSim(SimConfig{Offset: 4995 * time.Second})
	log, _ := quietLog()
	a := &Applier{Clock: c, Log: log, MaxStep: 1000 * time.Second}
	var moved int
	for range 4 {
		if r, _ := a.ApplyAdjust(-c.Offset()); r.Action == Stepped {
			moved++
		}
		s.RunFor(round / 2)
		if r, _ := a.ApplyAdjust(3000 * time.Second); r.Action != Refused && moved == 0 {
			t.Fatalf("first forged correction applied: %+v", r)
		}
		s.RunFor(round / 2)
	}
	if moved == 0 || c.Offset() >= 4995*time.Second {
		t.Fatalf("master's corrections never taken: offset %v", c.Offset())
	}
}

// In alarm, the alarm's Since stays the instant the alarm went on, on the
// clock's present scale, through the Applier's own steps.
func TestApplierAlarmSince(t *testing.T) {
	s, c := newVSim(SimConfig{Offset: 4995 * time.Second})
	log, _ := quietLog()
	a := &Applier{Clock: c, Log: log}
	on := s.Now()
	a.ApplyAdjust(-c.Offset()) // refused, alarm on
	s.RunFor(round)
	a.ApplyAdjust(-c.Offset()) // confirmed: −1000 s
	al := a.Alarm()
	// The clock is now 3995 s ahead of true time: so is Since.
	if !al.On || !al.Since.Equal(on.Add(3995*time.Second)) || al.Refused != 1 {
		t.Fatalf("alarm %+v, went on at true %v", al, on)
	}
}

// A forger who passes for the master and asks for +5000 s every second
// moves the clock by max-step once a RecoveryInterval at most.
func TestApplierAlarmForgerBounded(t *testing.T) {
	s, c := newVSim(SimConfig{})
	log, _ := quietLog()
	a := &Applier{Clock: c, Log: log, MaxStep: 1000 * time.Second, RecoveryInterval: round}
	const span = 10 * time.Minute
	for range int(span / time.Second) {
		a.ApplyAdjust(5000 * time.Second)
		s.RunFor(time.Second)
	}
	// Refused at 0 s (nothing confirms it), moved at 1 s, 241 s and 481 s:
	// no more than max-step a round.
	if got, want := c.Offset(), 3*a.MaxStep; got != want {
		t.Fatalf("forger moved the clock %v in %v, want %v", got, span, want)
	}
}

// The operator's step ignores max-step and ends the alarm.
func TestApplierOperatorStep(t *testing.T) {
	_, c := newVSim(SimConfig{Offset: 2 * time.Hour})
	log, hook := quietLog()
	a := &Applier{Clock: c, Log: log, Discipline: NewDiscipline(DisciplineConfig{})}
	if _, err := a.ApplyAdjust(-c.Offset()); !errors.Is(err, ErrBeyondMaxStep) || !a.Alarm().On {
		t.Fatalf("2 h: %v, alarm %+v", err, a.Alarm())
	}
	r, err := a.Step(-2 * time.Hour)
	if err != nil || r.Action != Stepped || r.By != -2*time.Hour || c.Offset() != 0 {
		t.Fatalf("operator's step: %+v %v, offset %v", r, err, c.Offset())
	}
	if a.Alarm().On {
		t.Fatalf("alarm after the operator's step: %+v", a.Alarm())
	}
	e := hook.LastEntry()
	if e.Level != logrus.WarnLevel || e.Data["step"] != "-2h0m0s" || e.Data["alarm_was"] != true {
		t.Fatalf("log %+v", e)
	}
	// Nothing before the operator's step is to be undone: a correction
	// back to where the clock was is refused.
	if _, err := a.ApplyAdjust(2 * time.Hour); !errors.Is(err, ErrBeyondMaxStep) {
		t.Fatalf("undoing the operator's step: %v", err)
	}
}

func TestApplierOperatorStepError(t *testing.T) {
	a := &Applier{Clock: failingClock{}, Log: logrus.New()}
	if _, err := a.Step(time.Hour); !errors.Is(err, errClockFails) {
		t.Fatalf("%v", err)
	}
}

var errClockFails = errors.New("clock fails")

type failingClock struct{ Clock }

func (failingClock) Now() time.Time       { return time.Time{} }
func (failingClock) Step(time.Time) error { return errClockFails }

func TestSaturatingArithmetic(t *testing.T) {
	minD := -maxDuration - 1
	cases := []struct{ a, b, sum, abs time.Duration }{
		{1, 2, 3, 3},
		{maxDuration, 1, maxDuration, maxDuration},
		{minD, -1, minD, maxDuration},
		{maxDuration, minD, -1, 1},
	}
	for _, c := range cases {
		if got := addSat(c.a, c.b); got != c.sum {
			t.Errorf("addSat(%d, %d) = %d, want %d", c.a, c.b, got, c.sum)
		}
		if got := absDur(c.sum); got != c.abs {
			t.Errorf("absDur(%d) = %d, want %d", c.sum, got, c.abs)
		}
	}
}

// A SETTIME to the end of time: refused, nothing overflows.
func TestApplierHugeCorrection(t *testing.T) {
	_, c := newVSim(SimConfig{})
	log, _ := quietLog()
	a := &Applier{Clock: c, Log: log}
	a.ApplyAdjust(999 * time.Second)
	for _, d := range []time.Duration{maxDuration, -maxDuration - 1} {
		if r, err := a.ApplyAdjust(d); !errors.Is(err, ErrBeyondMaxStep) || r.Action != Refused || c.Offset() != 999*time.Second {
			t.Fatalf("%v: %+v %v, offset %v", d, r, err, c.Offset())
		}
	}
}

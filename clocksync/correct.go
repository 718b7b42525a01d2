package clocksync

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/timed-project/timed/tsp"
)

// Defaults of the correction path (facts §4).
const (
	// DefaultStepThreshold is BSD's MAXADJ: corrections at or above 20 s are
	// sent as SETTIME and applied by stepping.
	DefaultStepThreshold = 20 * time.Second
	// DefaultMaxStep is the largest correction ever applied, like ntpd's
	// panic threshold; larger ones are refused and logged as errors.
	DefaultMaxStep = 1000 * time.Second
	// BSDRounding is mstotvround's 5 ms granularity of ADJTIME corrections.
	BSDRounding = 5 * time.Millisecond
	// FineRounding is what TSP's timeval carries: 1 µs.
	FineRounding = time.Microsecond
	// SlewStepThreshold is the Applier's step threshold in our settings:
	// adjtime's 500 ppm slews 100 ms in 200 s, within one 240 s round
	// (ntpd, for comparison, steps at 128 ms).
	SlewStepThreshold = 100 * time.Millisecond
)

// ErrBeyondMaxStep: a correction larger than max-step was refused.
var ErrBeyondMaxStep = errors.New("correction beyond max-step refused")

// CorrectOptions are the master's correction parameters.
type CorrectOptions struct {
	StepThreshold time.Duration // default DefaultStepThreshold
	Rounding      time.Duration // ADJTIME granularity; default FineRounding (BSD: BSDRounding)
}

func (o CorrectOptions) withDefaults() CorrectOptions {
	if o.StepThreshold <= 0 {
		o.StepThreshold = DefaultStepThreshold
	}
	if o.Rounding <= 0 {
		o.Rounding = FineRounding
	}
	return o
}

// Correction is what the master sends one slave in a round.
type Correction struct {
	Type   tsp.Type      // tsp.AdjTime or tsp.SetTime
	Adjust time.Duration // ADJTIME: how far the slave must move
	SetTo  time.Time     // SETTIME: the network time, at the master's now
}

// Packet builds the TSP message for the correction as planned. BSD's
// acksend re-sends this same packet, so a SETTIME that needed a retry
// carries a time that is 200 ms or more stale; use PacketAfter for retries.
func (c Correction) Packet(seq uint16, name string) (tsp.Packet, error) {
	return c.PacketAfter(seq, name, 0)
}

// PacketAfter builds the TSP message for the correction sent elapsed after
// it was planned, as measured by a monotonic clock (not the master's
// corrected clock, which the master's own correction may have moved): a
// SETTIME carries SetTo + elapsed, so every copy acksend sends is current.
func (c Correction) PacketAfter(seq uint16, name string, elapsed time.Duration) (tsp.Packet, error) {
	p := tsp.Packet{Type: c.Type, Version: tsp.Version, Seq: seq, Name: name}
	var err error
	if c.Type == tsp.SetTime {
		p.Time, err = tsp.TimeTimeval(c.SetTo.Add(max(elapsed, 0)))
	} else {
		p.Time, err = tsp.DurationTimeval(c.Adjust)
	}
	if err != nil {
		return tsp.Packet{}, fmt.Errorf("%v: %w", c.Type, err)
	}
	return p, nil
}

// PlanCorrection is BSD's correct() for one slave: network is the network
// time as an offset from the master (NetworkTime), slave the slave's
// measured offset from the master. A new slave (needSet) or a correction at
// or above the step threshold gets SETTIME carrying masterNow + network;
// otherwise ADJTIME carrying network − slave, rounded.
func PlanCorrection(network, slave time.Duration, needSet bool, masterNow time.Time, opt CorrectOptions) Correction {
	opt = opt.withDefaults()
	corr := network - slave
	if needSet || absDur(corr) >= opt.StepThreshold {
		return Correction{Type: tsp.SetTime, SetTo: masterNow.Add(network)}
	}
	return Correction{Type: tsp.AdjTime, Adjust: RoundCorrection(corr, opt.Rounding)}
}

// RoundCorrection rounds d to a multiple of unit, halves away from zero
// (BSD's mstotvround with unit = 5 ms; BSD's integer arithmetic also sends
// −2 ms to −5 ms, an asymmetry not reproduced).
func RoundCorrection(d, unit time.Duration) time.Duration {
	if unit <= 1 {
		return d
	}
	return d.Round(unit)
}

// QueueCorrected is a SETTIME or SETDATE time corrected for the time the
// message waited in our receive queue (BSD adj_msg_time).
func QueueCorrected(t time.Time, queued time.Duration) time.Time {
	if queued < 0 {
		queued = 0
	}
	return t.Add(queued)
}

// Action says what an Applier did with a correction.
type Action int

// Actions of an Applier.
const (
	Slewed Action = iota
	Stepped
	Refused
)

func (a Action) String() string {
	switch a {
	case Slewed:
		return "slewed"
	case Stepped:
		return "stepped"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Applied reports one applied (or refused) correction.
type Applied struct {
	Action       Action
	By           time.Duration // the correction
	FrequencyPPM float64       // frequency after the discipline's update
	FreqChanged  bool
}

// Applier applies corrections to a clock, as a slave does on ADJTIME and
// SETTIME and the master does with its own share of the network time
// (BSD adjclock): below the step threshold it slews, at or above it steps,
// beyond MaxStep it refuses, logs an error and changes nothing. With a
// Discipline it also updates the clock's frequency. It is safe for
// concurrent use; it must not be copied after first use.
type Applier struct {
	Clock Clock
	// StepThreshold: corrections at or above it are stepped (default
	// DefaultStepThreshold, BSD's 20 s). It may be set lower than the
	// master's SETTIME threshold: with SlewStepThreshold (100 ms) a
	// correction that slewing at 500 ppm could not finish well within a
	// 240 s round is stepped instead of dragging on for several rounds
	// (and blinding the frequency discipline meanwhile).
	StepThreshold time.Duration
	MaxStep       time.Duration      // default DefaultMaxStep
	Discipline    *Discipline        // nil: phase corrections only (BSD)
	Log           logrus.FieldLogger // nil: logrus standard logger

	mu sync.Mutex // serialises corrections (and the Discipline's state)
}

func (a *Applier) log() logrus.FieldLogger {
	if a.Log == nil {
		return logrus.StandardLogger()
	}
	return a.Log
}

func (a *Applier) limits() (step, maxStep time.Duration) {
	step, maxStep = a.StepThreshold, a.MaxStep
	if step <= 0 {
		step = DefaultStepThreshold
	}
	if maxStep <= 0 {
		maxStep = DefaultMaxStep
	}
	return step, maxStep
}

// ApplyAdjust applies an ADJTIME correction (or the master's own).
func (a *Applier) ApplyAdjust(corr time.Duration) (Applied, error) {
	return a.apply(corr, false)
}

// ApplySetTime applies a SETTIME: the carried time plus the time the message
// waited in the queue, compared with the clock.
func (a *Applier) ApplySetTime(to time.Time, queued time.Duration) (Applied, error) {
	target := QueueCorrected(to, queued)
	return a.apply(target.Sub(a.Clock.Now()), true)
}

func (a *Applier) apply(corr time.Duration, isSet bool) (Applied, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	step, maxStep := a.limits()
	res := Applied{By: corr}
	if absDur(corr) > maxStep {
		res.Action = Refused
		err := fmt.Errorf("correction of %v: %w (max-step %v)", corr, ErrBeyondMaxStep, maxStep)
		a.log().WithField("correction", corr.String()).WithField("max_step", maxStep.String()).Error("refusing correction beyond max-step; clock left alone")
		return res, err
	}
	now := a.Clock.Now()
	if absDur(corr) < step {
		if err := a.Clock.Adjust(corr); err != nil {
			return res, fmt.Errorf("slew by %v: %w", corr, err)
		}
		res.Action = Slewed
		if a.Discipline != nil {
			if isSet {
				// A SETTIME says nothing about our rate since the last
				// correction (it is sent to new slaves); start afresh.
				a.Discipline.Reset(now, corr)
			} else if ppm, ok := a.Discipline.Observe(now, corr); ok {
				if err := a.Clock.SetFrequency(ppm); err != nil {
					return res, fmt.Errorf("set frequency: %w", err)
				}
				res.FrequencyPPM, res.FreqChanged = ppm, true
			}
		}
		return res, nil
	}
	if err := a.Clock.Step(now.Add(corr)); err != nil {
		return res, fmt.Errorf("step by %v: %w", corr, err)
	}
	a.log().WithField("correction", corr.String()).Warn("clock stepped")
	res.Action = Stepped
	if a.Discipline != nil {
		a.Discipline.Reset(now.Add(corr), 0)
	}
	return res, nil
}

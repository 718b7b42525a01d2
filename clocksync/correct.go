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
	// AdjustNewBelow: a slave still to be set (needSet: new to this
	// master, as every slave is after a master change) whose measured
	// correction is below it gets ADJTIME like any other. SETTIME
	// carries the master's time uncorrected for the transit delay, so it
	// moves an already synchronised slave by that delay, and the slave's
	// Applier restarts its frequency estimate on it; the measured ADJTIME
	// is as exact as the round and keeps the estimate. Ours: the slaves'
	// slewing range (the daemon's local step threshold), so that a slave
	// just started, seconds off, is still set (its first measurement,
	// with no round-trip history to judge it by, may be worse than a
	// SETTIME). A BSD slave slews a SETTIME below 20 s as it slews an
	// ADJTIME: BSD's far-off slaves still get SETTIME. 0: BSD's need_set,
	// SETTIME whatever the measurement.
	AdjustNewBelow time.Duration
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
// measured offset from the master. A new slave (needSet, unless nearer
// than opt.AdjustNewBelow) or a correction at or above the step threshold gets
// SETTIME carrying masterNow + network; otherwise ADJTIME carrying
// network − slave, rounded.
func PlanCorrection(network, slave time.Duration, needSet bool, masterNow time.Time, opt CorrectOptions) Correction {
	return PlanJustified(network, slave, 0, needSet, masterNow, opt)
}

// PlanJustified is PlanCorrection for a slave measured with an excess
// error (Judged.Excess): the ADJTIME carries only what the measurement
// justifies (Justify), so a reading a scheduling delay explains moves
// nobody.
func PlanJustified(network, slave, excess time.Duration, needSet bool, masterNow time.Time, opt CorrectOptions) Correction {
	opt = opt.withDefaults()
	corr := Justify(addSat(network, -max(slave, -maxDuration)), excess)
	if needSet && absDur(corr) >= opt.AdjustNewBelow || absDur(corr) >= opt.StepThreshold {
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
	Action Action
	// By is what the clock was moved by (the correction asked for when it
	// was refused).
	By time.Duration
	// Requested is the correction asked for: By, unless an Applier in
	// alarm moved the clock by only max-step of it.
	Requested    time.Duration
	FrequencyPPM float64 // frequency after the discipline's update
	FreqChanged  bool
	Alarm        bool // the Applier is in alarm after this correction
}

// AlarmState is an Applier's alarm: the corrections it is asked for are
// beyond max-step. It goes on at the first such correction and off at the
// first correction within max-step applied, or at an operator's Step.
type AlarmState struct {
	On bool
	// Since is the clock's reading when the alarm went on, on the clock's
	// present time scale (the Applier's own steps since are taken out).
	Since time.Time
	// Offset is how far the clock is from network time by the last
	// correction asked for (positive: ahead), less what the Applier has
	// moved it by since.
	Offset  time.Duration
	Refused int // corrections refused since the alarm went on
}

// Applier applies corrections to a clock, as a slave does on ADJTIME and
// SETTIME and the master does with its own share of the network time
// (BSD adjclock): below the step threshold it slews, at or above it steps.
// Beyond MaxStep it is in alarm (AlarmState) and refuses, logs an error
// and changes nothing, unless the correction is towards network time: then
// it steps by MaxStep, at most once a RecoveryInterval, so that a clock
// pushed far off comes back instead of staying wedged (see the package
// doc). With a Discipline it also updates the clock's frequency. It is safe
// for concurrent use; it must not be copied after first use.
type Applier struct {
	Clock Clock
	// StepThreshold: corrections at or above it are stepped (default
	// DefaultStepThreshold, BSD's 20 s). It may be set lower than the
	// master's SETTIME threshold: with SlewStepThreshold (100 ms) a
	// correction that slewing at 500 ppm could not finish well within a
	// 240 s round is stepped instead of dragging on for several rounds
	// (and blinding the frequency discipline meanwhile).
	StepThreshold time.Duration
	MaxStep       time.Duration // default DefaultMaxStep
	// RecoveryInterval is the least time between two max-step moves
	// towards network time in alarm (default DefaultRecoveryInterval):
	// about a sync round, so that a re-sent correction is not applied
	// twice and a forger gains no more than max-step a round.
	RecoveryInterval time.Duration
	Discipline       *Discipline        // nil: phase corrections only (BSD)
	Log              logrus.FieldLogger // nil: logrus standard logger
	// MakeStep steps corrections while the clock is not yet
	// synchronised, chrony's makestep: the first MakeStep.Count
	// corrections after start, or after an alarm ended, are stepped
	// when at or above MakeStep.Threshold, even below StepThreshold.
	// Slewing them would keep the clock off by up to the step threshold
	// for most of a round (500 ppm slews 100 ms in 200 s), with nothing
	// to gain: nobody relies on a clock that has not been synchronised
	// yet. Max-step still holds. The zero value: off (BSD).
	MakeStep MakeStep

	mu    sync.Mutex // serialises corrections (and the Discipline's state)
	alarm AlarmState
	steps stepHistory // the recent steps, for "towards network time"
	// lastRecovery is when the clock was last moved in alarm, on the
	// clock's present time scale; zero if never since the alarm went on.
	lastRecovery time.Time
	// asked: a correction beyond max-step backwards ([0]) or forwards
	// ([1]) was asked for since the alarm went on.
	asked [2]bool
	// applied counts the corrections applied since start or the end of
	// the last alarm, up to MakeStep.Count.
	applied int
}

// MakeStep is the Applier's stepping while unsynchronised.
type MakeStep struct {
	Threshold time.Duration // step at or above this (0: any correction)
	Count     int           // the first Count corrections; 0: off
}

// DefaultMakeStep is ours: the first 3 corrections of 1 ms or more are
// stepped, which covers the SETTIME (or first ADJTIME) a new slave gets
// and the first two rounds, while the frequency is being learnt.
var DefaultMakeStep = MakeStep{Threshold: time.Millisecond, Count: 3}

// DefaultRecoveryInterval is three quarters of BSD's 240 s sync round.
const DefaultRecoveryInterval = 3 * time.Minute

// stepHistory holds the Applier's last steps, the most recent last.
type stepHistory struct {
	d    [16]time.Duration
	n    int // steps held
	next int // index of the next to write
}

func (h *stepHistory) push(d time.Duration) {
	h.d[h.next] = d
	h.next = (h.next + 1) % len(h.d)
	h.n = min(h.n+1, len(h.d))
}

// undoes reports whether corr takes the clock back to within tol of where
// it was before its k most recent steps, for some k.
func (h *stepHistory) undoes(corr, tol time.Duration) bool {
	var sum time.Duration
	for k := 1; k <= h.n; k++ {
		sum = addSat(sum, h.d[(h.next-k+len(h.d))%len(h.d)])
		if absDur(addSat(corr, sum)) <= tol {
			return true
		}
	}
	return false
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

// Alarm reports the Applier's alarm, for status and metrics.
func (a *Applier) Alarm() AlarmState {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.alarm
}

// Frequency is the Discipline's frequency setting in ppm and how many
// rate estimates it has taken in, for status and the drift file; ok is
// false without a Discipline.
func (a *Applier) Frequency() (ppm float64, estimates int, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.Discipline == nil {
		return 0, 0, false
	}
	return a.Discipline.Frequency(), a.Discipline.Estimates(), true
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

// Step is the operator's step (timedc step): it moves the clock by d
// whatever max-step says, since a person decided it, and ends the alarm.
func (a *Applier) Step(d time.Duration) (Applied, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	res := Applied{By: d, Requested: d}
	now := a.Clock.Now()
	if err := a.Clock.Step(now.Add(d)); err != nil {
		return res, fmt.Errorf("operator's step by %v: %w", d, err)
	}
	res.Action = Stepped
	was := a.alarm.On
	// The operator's time is the new reference: nothing before it is to
	// be undone, no alarm stands.
	a.steps = stepHistory{}
	a.endAlarm()
	if a.Discipline != nil {
		a.Discipline.Reset(now.Add(d), 0)
	}
	a.log().WithFields(logrus.Fields{"step": d.String(), "alarm_was": was}).Warn("clock stepped by the operator")
	return res, nil
}

func (a *Applier) apply(corr time.Duration, isSet bool) (Applied, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, maxStep := a.limits()
	now := a.Clock.Now()
	corr = max(corr, -maxDuration) // so that −corr is a Duration too
	if absDur(corr) > maxStep {
		return a.beyondMaxStep(now, corr, isSet)
	}
	res, err := a.move(now, corr, isSet)
	if err != nil {
		return res, err
	}
	a.applied = min(a.applied+1, a.MakeStep.Count)
	switch step, _ := a.limits(); {
	case res.Action != Stepped:
	case absDur(corr) < step:
		// MakeStep, at most its Count times after start or an alarm.
		a.log().WithField("correction", corr.String()).Info("clock stepped while not yet synchronised (makestep)")
	default:
		a.log().WithField("correction", corr.String()).Warn("clock stepped")
	}
	if a.alarm.On {
		a.log().WithFields(logrus.Fields{"correction": corr.String(), "refused": a.alarm.Refused}).Warn("clock out of alarm: correction within max-step")
		a.endAlarm()
	}
	return res, nil
}

func (a *Applier) endAlarm() {
	a.alarm, a.lastRecovery, a.asked = AlarmState{}, time.Time{}, [2]bool{}
	a.applied = 0 // unsynchronised again: the next corrections may step
}

// beyondMaxStep handles a correction beyond max-step: the alarm goes on,
// and the clock moves by max-step towards network time or not at all.
//
// The Applier has only the correction and its own past to judge it by.
// A correction is towards network time if
//
//   - it undoes the Applier's recent steps: it takes the clock back to
//     within BSD's 20 s (or the step threshold, if larger) of where it was
//     before its last k steps, for some k. That is the master's answer to
//     a clock pushed off by forged corrections (each within max-step), and
//     it is accepted at once; or
//   - a correction the same way was asked for before, since the alarm went
//     on: the master repeats its correction every round, a single forged
//     packet does not. (Forged corrections the other way do not hide the
//     master's: both ways are remembered.)
//
// Anything else, in particular a first correction beyond max-step that
// undoes nothing, is refused. Moves in alarm are max-step each, at most
// one per RecoveryInterval, so a forger who passes for the master gains
// at most max-step a round by them, no more than a single correction
// within max-step already gives it (address binding and authentication
// are what stop forgers; this bounds the damage).
func (a *Applier) beyondMaxStep(now time.Time, corr time.Duration, isSet bool) (Applied, error) {
	step, maxStep := a.limits()
	res := Applied{Action: Refused, By: corr, Requested: corr, Alarm: true}
	if !a.alarm.On {
		a.alarm = AlarmState{On: true, Since: now}
	}
	a.alarm.Offset = -corr
	log := a.log().WithFields(logrus.Fields{"correction": corr.String(), "max_step": maxStep.String()})
	undo := a.steps.undoes(corr, max(step, DefaultStepThreshold))
	way := 0
	if corr > 0 {
		way = 1
	}
	confirmed := a.asked[way]
	a.asked[way] = true
	if !undo && !confirmed {
		a.alarm.Refused++
		log.Error("refusing correction beyond max-step; clock left alone (alarm)")
		return res, fmt.Errorf("correction of %v: %w (max-step %v)", corr, ErrBeyondMaxStep, maxStep)
	}
	interval := a.RecoveryInterval
	if interval <= 0 {
		interval = DefaultRecoveryInterval
	}
	if !a.lastRecovery.IsZero() && now.Sub(a.lastRecovery) < interval {
		a.alarm.Refused++
		log.WithField("wait", (interval - now.Sub(a.lastRecovery)).String()).Warn("correction towards network time beyond max-step: waiting to move again")
		return res, fmt.Errorf("correction of %v towards network time, %v after the last move: %w (max-step %v once per %v)",
			corr, now.Sub(a.lastRecovery), ErrBeyondMaxStep, maxStep, interval)
	}
	by := maxStep
	if corr < 0 {
		by = -maxStep
	}
	moved, err := a.move(now, by, isSet)
	moved.Requested, moved.Alarm = corr, true
	if err != nil {
		return moved, err
	}
	a.lastRecovery = now
	if moved.Action == Stepped {
		a.lastRecovery = now.Add(by)
	}
	a.alarm.Offset = -(corr - by)
	log.WithFields(logrus.Fields{"by": by.String(), "undoes_steps": undo}).Debug("clock in alarm: moved by max-step towards network time") // the daemon logs the move at Warn, once
	return moved, nil
}

// move slews or steps the clock by corr and updates the discipline.
func (a *Applier) move(now time.Time, corr time.Duration, isSet bool) (Applied, error) {
	step, _ := a.limits()
	res := Applied{By: corr, Requested: corr}
	makeStep := a.applied < a.MakeStep.Count && absDur(corr) >= a.MakeStep.Threshold && corr != 0
	if absDur(corr) < step && !makeStep {
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
	res.Action = Stepped
	a.steps.push(corr)
	// Times kept on the clock's scale move with it.
	if a.alarm.On {
		a.alarm.Since = a.alarm.Since.Add(corr)
	}
	if !a.lastRecovery.IsZero() {
		a.lastRecovery = a.lastRecovery.Add(corr)
	}
	if a.Discipline != nil {
		if makeStep && !isSet && absDur(corr) < step {
			// Stepped only because the clock is not yet synchronised:
			// an ADJTIME says what the clock drifted by, stepped or
			// slewed, and the frequency is what most needs learning now.
			if ppm, ok := a.Discipline.Observe(now, corr); ok {
				if err := a.Clock.SetFrequency(ppm); err != nil {
					return res, fmt.Errorf("set frequency: %w", err)
				}
				res.FrequencyPPM, res.FreqChanged = ppm, true
			}
		}
		a.Discipline.Reset(now.Add(corr), 0)
	}
	return res, nil
}

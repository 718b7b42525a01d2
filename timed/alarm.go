package timed

import (
	"fmt"
	"time"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/timed/control"
)

// The max-step alarm (clocksync.Applier) as the daemon shows it, and the
// operator's way out of it: `timedc step`.

// alarmStatus is the Applier's alarm a for the status; nil when it is off.
func (d *Daemon) alarmStatus(a clocksync.AlarmState) *control.Alarm {
	if !a.On {
		return nil
	}
	maxStep := d.applier.MaxStep
	if maxStep <= 0 {
		maxStep = clocksync.DefaultMaxStep
	}
	return &control.Alarm{Since: a.Since, OffsetSecs: a.Offset.Seconds(), Refused: a.Refused, MaxStepSecs: maxStep.Seconds()}
}

// alarmNotify keeps systemd's status line, where a sysadmin looks first,
// in step with the alarm: when it goes on or off, and while it is on at
// each correction, which changes its offset (a few a round at most).
func (d *Daemon) alarmNotify() {
	if on := d.applier.Alarm().On; on || on != d.st.alarm {
		d.st.alarm = on
		notifyStatus(d)
	}
}

// operatorStep answers CmdStep on the loop: it steps the clock by the
// duration asked, or by the alarm's offset, ignoring max-step (the
// Applier logs it at Warn).
func (d *Daemon) operatorStep(req control.Request) control.Response {
	fail := func(format string, a ...any) control.Response {
		return control.Response{Error: fmt.Sprintf(format, a...)}
	}
	state := d.applier.Alarm()
	alarm := d.alarmStatus(state)
	var by time.Duration
	switch {
	case req.ToNetwork && req.Step != "":
		return fail("step: give a duration or to-network, not both")
	case req.ToNetwork:
		if alarm == nil {
			return fail("step to network time: no alarm, so the clock is within max-step of network time and the daemon corrects it; give a duration to step anyway")
		}
		by = -state.Offset
	default:
		var err error
		if by, err = time.ParseDuration(req.Step); err != nil {
			return fail("step %q: want a Go duration such as -4995s: %v", req.Step, err)
		}
	}
	if err := control.CheckStep(by); err != nil {
		return fail("%v", err)
	}
	if d.ref != nil {
		return fail("%v", errReference)
	}
	res := &control.StepResult{AlarmWas: alarm}
	sim, _ := d.clock.(*clocksync.SimClock)
	if sim != nil {
		before := sim.Offset().Seconds()
		res.OffsetBeforeSecs = &before
	}
	a, err := d.applier.Step(by)
	if err != nil {
		d.log.WithError(err).Error("operator's step failed")
		return fail("%v", err)
	}
	d.st.corrected(a, operatorFrom)
	d.metrics.corrected(a)
	d.alarmNotify()
	d.ks.dirty = true
	res.Correction = *d.st.lastCorrection
	if sim != nil {
		after := sim.Offset().Seconds()
		res.OffsetAfterSecs = &after
	}
	return control.Response{OK: true, Step: res}
}

package timed

import (
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/clocksync"
)

// Corrections to the host clock. There is one clock, whichever network's
// master (or the master's own round, or date(1)) asks: these are the
// Daemon's, not a network runtime's.

// applyAdjust slews (or steps, past the threshold) the local clock by a
// correction from the master, or by the master's own share.
func (d *Daemon) applyAdjust(delta time.Duration, from string) (clocksync.Applied, error) {
	if d.ref != nil {
		return d.refuseCorrection(delta, from)
	}
	a, err := d.applier.ApplyAdjust(delta)
	d.applied(a, err, from)
	return a, err
}

// applySetTime sets the clock to a SETTIME's time, corrected for the time
// the packet waited since it arrived.
func (d *Daemon) applySetTime(to time.Time, queued time.Duration, from string) (clocksync.Applied, error) {
	if d.ref != nil {
		return d.refuseCorrection(to.Sub(d.clock.Now())+queued, from)
	}
	a, err := d.applier.ApplySetTime(to, queued)
	d.applied(a, err, from)
	return a, err
}

func (d *Daemon) applied(a clocksync.Applied, err error, from string) {
	defer d.alarmNotify()
	d.ks.dirty = true
	fields := logrus.Fields{"by": a.By, "action": a.Action.String(), "from": from}
	if a.FreqChanged {
		fields["frequency_ppm"] = a.FrequencyPPM
	}
	switch {
	case a.Action == clocksync.Refused:
		d.metrics.refused()
		return // the applier has logged the refusal (max-step) as an error
	case err != nil:
		d.log.WithFields(fields).WithError(err).Error("correction failed")
		return
	}
	d.st.corrected(a, from)
	d.metrics.corrected(a)
	if a.Alarm {
		// In alarm the clock moved by max-step only, at most once a round:
		// rare, and what a sysadmin must see.
		fields["requested"] = a.Requested
		fields["clock_offset"] = d.applier.Alarm().Offset
		d.log.WithFields(fields).Warn("alarm: moving towards network time by max-step")
		return
	}
	// A step is rare and worth a line; a slew happens every round on
	// every slave, so it logs at debug (status and metrics carry it).
	if a.Action == clocksync.Stepped {
		d.log.WithFields(fields).Info("clock corrected")
		return
	}
	d.log.WithFields(fields).Debug("clock corrected")
}

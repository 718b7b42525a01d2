package timed

import (
	"errors"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/timed/control"
)

// A reference host (--reference kernel, README "UTC on the LAN"): another
// program (chrony, ntpd, a PTP or GPS stack) keeps this host's clock, and
// timed never changes it: no slew, step or frequency call, no date
// change, no operator's step, no drift file, and the kernel's sync state
// is left to that program. The daemon may be master; as master, while the
// kernel says the clock is synchronised, it claims to be a reference: its
// rounds dictate (its clock is the network time, no averaging, and only
// the slaves are corrected towards it) and its election outranks hosts
// that are not references (election.Reference). When the kernel's state
// goes bad for reference-hold it stops claiming: the Host gives up its
// networks and the others go back to ordinary TEMPO, or follow another
// reference; when it has been good for reference-hold again it claims
// again. A correction it gets as a slave is acknowledged by the election
// and ignored here.

// errReference is what a correction of a reference host's clock gets.
var errReference = errors.New("this host is a reference (--reference kernel): its clock is kept by another program, timed never changes it")

// refHealth judges the kernel's state with hysteresis: the first
// observation decides at once (a daemon started beside a synchronised
// chrony claims at once); after that, the claim changes only once every
// observation for hold has said otherwise, so that a brief loss (one bad
// reading, chrony's server missing a poll) changes nothing. Pure: times
// are given.
type refHealth struct {
	maxErr, hold time.Duration

	started  bool
	claiming bool
	since    time.Time // first of the observations against the claim; zero: none

	// last observation, for the status
	at       time.Time
	good     bool
	synced   bool
	maxError time.Duration
	err      error
}

// healthy is one observation's verdict: STA_UNSYNC clear and maxerror
// at most the bound.
func (h *refHealth) healthy(st clocksync.ClockState, err error) bool {
	return err == nil && st.Synchronized && st.MaxError <= h.maxErr
}

// observe takes one reading of the kernel's state at now and reports
// whether the claim changed.
func (h *refHealth) observe(now time.Time, st clocksync.ClockState, err error) bool {
	good := h.healthy(st, err)
	h.at, h.good, h.synced, h.maxError, h.err = now, good, err == nil && st.Synchronized, st.MaxError, err
	switch {
	case !h.started:
		h.started, h.claiming = true, good
		return good
	case good == h.claiming:
		h.since = time.Time{}
		return false
	case h.since.IsZero():
		h.since = now
	}
	if now.Sub(h.since) < h.hold {
		return false
	}
	h.claiming, h.since = good, time.Time{}
	return true
}

// refCheckEvery is how often the kernel's state is read: as often as
// the daemon would tell it (kernelsync.go), half a sync interval within
// [100ms, 30s].
func refCheckEvery(interval time.Duration) time.Duration { return kernelSyncEvery(interval) }

// reference is the daemon's side of it; only the loop touches it.
type reference struct {
	health  refHealth
	ignored int // corrections ignored, for the status
}

// claiming: the host claims to be a reference now.
func (d *Daemon) refClaiming() bool { return d.ref != nil && d.ref.health.claiming }

// checkReference reads the kernel's state and, when the claim changes,
// logs it and tells the election.
func (d *Daemon) checkReference() {
	if d.ref == nil {
		return
	}
	st, err := d.clock.State()
	h := &d.ref.health
	if !h.observe(time.Now(), st, err) {
		if h.claiming {
			d.tellClaim() // the maxerror it announces
		}
		return
	}
	fields := logrus.Fields{"synchronised": h.synced, "maxerror": h.maxError, "bound": h.maxErr}
	if err != nil {
		fields["error"] = err.Error()
	}
	if h.claiming {
		d.log.WithFields(fields).Info("reference: the kernel says the clock is synchronised; serving it as the network time")
	} else {
		d.log.WithFields(fields).Warn("reference: the kernel no longer says the clock is synchronised within the bound; stepping down")
	}
	d.tellClaim()
}

// checkReferenceEvery reads the kernel's state every interval until the
// daemon stops.
func (d *Daemon) checkReferenceEvery(interval time.Duration) {
	if d.ref == nil {
		return
	}
	d.after(interval, func() {
		d.checkReference()
		d.checkReferenceEvery(interval)
	})
}

// refuseCorrection is what a correction of a reference host's clock
// comes to: nothing, logged at debug (a slave of a reference gets one a
// round).
func (d *Daemon) refuseCorrection(delta time.Duration, from string) (clocksync.Applied, error) {
	d.ref.ignored++
	d.log.WithFields(logrus.Fields{"by": delta, "from": from}).Debug("reference: correction ignored")
	return clocksync.Applied{Action: clocksync.Refused, By: delta, Requested: delta}, errReference
}

// tellClaim tells the election the claim and the kernel's maxerror.
func (d *Daemon) tellClaim() {
	h := &d.ref.health
	d.carryOut(d.host.SetReference(d.now(), election.SetReference{Claim: h.claiming, MaxError: h.maxError}), time.Time{})
}

// view is the status's Reference; nil when off.
func (r *reference) view() *control.Reference {
	if r == nil {
		return nil
	}
	h := &r.health
	v := &control.Reference{Claiming: h.claiming, KernelSynchronised: h.synced, KernelMaxErrorSecs: h.maxError.Seconds(),
		MaxErrorBoundSecs: h.maxErr.Seconds(), CheckedAt: h.at, CorrectionsIgnored: r.ignored}
	if h.err != nil {
		v.Error = h.err.Error()
	}
	return v
}

// utcVia is the reference this host's time comes from and its maxerror:
// itself while it claims, else the master it follows on its slavenet
// while that master's claim stands (the Host keeps the claims heard),
// its maxerror grown since it was heard; "" for none.
func (d *Daemon) utcVia() (string, time.Duration) {
	if claiming, maxErr := d.host.Claim(); claiming {
		return d.hostname, maxErr
	}
	i, ok := d.host.SlaveNet()
	if !ok {
		return "", 0
	}
	m, ok := d.host.Master(i)
	if !ok {
		return "", 0
	}
	if r, ok := d.host.ReferenceOf(i, m.Addr); ok && r.Name == m.Name {
		return m.Name, grownMaxError(r, time.Now())
	}
	return "", 0
}

// grownMaxError is a claim's maxerror at now: as announced, grown as the
// reference's kernel grows it since (at most until the program keeping
// its clock updates it, which the next announcement tells).
func grownMaxError(r election.HeardReference, now time.Time) time.Duration {
	age := max(now.Sub(r.At), 0)
	return r.MaxError + time.Duration(float64(age)*clocksync.KernelMaxErrorGrowthPPM*1e-6)
}

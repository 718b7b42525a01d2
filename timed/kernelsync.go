package timed

import (
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/timed/control"
)

// The kernel's sync state, as ntpd and chrony keep it (README, "The
// kernel's sync state"): while the status says synchronised (sync.go's
// judge), STA_UNSYNC is clear and maxerror/esterror carry the estimate's
// error; when it says anything else (unsynchronised, alarm), and when the
// daemon stops, STA_UNSYNC is set again. Only the system clock has such a
// state (clocksync.KernelSyncer): simulated and dry-run clocks never get
// here.
//
// The state is told again after every event that can change the
// judgement or the estimate (a correction, a round, a state change, the
// alarm) and every kernelSyncEvery besides, which is also how a judgement
// that lapses with time (no correction for 2 sync intervals) reaches the
// kernel. Synchronised, every telling writes (maxerror starts again from
// the estimate's bound, which the kernel then grows by 500 µs a second);
// unsynchronised, only a change is written.

// kernelSync is the daemon's side of it; only the loop touches it.
type kernelSync struct {
	k     clocksync.KernelSyncer // nil: the kernel is left alone
	dirty bool                   // something happened that may change what to tell
	// last is what was last written; nil before the first write. err is
	// the last write's failure, failing whether the last write failed (so
	// that a failure is logged once, and its end).
	last    *control.KernelSync
	err     error
	failing bool
}

// kernelSyncerOf is clock's kernel state where on (kernel-sync-status)
// asks for it: the system clock's alone.
func kernelSyncerOf(clock clocksync.Clock, on bool) clocksync.KernelSyncer {
	if k, ok := clock.(clocksync.KernelSyncer); ok && on {
		return k
	}
	return nil
}

// kernelSyncEvery is how often the state is told when nothing happens:
// half a sync interval, within [100ms, 30s].
func kernelSyncEvery(interval time.Duration) time.Duration {
	return min(max(interval/2, 100*time.Millisecond), 30*time.Second)
}

// kernelSyncOf is what to tell the kernel at now: synchronised as the
// status judges it, with maxerror the estimated offset plus its error
// bound and esterror the bound. Where this host does not know the bound
// (a slave: its master measured it) the kernel is given the least error
// a measurement is credited with, clocksync.DefaultMinErrorBound, grown
// since the correction as a bound grows (sync.go).
func (f *syncFacts) kernelSyncOf(now time.Time, alarm clocksync.AlarmState) clocksync.KernelSync {
	v := f.view(now, alarm)
	if v.State != control.Synchronised {
		return clocksync.KernelSync{}
	}
	off, bound := f.offsetBound(now, v)
	return clocksync.KernelSync{Synchronised: true, MaxError: off + bound, EstError: bound}
}

// tell writes next to the kernel if it is to be written (see above).
func (s *kernelSync) tell(next clocksync.KernelSync, now time.Time, log logrus.FieldLogger) {
	s.dirty = false
	if s.k == nil || !next.Synchronised && s.last != nil && !s.last.Synchronised && !s.failing {
		return
	}
	err := s.k.SetKernelSync(next)
	s.err = err
	switch {
	case err != nil && !s.failing:
		// Rare (a sandbox refusing adjtimex): once, and its end.
		log.WithError(err).Warn("cannot tell the kernel whether the clock is synchronised; retrying at each change")
	case err == nil && s.failing:
		log.Info("the kernel is told the clock's sync state again")
	}
	s.failing = err != nil
	if err != nil {
		return
	}
	if s.last == nil || s.last.Synchronised != next.Synchronised {
		fields := logrus.Fields{"synchronised": next.Synchronised}
		if next.Synchronised {
			fields["maxerror"] = next.MaxError
		}
		log.WithFields(fields).Info("kernel sync state")
	}
	if !next.Synchronised {
		next.MaxError, next.EstError = clocksync.MaxKernelError, clocksync.MaxKernelError // as the clock writes them
	}
	s.last = &control.KernelSync{Synchronised: next.Synchronised, MaxErrorSecs: next.MaxError.Seconds(), EstErrorSecs: next.EstError.Seconds(), At: now}
}

// view is the status's KernelSync at now; nil where the kernel is left
// alone.
func (s *kernelSync) view(now time.Time) *control.KernelSync {
	if s.k == nil {
		return nil
	}
	v := &control.KernelSync{}
	if s.last != nil {
		*v = *s.last
		v.AgeSecs = now.Sub(s.last.At).Seconds()
	}
	if s.err != nil {
		v.Error = s.err.Error()
	}
	return v
}

// tellKernel tells the kernel what the status judges now, if an event
// may have changed it; the loop calls it after every event.
func (d *Daemon) tellKernel() {
	if !d.ks.dirty || d.ks.k == nil {
		return
	}
	now := time.Now()
	d.ks.tell(d.syncFacts().kernelSyncOf(now, d.applier.Alarm()), now, d.log)
}

// tellKernelEvery has the state told every interval until the daemon
// stops.
func (d *Daemon) tellKernelEvery(interval time.Duration) {
	if d.ks.k == nil {
		return
	}
	d.after(interval, func() {
		d.ks.dirty = true
		d.tellKernelEvery(interval)
	})
}

// kernelUnsynced is the clean stop's: the kernel is told the clock is
// no longer kept, unless that is what it was last told.
func (d *Daemon) kernelUnsynced() {
	if d.ks.k != nil && (d.ks.last == nil || d.ks.last.Synchronised || d.ks.failing) {
		d.ks.tell(clocksync.KernelSync{}, time.Now(), d.log)
	}
}

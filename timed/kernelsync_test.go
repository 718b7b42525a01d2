//go:build linux

package timed

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus/hooks/test"
	"golang.org/x/sys/unix"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/timed/control"
)

// fakeAdjtimex is the kernel's adjtimex status for a SystemClock: reads
// return it, writes of ADJ_STATUS set it, and the writes of the sync
// state are recorded. Nothing reaches the host kernel. Safe for the
// daemon's goroutines.
type fakeAdjtimex struct {
	mu     sync.Mutex
	status int32
	writes []unix.Timex // those with ADJ_STATUS
}

func (k *fakeAdjtimex) adjtimex(tx *unix.Timex) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if tx.Modes == 0 {
		tx.Status = k.status
		return unix.TIME_OK, nil
	}
	if tx.Modes&unix.ADJ_STATUS != 0 {
		k.status = tx.Status
		k.writes = append(k.writes, *tx)
	}
	return unix.TIME_OK, nil
}

func (k *fakeAdjtimex) written() []unix.Timex {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]unix.Timex(nil), k.writes...)
}

const syncModes = unix.ADJ_STATUS | unix.ADJ_MAXERROR | unix.ADJ_ESTERROR

// wantWrite checks one write: the modes, the status (STA_INS, another
// program's leap second, kept), maxerror and esterror in µs.
func wantWrite(t *testing.T, what string, w unix.Timex, unsync bool, maxerr, esterr int64) {
	t.Helper()
	status := int32(unix.STA_INS)
	if unsync {
		status |= unix.STA_UNSYNC
	}
	if w.Modes != syncModes || w.Status != status || int64(w.Maxerror) != maxerr || int64(w.Esterror) != esterr {
		t.Errorf("%s: wrote modes %#x status %#x maxerror %d µs esterror %d µs, want %#x %#x %d %d",
			what, w.Modes, w.Status, w.Maxerror, w.Esterror, syncModes, status, maxerr, esterr)
	}
}

// TestKernelSyncTransitions: what the kernel is told as the judgement
// goes: synchronised (maxerror the offset plus its bound, esterror the
// bound), refreshed (written again, the bound grown), alarm and lost
// (STA_UNSYNC, 16 s, once each), synchronised again, and the stop.
func TestKernelSyncTransitions(t *testing.T) {
	k := &fakeAdjtimex{status: unix.STA_UNSYNC | unix.STA_INS}
	log, _ := test.NewNullLogger()
	d := &Daemon{log: log, ks: kernelSync{k: clocksync.NewSystemClockFunc(k.adjtimex)}}
	now := t0.Add(time.Hour)
	// A master of 2 slaves, whose round 500 ms ago put its clock 20 µs
	// from network time within 100 µs; the bound grows by 20 ppm (the
	// round's rate, above 15 ppm): 110 µs now.
	round := func(at time.Time) *syncFacts {
		return &syncFacts{interval: time.Second, maxStep: 1000 * time.Second,
			nets:  []netFacts{{name: "lan", state: election.Master, master: "here", slaves: 2, round: roundInfo{at: at, slaves: 2, measured: 2}}},
			basis: &basis{kind: "round", from: "here", at: at, before: 20 * time.Microsecond, bound: 100 * time.Microsecond}}
	}
	f := round(now.Add(-500 * time.Millisecond))
	alarm := clocksync.AlarmState{On: true, Offset: 1500 * time.Second}
	steps := []struct {
		what   string
		now    time.Time
		f      *syncFacts
		alarm  clocksync.AlarmState
		writes bool
		unsync bool
		maxerr int64
		esterr int64
	}{
		{"synchronised", now, f, clocksync.AlarmState{}, true, false, 130, 110},
		{"refreshed", now.Add(time.Second), f, clocksync.AlarmState{}, true, false, 150, 130},
		{"alarm", now.Add(time.Second), f, alarm, true, true, 16_000_000, 16_000_000},
		{"alarm still", now.Add(1500 * time.Millisecond), f, alarm, false, false, 0, 0},
		{"out of alarm", now.Add(1500 * time.Millisecond), f, clocksync.AlarmState{}, true, false, 160, 140},
		{"lost: the round 2.5 s old", now.Add(2 * time.Second), f, clocksync.AlarmState{}, true, true, 16_000_000, 16_000_000},
		{"still lost", now.Add(3 * time.Second), f, clocksync.AlarmState{}, false, false, 0, 0},
		{"a new round", now.Add(3 * time.Second), round(now.Add(3 * time.Second)), clocksync.AlarmState{}, true, false, 120, 100},
	}
	for _, s := range steps {
		n := len(k.written())
		d.ks.tell(s.f.kernelSyncOf(s.now, s.alarm), s.now, log)
		w := k.written()
		switch {
		case !s.writes && len(w) != n:
			t.Errorf("%s: wrote %+v, want nothing", s.what, w[n:])
		case s.writes && len(w) != n+1:
			t.Errorf("%s: %d writes, want 1", s.what, len(w)-n)
		case s.writes:
			wantWrite(t, s.what, w[n], s.unsync, s.maxerr, s.esterr)
		}
	}
	if v := d.ks.view(now.Add(4 * time.Second)); v == nil || !v.Synchronised || v.MaxErrorSecs != 120e-6 || v.AgeSecs != 1 || v.Error != "" {
		t.Errorf("status's view %+v", v)
	}
	n := len(k.written())
	d.kernelUnsynced()
	if w := k.written(); len(w) != n+1 {
		t.Fatalf("stop: %d writes", len(w)-n)
	} else {
		wantWrite(t, "stop", w[n], true, 16_000_000, 16_000_000)
	}
	d.kernelUnsynced() // told already
	if w := k.written(); len(w) != n+1 {
		t.Errorf("a second stop wrote again")
	}
}

// TestKernelSyncSlave: a slave, whose error bound its master alone
// knows, gives the kernel the least error a measurement is credited with
// (100 µs), grown since the correction.
func TestKernelSyncSlave(t *testing.T) {
	now := t0.Add(time.Hour)
	f := &syncFacts{interval: time.Second, nets: []netFacts{{name: "lan", state: election.Slave, master: "m"}},
		applied: now.Add(-time.Second), from: "m",
		basis: &basis{kind: "correction", from: "m", at: now.Add(-time.Second), before: -40 * time.Microsecond, moved: 40 * time.Microsecond, slewed: true, bound: -1}}
	got := f.kernelSyncOf(now, clocksync.AlarmState{})
	// Slewed away (40 µs takes 80 ms): offset 0; 100 µs + 40 ppm × 1 s.
	if want := (clocksync.KernelSync{Synchronised: true, MaxError: 140 * time.Microsecond, EstError: 140 * time.Microsecond}); got != want {
		t.Errorf("slave: %+v, want %+v", got, want)
	}
	f.dryRun = true // never synchronised
	if got := f.kernelSyncOf(now, clocksync.AlarmState{}); got.Synchronised {
		t.Errorf("dry-run: %+v", got)
	}
}

// TestKernelSyncDaemon: a daemon on the system clock (its adjtimex a
// fake) tells the kernel unsynchronised at start, synchronised once it is
// master alone, and unsynchronised when it stops; its status shows what
// it wrote. With kernel-sync-status false, and on simulated and dry-run
// clocks, the kernel is never told anything.
func TestKernelSyncDaemon(t *testing.T) {
	k := &fakeAdjtimex{status: unix.STA_UNSYNC | unix.STA_INS}
	log, _ := test.NewNullLogger()
	d, err := New(testConfig(t, "-M"), log, Options{Clock: clocksync.NewSystemClockFunc(k.adjtimex)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var st *control.Status
	deadline := time.Now().Add(20 * time.Second)
	for {
		st = d.handleControl(ctx, control.Request{Cmd: control.CmdStatus}).Status
		if st != nil && st.KernelSync != nil && st.KernelSync.Synchronised {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kernel not told synchronised: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st.Sync.State != control.Synchronised || st.Sync.Basis != "alone" || st.KernelSync.MaxErrorSecs != 0 {
		t.Errorf("sync %+v, kernel %+v", st.Sync, st.KernelSync)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	w := k.written()
	if len(w) < 3 {
		t.Fatalf("%d writes: %+v", len(w), w)
	}
	wantWrite(t, "start", w[0], true, 16_000_000, 16_000_000)
	wantWrite(t, "master alone", w[1], false, 0, 0)
	wantWrite(t, "stop", w[len(w)-1], true, 16_000_000, 16_000_000)
	for i, x := range w[1 : len(w)-1] {
		if x.Status&unix.STA_UNSYNC != 0 {
			t.Errorf("write %d unsynchronised while master alone: %+v", i+1, x)
		}
	}

	// Off, or another clock: nothing to tell.
	off := &fakeAdjtimex{}
	for _, c := range []struct {
		args  []string
		clock clocksync.Clock
	}{
		{[]string{"-M", "--kernel-sync-status=false"}, clocksync.NewSystemClockFunc(off.adjtimex)},
		{[]string{"-M", "--clock", "sim:offset=1s"}, nil},
		{[]string{"-M", "--clock", "dry-run"}, nil},
	} {
		d, err := New(testConfig(t, c.args...), log, Options{Clock: c.clock})
		if err != nil {
			t.Fatal(err)
		}
		if d.ks.k != nil {
			t.Errorf("%v: the kernel's state is %T's", c.args, d.ks.k)
		}
		d.ks.dirty = true
		d.tellKernel()
		d.kernelUnsynced()
		if st := d.snapshot(); st.KernelSync != nil {
			t.Errorf("%v: status shows %+v", c.args, st.KernelSync)
		}
		d.closeResources()
	}
	if len(off.written()) != 0 {
		t.Errorf("kernel-sync-status false: wrote %+v", off.written())
	}
}

//go:build linux

package clocksync

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeSystem returns a SystemClock whose adjtimex records calls instead of
// making them: nothing in these tests reaches the kernel's write paths.
func fakeSystem(ret error) (*SystemClock, *[]unix.Timex) {
	var calls []unix.Timex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &SystemClock{
		adjtimex: func(tx *unix.Timex) (int, error) {
			calls = append(calls, *tx)
			return unix.TIME_OK, ret
		},
		now: func() time.Time { return now },
	}, &calls
}

func TestSystemClockRequests(t *testing.T) {
	c, calls := fakeSystem(nil)
	if err := c.Adjust(-1500 * time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if err := c.Step(c.Now().Add(-1500 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := c.SetFrequency(-12.5); err != nil {
		t.Fatal(err)
	}
	if len(*calls) != 3 {
		t.Fatalf("%d calls", len(*calls))
	}
	adj, step, freq := (*calls)[0], (*calls)[1], (*calls)[2]
	if adj.Modes != unix.ADJ_OFFSET_SINGLESHOT || adj.Offset != -1500 {
		t.Errorf("slew: modes %#x offset %d, want singleshot −1500 µs", adj.Modes, adj.Offset)
	}
	// −1.5 s as a normalised timespec: −2 s + 500 000 000 ns.
	if step.Modes != unix.ADJ_SETOFFSET|unix.ADJ_NANO || step.Time.Sec != -2 || step.Time.Usec != 500_000_000 {
		t.Errorf("step: modes %#x time %+v, want setoffset|nano {−2, 5e8}", step.Modes, step.Time)
	}
	if freq.Modes != unix.ADJ_FREQUENCY || freq.Freq != -12.5*65536 {
		t.Errorf("frequency: modes %#x freq %d", freq.Modes, freq.Freq)
	}
	// Out-of-range requests never reach the syscall.
	if err := c.SetFrequency(501); !errors.Is(err, ErrFrequencyRange) {
		t.Errorf("SetFrequency(501) = %v", err)
	}
	if err := c.Adjust(time.Hour); err == nil {
		t.Error("Adjust(1h) accepted")
	}
	if len(*calls) != 3 {
		t.Errorf("out-of-range requests made %d syscalls", len(*calls)-3)
	}
}

func TestSystemClockPermissionError(t *testing.T) {
	c, _ := fakeSystem(unix.EPERM)
	for name, err := range map[string]error{
		"slew":      c.Adjust(time.Millisecond),
		"step":      c.Step(c.Now()),
		"frequency": c.SetFrequency(1),
	} {
		if !errors.Is(err, ErrPermission) || !errors.Is(err, unix.EPERM) {
			t.Errorf("%s: %v does not wrap ErrPermission and EPERM", name, err)
			continue
		}
		for _, frag := range []string{"CAP_SYS_TIME", "--clock=dry-run", "--clock=sim:"} {
			if !strings.Contains(err.Error(), frag) {
				t.Errorf("%s: %q does not mention %s", name, err, frag)
			}
		}
	}
	c, _ = fakeSystem(unix.EINVAL)
	if err := c.Adjust(time.Millisecond); errors.Is(err, ErrPermission) || !errors.Is(err, unix.EINVAL) {
		t.Errorf("EINVAL mapped to %v", err)
	}
}

// State is the only method that reaches the real kernel in tests, and it
// reads: adjtimex with modes = 0 changes nothing and needs no capability.
func TestSystemClockStateReadOnly(t *testing.T) {
	c := NewSystemClock()
	var seen uint32 = 1
	real := c.adjtimex
	c.adjtimex = func(tx *unix.Timex) (int, error) {
		seen = tx.Modes
		if tx.Modes != 0 {
			t.Fatalf("State asked adjtimex for modes %#x", tx.Modes)
		}
		return real(tx)
	}
	// adjtimex with modes = 0 only reads: any Linux process may call it.
	st, err := c.State()
	if err != nil {
		t.Fatalf("adjtimex(modes=0): %v", err)
	}
	if seen != 0 || st.Kind != "system" || st.FrequencyPPM < -MaxFrequencyPPM || st.FrequencyPPM > MaxFrequencyPPM {
		t.Fatalf("state = %+v", st)
	}
}

// TestCheckPermissionReadsOnly: the check agrees with /proc's view of the
// effective capabilities, and it changes nothing (it makes no adjtimex call).
func TestCheckPermissionReadsOnly(t *testing.T) {
	c := NewSystemClock()
	c.adjtimex = func(*unix.Timex) (int, error) {
		t.Fatal("CheckPermission called adjtimex")
		return 0, nil
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var capEff uint64
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			if capEff, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := capEff&(1<<unix.CAP_SYS_TIME) != 0
	if got := c.CheckPermission() == nil; got != want {
		t.Fatalf("CheckPermission allowed=%v, /proc says CAP_SYS_TIME=%v", got, want)
	}
	if err := c.CheckPermission(); err != nil && !errors.Is(err, ErrPermission) {
		t.Fatalf("error %v does not wrap ErrPermission", err)
	}
}

// fakeKernel is adjtimex's status as the kernel keeps it: a read (modes
// 0) returns it, ADJ_STATUS sets its writable bits, and every write is
// recorded. Nothing reaches the host kernel.
type fakeKernel struct {
	status int32
	writes []unix.Timex
	err    error // returned by writes
}

// staRonly are the status bits the kernel does not let adjtimex set
// (STA_RONLY of include/uapi/linux/timex.h).
const staRonly = unix.STA_PPSSIGNAL | unix.STA_PPSJITTER | unix.STA_PPSWANDER | unix.STA_PPSERROR | unix.STA_CLOCKERR |
	unix.STA_NANO | unix.STA_MODE | unix.STA_CLK

func (k *fakeKernel) adjtimex(tx *unix.Timex) (int, error) {
	if tx.Modes == 0 {
		tx.Status = k.status
		return unix.TIME_OK, nil
	}
	k.writes = append(k.writes, *tx)
	if k.err != nil {
		return -1, k.err
	}
	if tx.Modes&unix.ADJ_STATUS != 0 {
		k.status = k.status&staRonly | tx.Status&^staRonly
	}
	return unix.TIME_OK, nil
}

// TestSystemClockKernelSync: SetKernelSync reads the status and writes it
// back with only STA_UNSYNC changed (a leap second armed by another
// program stays armed), with maxerror and esterror in µs; unsynchronised,
// or with maxerror at 16 s or more, both are 16 s and STA_UNSYNC is set.
func TestSystemClockKernelSync(t *testing.T) {
	k := &fakeKernel{status: unix.STA_UNSYNC | unix.STA_INS | unix.STA_NANO}
	c := NewSystemClockFunc(k.adjtimex)
	const modes = unix.ADJ_STATUS | unix.ADJ_MAXERROR | unix.ADJ_ESTERROR
	for _, tc := range []struct {
		set            KernelSync
		status         int32 // written
		maxerr, esterr int64
	}{
		{KernelSync{Synchronised: true, MaxError: 1500 * time.Microsecond, EstError: 400 * time.Microsecond}, unix.STA_INS | unix.STA_NANO, 1500, 400},
		{KernelSync{Synchronised: true, MaxError: 1700 * time.Microsecond, EstError: 600 * time.Microsecond}, unix.STA_INS | unix.STA_NANO, 1700, 600},
		{KernelSync{}, unix.STA_UNSYNC | unix.STA_INS | unix.STA_NANO, 16_000_000, 16_000_000},
		{KernelSync{Synchronised: true, MaxError: 16 * time.Second, EstError: time.Millisecond}, unix.STA_UNSYNC | unix.STA_INS | unix.STA_NANO, 16_000_000, 16_000_000},
		{KernelSync{Synchronised: true, MaxError: 3 * time.Second, EstError: time.Minute}, unix.STA_INS | unix.STA_NANO, 3_000_000, 16_000_000},
	} {
		n := len(k.writes)
		if err := c.SetKernelSync(tc.set); err != nil {
			t.Fatal(err)
		}
		if len(k.writes) != n+1 {
			t.Fatalf("%+v: %d writes", tc.set, len(k.writes)-n)
		}
		w := k.writes[n]
		if w.Modes != modes || w.Status != tc.status || int64(w.Maxerror) != tc.maxerr || int64(w.Esterror) != tc.esterr {
			t.Errorf("%+v: wrote modes %#x status %#x maxerror %d esterror %d, want %#x %#x %d %d", tc.set,
				w.Modes, w.Status, w.Maxerror, w.Esterror, modes, tc.status, tc.maxerr, tc.esterr)
		}
	}
	k.err = unix.EPERM
	if err := c.SetKernelSync(KernelSync{}); !errors.Is(err, ErrPermission) {
		t.Errorf("EPERM: %v", err)
	}
	// Only the system clock keeps a kernel state.
	for _, clk := range []Clock{NewSimClock(NewMonotonicSource(), SimConfig{}), NewDryRunClock(nil, nil)} {
		if _, ok := clk.(KernelSyncer); ok {
			t.Errorf("%T is a KernelSyncer", clk)
		}
	}
}

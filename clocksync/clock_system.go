//go:build linux

package clocksync

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// SystemClock is the host's CLOCK_REALTIME, corrected through adjtimex(2):
//
//   - Adjust: ADJ_OFFSET_SINGLESHOT, which is what glibc's adjtime(3) does:
//     the kernel slews at 500 ppm until the offset is consumed; a new call
//     replaces the old one. Larger than ±MaxSystemSlew is refused: step
//     instead.
//   - Step: ADJ_SETOFFSET|ADJ_NANO, an atomic relative step (no read-then-
//     write race).
//   - SetFrequency: ADJ_FREQUENCY, in the kernel's 2^-16 ppm units.
//   - State: adjtimex with modes = 0, which only reads.
//   - SetKernelSync: reads the status, then ADJ_STATUS|ADJ_MAXERROR|
//     ADJ_ESTERROR with only STA_UNSYNC changed (KernelSyncer).
//
// Changing the clock needs CAP_SYS_TIME; without it every write returns an
// error wrapping ErrPermission, which names the capability and the --clock
// choices that need none.
type SystemClock struct {
	adjtimex func(*unix.Timex) (int, error) // replaced by tests
	now      func() time.Time
}

// MaxSystemSlew is the largest Adjust the system clock accepts, the range
// of glibc's adjtime (about ±2145 s); larger corrections must step.
const MaxSystemSlew = (1<<31 - 1) / 1_000_000 * time.Second

// NewSystemClock returns the host clock. Creating it makes no syscall.
func NewSystemClock() *SystemClock {
	return &SystemClock{adjtimex: unix.Adjtimex, now: time.Now}
}

// NewSystemClockFunc returns the host clock with its adjtimex(2) calls
// made through adjtimex instead: a test's fake, which sees every change
// the clock would make and lets none reach the kernel. It still reads
// the time from the host.
func NewSystemClockFunc(adjtimex func(*unix.Timex) (int, error)) *SystemClock {
	return &SystemClock{adjtimex: adjtimex, now: time.Now}
}

// setInt assigns v to a Timex field whose width depends on the architecture
// (C long).
func setInt[T ~int32 | ~int64](p *T, v int64) { *p = T(v) }

// mapErr turns EPERM into ErrPermission and names the operation.
func mapSysErr(op string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("system clock: %s: %w: %w", op, ErrPermission, err)
	}
	return fmt.Errorf("system clock: %s: adjtimex: %w", op, err)
}

// Now reads the host clock, without its monotonic reading so that
// differences between readings are wall-clock differences.
func (c *SystemClock) Now() time.Time { return c.now().Round(0) }

// Adjust slews the host clock by d like adjtime(2).
func (c *SystemClock) Adjust(d time.Duration) error {
	if d > MaxSystemSlew || d < -MaxSystemSlew {
		return fmt.Errorf("system clock: slew by %v: beyond ±%v, step instead", d, MaxSystemSlew)
	}
	tx := unix.Timex{Modes: unix.ADJ_OFFSET_SINGLESHOT}
	setInt(&tx.Offset, d.Round(time.Microsecond).Microseconds())
	if _, err := c.adjtimex(&tx); err != nil {
		return mapSysErr(fmt.Sprintf("slew by %v", d), err)
	}
	return nil
}

// Step sets the host clock to t, as a relative step computed against Now.
func (c *SystemClock) Step(t time.Time) error {
	d := t.Sub(c.Now())
	sec, nsec := int64(d/time.Second), int64(d%time.Second)
	if nsec < 0 { // the kernel wants 0 ≤ nsec < 1e9
		sec--
		nsec += int64(time.Second)
	}
	tx := unix.Timex{Modes: unix.ADJ_SETOFFSET | unix.ADJ_NANO}
	setInt(&tx.Time.Sec, sec)
	setInt(&tx.Time.Usec, nsec) // nanoseconds under ADJ_NANO
	if _, err := c.adjtimex(&tx); err != nil {
		return mapSysErr(fmt.Sprintf("step by %v", d), err)
	}
	return nil
}

// SetFrequency sets the kernel frequency correction.
func (c *SystemClock) SetFrequency(ppm float64) error {
	if err := checkFrequency(ppm); err != nil {
		return err
	}
	tx := unix.Timex{Modes: unix.ADJ_FREQUENCY}
	setInt(&tx.Freq, int64(ppm*65536))
	if _, err := c.adjtimex(&tx); err != nil {
		return mapSysErr(fmt.Sprintf("set frequency %+.3f ppm", ppm), err)
	}
	return nil
}

// SetKernelSync tells the kernel whether the clock is synchronised
// (KernelSyncer): it reads the status first and changes only its
// STA_UNSYNC bit (leap second and PLL bits are another program's), and
// sets maxerror and esterror in µs (k normalised to the kernel's rules).
func (c *SystemClock) SetKernelSync(k KernelSync) error {
	var tx unix.Timex // Modes 0: read only
	if _, err := c.adjtimex(&tx); err != nil {
		return mapSysErr("read status", err)
	}
	k = k.normalize()
	status := tx.Status | unix.STA_UNSYNC
	if k.Synchronised {
		status = tx.Status &^ unix.STA_UNSYNC
	}
	tx = unix.Timex{Modes: unix.ADJ_STATUS | unix.ADJ_MAXERROR | unix.ADJ_ESTERROR, Status: status}
	setInt(&tx.Maxerror, k.MaxError.Microseconds())
	setInt(&tx.Esterror, k.EstError.Microseconds())
	if _, err := c.adjtimex(&tx); err != nil {
		what := "unsynchronised"
		if k.Synchronised {
			what = fmt.Sprintf("synchronised, maxerror %v", k.MaxError)
		}
		return mapSysErr("set kernel sync state "+what, err)
	}
	return nil
}

// State reads the kernel's clock state with adjtimex(modes = 0), which
// changes nothing and needs no capability. PendingSlew is not reported
// (reading it needs ADJ_OFFSET_SS_READ).
func (c *SystemClock) State() (ClockState, error) {
	var tx unix.Timex // Modes 0: read only
	st, err := c.adjtimex(&tx)
	if err != nil {
		return ClockState{}, mapSysErr("read state", err)
	}
	return ClockState{
		Kind:         "system",
		Now:          c.Now(),
		FrequencyPPM: float64(tx.Freq) / 65536,
		MaxError:     time.Duration(tx.Maxerror) * time.Microsecond,
		EstError:     time.Duration(tx.Esterror) * time.Microsecond,
		Synchronized: tx.Status&unix.STA_UNSYNC == 0 && st != unix.TIME_ERROR,
		Detail:       fmt.Sprintf("adjtimex state %d, status %#x", st, tx.Status),
	}, nil
}

// CheckPermission reports, without changing anything, whether this
// process may change the clock: whether CAP_SYS_TIME is in its effective
// set. The daemon calls it at start-up so that a missing capability stops
// it with a clear message instead of failing at the first correction.
func (c *SystemClock) CheckPermission() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData // version 3: two 32-bit words
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("system clock: read capabilities: %w", err)
	}
	if data[0].Effective&(1<<unix.CAP_SYS_TIME) == 0 {
		return fmt.Errorf("system clock: %w", ErrPermission)
	}
	return nil
}

package clocksync

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Clock is the clock a daemon reads and corrects. Every time the daemon
// stamps, every correction it applies and every frequency it sets goes through
// one Clock, so the same daemon runs on the host clock, on a simulated clock
// of its own, or in dry-run.
type Clock interface {
	// Now reads the clock.
	Now() time.Time
	// Adjust slews the clock by d, like adjtime(2): the clock runs slightly
	// fast or slow (at most MaxSlewPPM) until it has moved by d. A new call
	// replaces whatever is still pending from the previous one.
	Adjust(d time.Duration) error
	// Step sets the clock to t at once, like settimeofday(2). It cancels any
	// pending slew.
	Step(t time.Time) error
	// SetFrequency sets the clock's frequency correction in parts per
	// million; positive makes the clock run faster. |ppm| ≤ MaxFrequencyPPM.
	SetFrequency(ppm float64) error
	// State reports the clock's kind and adjustment state.
	State() (ClockState, error)
}

// ClockState is what a Clock reports about itself.
type ClockState struct {
	Kind         string        // "system", "sim", "dry-run"
	Now          time.Time     // the clock's reading when the state was taken
	PendingSlew  time.Duration // part of the last Adjust not yet applied (0 if unknown)
	FrequencyPPM float64       // frequency correction in effect
	// MaxError and EstError are the kernel's error estimates (system clock
	// only; 0 elsewhere).
	MaxError, EstError time.Duration
	Synchronized       bool // kernel: STA_UNSYNC clear (system clock only)
	Detail             string
}

// KernelSyncer is a clock the kernel keeps a sync state for: the system
// clock's STA_UNSYNC, maxerror and esterror (adjtimex(2)), which
// timedatectl's "System clock synchronized", systemd-time-wait-sync and
// ntp_adjtime(3) read, and which turns on the kernel's 11-minute RTC
// updates while clear. Only SystemClock is one: simulated and dry-run
// clocks have no kernel state to tell.
type KernelSyncer interface {
	// SetKernelSync tells the kernel the clock's sync state.
	SetKernelSync(KernelSync) error
}

// KernelSync is what a daemon tells the kernel about its clock, as ntpd
// and chrony do.
type KernelSync struct {
	// Synchronised clears STA_UNSYNC; false sets it.
	Synchronised bool
	// MaxError bounds how far the clock may be from the time it follows;
	// EstError is the estimate's error. The kernel adds 500 µs to
	// maxerror every second by itself and sets STA_UNSYNC once it passes
	// MaxKernelError. Unsynchronised, both are MaxKernelError.
	MaxError, EstError time.Duration
}

// KernelMaxErrorGrowthPPM is how fast the kernel grows maxerror between
// the updates of the program that keeps the clock (MAXFREQ: 500 µs a
// second, second_overflow in kernel/time/ntp.c).
const KernelMaxErrorGrowthPPM = 500

// MaxKernelError is the kernel's NTP_PHASE_LIMIT (16 s): a maxerror at or
// beyond it means unsynchronised, as chrony's MAX_SYNC_ERROR.
const MaxKernelError = 16 * time.Second

// normalize applies the kernel's rules: unsynchronised, both errors are
// MaxKernelError; synchronised, EstError is capped there and a MaxError
// that reaches it is unsynchronised.
func (k KernelSync) normalize() KernelSync {
	k.MaxError, k.EstError = max(k.MaxError, 0), min(max(k.EstError, 0), MaxKernelError)
	if !k.Synchronised || k.MaxError >= MaxKernelError {
		return KernelSync{MaxError: MaxKernelError, EstError: MaxKernelError}
	}
	return k
}

// MaxSlewPPM is the rate at which adjtime(2) slews, on BSD (tickadj) and
// Linux (ADJ_OFFSET_SINGLESHOT) alike: 500 µs per second.
const MaxSlewPPM = 500

// MaxFrequencyPPM is the largest frequency correction Linux accepts
// (MAXFREQ, 500 ppm); every Clock enforces the same limit.
const MaxFrequencyPPM = 500

// Errors returned by clocks and by ParseClock.
var (
	// ErrPermission: the process lacks CAP_SYS_TIME. The error text names the
	// capability and the --clock choices that need none.
	ErrPermission = errors.New("changing the system clock needs CAP_SYS_TIME (run as root, or grant it with `setcap cap_sys_time+ep` or systemd AmbientCapabilities=CAP_SYS_TIME); --clock=dry-run and --clock=sim:... need no capability")
	// ErrFrequencyRange: SetFrequency beyond ±MaxFrequencyPPM.
	ErrFrequencyRange = errors.New("frequency correction out of range")
	// ErrBadClockSpec: the --clock value could not be parsed.
	ErrBadClockSpec = errors.New("bad --clock value")
	// ErrUnsupported: the clock kind is not available on this platform.
	ErrUnsupported = errors.New("not supported on this platform")
)

func checkFrequency(ppm float64) error {
	if !(ppm >= -MaxFrequencyPPM && ppm <= MaxFrequencyPPM) { // also catches NaN
		return fmt.Errorf("set frequency %g ppm: %w (|ppm| ≤ %d)", ppm, ErrFrequencyRange, MaxFrequencyPPM)
	}
	return nil
}

// ClockChoices documents the accepted --clock values, for help texts.
const ClockChoices = "system | dry-run | sim:offset=±DUR,drift=±Nppm[,wander=Nppm,temp=Nppm,period=DUR,seed=N]"

// ParseClock builds the Clock a `--clock` value names:
//
//	system                      the host clock (needs CAP_SYS_TIME to change it)
//	dry-run                     reads the host clock, never changes it
//	sim:offset=+350ms,drift=-40ppm
//	                            a simulated clock over the real monotonic clock
//
// src is the time base of simulated clocks; nil means the real monotonic
// clock (NewMonotonicSource). The system clock is only constructed here: no
// syscall is made until the daemon calls one of its methods.
func ParseClock(spec string, src TimeSource) (Clock, error) {
	switch s := strings.TrimSpace(spec); {
	case s == "system":
		return NewSystemClock(), nil
	case s == "dry-run" || s == "dryrun":
		return NewDryRunClock(nil, nil), nil
	case s == "sim" || strings.HasPrefix(s, "sim:"):
		cfg, err := ParseSimSpec(s)
		if err != nil {
			return nil, err
		}
		if src == nil {
			src = NewMonotonicSource()
		}
		return NewSimClock(src, cfg), nil
	default:
		return nil, fmt.Errorf("%w %q: want %s", ErrBadClockSpec, spec, ClockChoices)
	}
}

// nowWithSource: the host clock is the real time its readings are of
// (pairedClock).
func (c *SystemClock) nowWithSource() (clock, source time.Time) {
	t := c.Now()
	return t, t
}

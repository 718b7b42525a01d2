package tsp

import (
	"fmt"
	"time"
)

// Timeval is the (seconds, microseconds) pair TSP carries, in BSD's
// normalised form: Usec is always in [0, 1e6) and the sign lives in Sec, so
// −10 ms is {Sec: −1, Usec: 990000}.
type Timeval struct {
	Sec  int32
	Usec int32
}

const usecPerSec = 1_000_000

// DurationTimeval converts a duration (a correction) to a normalised
// Timeval, rounded to the microsecond. Durations beyond ±2^31 s cannot be
// carried and are an error.
func DurationTimeval(d time.Duration) (Timeval, error) {
	us := d.Round(time.Microsecond).Microseconds()
	sec, usec := floorDiv(us, usecPerSec)
	if sec < -1<<31 || sec > 1<<31-1 {
		return Timeval{}, fmt.Errorf("duration %v does not fit a 32-bit TSP time", d)
	}
	return Timeval{Sec: int32(sec), Usec: int32(usec)}, nil
}

// Duration returns the signed duration the Timeval stands for. It accepts
// un-normalised values too (usec outside [0, 1e6)), as a lenient reader.
func (tv Timeval) Duration() time.Duration {
	return time.Duration(tv.Sec)*time.Second + time.Duration(tv.Usec)*time.Microsecond
}

// TimeTimeval converts an absolute time (SETTIME, SETDATE) to a Timeval.
// The wire holds 32 bits of seconds; absolute times are read as unsigned,
// so they span 1970 to 2106 (see Timeval.Time).
func TimeTimeval(t time.Time) (Timeval, error) {
	us := t.Round(time.Microsecond).UnixMicro()
	sec, usec := floorDiv(us, usecPerSec)
	if sec < 0 || sec > 1<<32-1 {
		return Timeval{}, fmt.Errorf("time %v is outside the 32-bit TSP range 1970–2106", t)
	}
	return Timeval{Sec: int32(uint32(sec)), Usec: int32(usec)}, nil
}

// Time returns the absolute time the Timeval stands for. Seconds are read
// as unsigned 32-bit, the way a BSD time_t of 32 bits wraps after 2038
// (Wireshark decodes them unsigned too); negative absolute times have no
// meaning for a time daemon.
func (tv Timeval) Time() time.Time {
	return time.Unix(int64(uint32(tv.Sec)), int64(tv.Usec)*int64(time.Microsecond))
}

// String prints the value as signed seconds with six decimals, the way
// tcpdump prints TSP times ("-0.010000").
func (tv Timeval) String() string {
	us := tv.Duration().Microseconds()
	sign := ""
	if us < 0 {
		sign, us = "-", -us
	}
	return fmt.Sprintf("%s%d.%06d", sign, us/usecPerSec, us%usecPerSec)
}

// floorDiv divides rounding towards −∞, so the remainder is never negative.
func floorDiv(a, b int64) (q, r int64) {
	q, r = a/b, a%b
	if r < 0 {
		q--
		r += b
	}
	return q, r
}

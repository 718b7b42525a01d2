package auth

import (
	"errors"
	"fmt"
)

// Result is Check's verdict on one datagram. The zero value is Bad, so
// that a verdict never set drops.
type Result uint8

const (
	// Bad: drop the datagram. The error is a *DropError saying why.
	Bad Result = iota
	// Valid: it carried a trailer whose MAC verified under a known key,
	// from a sender it is fresh for.
	Valid
	// Unsigned: it carried no trailer and the mode lets it in (Optional,
	// from an unsigned peer).
	Unsigned
	// Unchecked: the mode is Off; nothing was checked.
	Unchecked
	// Own: its MAC verified and its sender is our own signer's identity:
	// our own datagram came back (a broadcast looped to us, or a replay
	// of one). Not an attack, and nothing to take: the caller drops it as
	// its own echo.
	Own
)

func (r Result) String() string {
	switch r {
	case Bad:
		return "bad"
	case Valid:
		return "valid"
	case Unsigned:
		return "unsigned"
	case Unchecked:
		return "unchecked"
	case Own:
		return "own"
	}
	return fmt.Sprintf("Result(%d)", uint8(r))
}

// Reason says why Check dropped a datagram: an index for counters.
type Reason uint8

const (
	ReasonNone       Reason = iota // not dropped
	ReasonUnsigned                 // no trailer, and the mode or the source does not allow that
	ReasonMalformed                // bytes after the packet that are not a well-formed trailer
	ReasonUnknownKey               // the trailer's key ID is not in the key file
	ReasonBadMAC                   // the MAC does not verify (other key material, or altered bytes)
	ReasonReplay                   // counter already accepted from that sender, or older than its replay window
	ReasonWindow                   // first contact with a sender, timestamp too far from our clock
	ReasonNotSaved                 // counter past what the saved replay state covers: save, then it passes
	ReasonClosed                   // the verifier was closed (its state is saved for good)
	ReasonNoEcho                   // moves a clock without echoing our nonce of this run: not proven fresh
	NumReasons                     // number of reasons, for arrays of counters
)

// Sentinel errors, one per Reason, for errors.Is.
var (
	ErrUnsigned   = errors.New("unsigned")
	ErrMalformed  = errors.New("malformed trailer")
	ErrUnknownKey = errors.New("unknown key ID")
	ErrBadMAC     = errors.New("bad MAC")
	ErrReplay     = errors.New("replayed counter")
	ErrWindow     = errors.New("timestamp outside window")
	ErrNotSaved   = errors.New("counter beyond saved replay state")
	ErrClosed     = errors.New("closed")
	ErrNoEcho     = errors.New("no echo of our nonce")
)

var reasonErrs = [NumReasons]error{
	nil, ErrUnsigned, ErrMalformed, ErrUnknownKey, ErrBadMAC, ErrReplay, ErrWindow, ErrNotSaved, ErrClosed, ErrNoEcho,
}

func (r Reason) String() string {
	if r == ReasonNone {
		return "none"
	}
	if r < NumReasons {
		return reasonErrs[r].Error()
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Err is the sentinel error of the reason (nil for ReasonNone).
func (r Reason) Err() error {
	if r < NumReasons {
		return reasonErrs[r]
	}
	return nil
}

// DropError is Check's error: the reason, and details (numbers, never key
// material) for a log line.
type DropError struct {
	Reason Reason
	Detail string
}

func (e *DropError) Error() string {
	if e.Detail == "" {
		return "auth: " + e.Reason.String()
	}
	return "auth: " + e.Reason.String() + ": " + e.Detail
}

func (e *DropError) Unwrap() error { return e.Reason.Err() }

func drop(r Reason, format string, args ...any) *DropError {
	return &DropError{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// ReasonOf is the Reason inside err, ReasonNone if err holds no DropError.
func ReasonOf(err error) Reason {
	var de *DropError
	if errors.As(err, &de) {
		return de.Reason
	}
	return ReasonNone
}

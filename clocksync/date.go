package clocksync

import (
	"time"

	"github.com/timed-project/timed/tsp"
)

// The date path (facts §4): date(1) sends SETDATE to its local daemon; a
// slave passes the request to its master as SETDATEREQ; the master answers
// DATEACK and changes the network's time. This file holds the decisions as
// pure functions; the daemon sends the messages and applies the changes
// (through an Applier, so max-step still holds).

// DateRole is the receiving daemon's position.
type DateRole int

// Roles for DecideDate.
const (
	// DateNoMaster: the daemon has no slave net and masters none (BSD
	// ignores SETDATE then).
	DateNoMaster DateRole = iota
	// DateSlave: a slave (or submaster) with a slave net: requests go up
	// to its master.
	DateSlave
	// DateMaster: the master of the net the request concerns.
	DateMaster
)

// DateRequest is a SETDATE or SETDATEREQ as received.
type DateRequest struct {
	Type    tsp.Type      // tsp.SetDate or tsp.SetDateReq
	Seq     uint16        // echoed in the DATEACK
	From    string        // the name field
	Time    time.Time     // the time carried
	Queued  time.Duration // time spent in our receive queue
	Trusted bool          // From passes the trust list
	// SETDATEREQ only: the sender is a known slave on a net we master (a
	// submaster relays only those), and its seq differs from the last one
	// it sent (BSD htp->seq).
	KnownSlave, NewSeq bool
}

// DateDecision is what the daemon must do with a date request. Fields not
// set mean "do nothing of that kind".
type DateDecision struct {
	Ignore bool   // drop the request (Reason says why)
	Reason string // for the log
	// LogUntrusted: log the request as coming from an untrusted host.
	LogUntrusted bool
	// DateAck: answer the requester with DATEACK, seq echoed (the master
	// does so at once; a slave only after its master's DATEACK).
	DateAck bool
	// ForwardReq: send SETDATEREQ carrying Target to the master (acksend,
	// waiting for DATEACK) and answer DateAck only when it came.
	ForwardReq bool
	// Target is the requested time corrected for its queueing delay.
	Target time.Time
	// Slew: the master slews the whole network by this (|diff| below the
	// step threshold): synch(Slew), network consensus skipped for Dictate
	// rounds.
	Slew    time.Duration
	Dictate int
	// Step: the master steps its own clock to Target and sends SETTIME to
	// every slave (spreadtime).
	Step bool
	// SpreadTime: send SETTIME with our time to every slave.
	SpreadTime bool
}

// DecideDate decides what to do with a SETDATE or SETDATEREQ, as BSD's
// mchgdate (master) and schgdate (slave) do, with one difference: requests
// from untrusted sources never change any clock (BSD logs them and
// re-asserts its time with spreadtime; so does this).
func DecideDate(role DateRole, req DateRequest, now time.Time, stepThreshold time.Duration) DateDecision {
	if stepThreshold <= 0 {
		stepThreshold = DefaultStepThreshold
	}
	target := QueueCorrected(req.Time, req.Queued)
	switch req.Type {
	case tsp.SetDate, tsp.SetDateReq:
	default:
		return DateDecision{Ignore: true, Reason: "not a date request: " + req.Type.String()}
	}
	if req.Type == tsp.SetDateReq && (!req.KnownSlave || !req.NewSeq) {
		return DateDecision{Ignore: true, Reason: "SETDATEREQ from an unknown slave or with a repeated seq"}
	}
	switch role {
	case DateMaster:
		if !req.Trusted {
			return DateDecision{Ignore: true, Reason: "date request from untrusted host " + req.From, LogUntrusted: true, SpreadTime: true}
		}
		d := DateDecision{DateAck: true, Target: target}
		diff := target.Sub(now)
		if absDur(diff) < stepThreshold {
			d.Slew, d.Dictate = diff, 3
		} else {
			d.Step, d.SpreadTime, d.Dictate = true, true, 2
		}
		return d
	case DateSlave:
		if !req.Trusted {
			return DateDecision{Ignore: true, Reason: "date request from untrusted host " + req.From, LogUntrusted: true}
		}
		return DateDecision{ForwardReq: true, Target: target}
	default:
		return DateDecision{Ignore: true, Reason: "no master to ask: not a slave on any net"}
	}
}

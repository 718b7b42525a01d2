package election

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/timed-project/timed/tsp"
)

// Event is an input to Machine.Step: Start, Stop, Recv, TimerFired,
// ForceElection or SyncResult.
type Event interface{ isEvent() }

// Start begins the protocol: the machine broadcasts MASTERREQ (Start-up).
// Starting a running machine restarts it from Start-up.
type Start struct{}

// Stop ends the protocol: every timer is cancelled and the machine ignores
// everything but Start. It sends nothing (BSD's daemon just exits).
type Stop struct{}

// Recv is a TSP packet received on this machine's network. From is the
// sender's address and port; replies go to it. The runtime hands the
// machine every decoded packet of the election types; it answers
// TRACEON/TRACEOFF, MSITE, SETDATE and the clock probes itself. A TEST
// packet is ForceElection.
type Recv struct {
	Packet tsp.Packet
	From   netip.AddrPort
}

// TimerFired reports that the timer set by the latest SetTimer action for
// ID ran out. An expiry of a cancelled timer that raced with the
// CancelTimer is ignored. The runtime must not report the expiry of a
// setting that a later SetTimer for the same ID replaced (keep a
// generation per ID, as simnet and timed/loop.go do): the machine takes
// the runtime's word for an expiry rather than comparing now with its
// deadline, because now may come from a host clock that was just stepped.
type TimerFired struct{ ID TimerID }

// ForceElection is timedc's "election" (BSD's TEST): a slave starts its
// election now (if it may be master); a master runs a sync round now.
type ForceElection struct{}

// SyncResult answers a SyncRound action: the clock layer has measured the
// slaves and gives the correction each must apply. The machine sends them
// (ADJTIME, or SETTIME to a slave that has not been set yet) reliably and
// counts failures. A slave of the round that is missing from Corrections
// could not be measured: it counts as a failed round for that slave.
type SyncResult struct {
	Round uint64
	// Own is the correction the master applies to its own clock this round
	// (the clock layer applies it); SETTIME carries now+Own, the network
	// time.
	Own         time.Duration
	Corrections []Correction
	// Next, if positive, is when the next round begins, from the start
	// of this one: adaptive rounds (clocksync.IntervalController). It is
	// capped at SyncInterval, which is also the interval when Next is 0
	// (BSD's fixed rounds).
	Next time.Duration
}

// ZeroResult answers a round without measuring: every slave is corrected
// by zero. A runtime without a clock layer (or a test) uses it; the master
// must answer every round, since the ADJTIMEs it sends are what keeps its
// slaves' election timers from running out.
func ZeroResult(r SyncRound) SyncResult {
	res := SyncResult{Round: r.Round, Corrections: make([]Correction, len(r.Slaves))}
	for i, s := range r.Slaves {
		res.Corrections[i] = Correction{Name: s.Name}
	}
	return res
}

// Correction is one slave's correction: positive Delta means "move your
// clock forward by Delta".
type Correction struct {
	Name  string
	Delta time.Duration
	// Set sends the slave SETTIME (the network time) instead of
	// ADJTIME(Delta): the clock layer's call for corrections at or above
	// its step threshold (BSD correct(): 20 s).
	Set bool
	// Near: the clock layer measured the slave this round near the
	// network time, within what the slaves slew
	// (clocksync.CorrectOptions.AdjustNewBelow). A slave the machine has
	// not set yet (new to this master, as every slave is after a master
	// change) then gets ADJTIME(Delta) too: SETTIME carries no
	// transit-delay correction, so it would move an already synchronised
	// slave by that delay (and restart its frequency estimate), where the
	// measured ADJTIME moves it by no more than the measurement's error.
	// Otherwise (and in ZeroResult) a slave not set yet gets SETTIME, as
	// BSD's need_set.
	Near bool
}

func (Start) isEvent()         {}
func (Stop) isEvent()          {}
func (Recv) isEvent()          {}
func (TimerFired) isEvent()    {}
func (ForceElection) isEvent() {}
func (SyncResult) isEvent()    {}

func (Start) String() string         { return "start" }
func (Stop) String() string          { return "stop" }
func (ForceElection) String() string { return "force-election" }
func (e Recv) String() string        { return "recv " + e.Packet.Format(e.From.String()) }
func (e TimerFired) String() string  { return "timer " + e.ID.String() }
func (e SyncResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sync-result round=%d own=%v", e.Round, e.Own)
	if e.Next > 0 {
		fmt.Fprintf(&b, " next=%v", e.Next)
	}
	for _, c := range e.Corrections {
		fmt.Fprintf(&b, " %s:%v", c.Name, c.Delta)
	}
	return b.String()
}

// TimerID names one of the machine's timers. The named timers below exist
// once each; IDs from firstSendTimer up belong to reliable sends (one per
// outstanding packet: its retransmission timer).
type TimerID uint32

// The machine's named timers.
const (
	// TimerElection is the slave's election timer (also the re-poll timer
	// of a host that may not be master and has no master).
	TimerElection TimerID = iota + 1
	// TimerCandidate ends a candidacy: when it fires, the candidate becomes
	// master.
	TimerCandidate
	// TimerAccept ends the accept window.
	TimerAccept
	// TimerConsistency ends the wait for a second MASTERACK.
	TimerConsistency
	// TimerNoMaster ends the No Master state.
	TimerNoMaster
	// TimerSync starts the master's next sync round.
	TimerSync
	// TimerLook is a Host's, one per network it put out of use: when it
	// runs out the host looks at that network again (BSD looktime).
	TimerLook
	// TimerColdStart makes a starting daemon that has seen others but no
	// master become master (Config.ColdStartDelay).
	TimerColdStart

	firstSendTimer TimerID = 1 << 8
)

var timerNames = map[TimerID]string{
	TimerElection: "election", TimerCandidate: "candidate", TimerAccept: "accept",
	TimerConsistency: "consistency", TimerNoMaster: "nomaster", TimerSync: "sync",
	TimerLook: "look", TimerColdStart: "coldstart",
}

func (id TimerID) String() string {
	if n, ok := timerNames[id]; ok {
		return n
	}
	if id >= firstSendTimer {
		return fmt.Sprintf("send#%d", uint32(id-firstSendTimer))
	}
	return fmt.Sprintf("timer(%d)", uint32(id))
}

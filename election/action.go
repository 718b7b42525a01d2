package election

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/timed-project/timed/tsp"
)

// Ready is what one Step asks the runtime to do, in order.
type Ready struct {
	Actions []Action
}

// Action is one output of the machine: Send, SetTimer, CancelTimer,
// StateChange, SlaveList, SyncRound, AdjustClock or SetClock.
type Action interface{ isAction() }

// Send asks the runtime to transmit a packet once: broadcast on this
// machine's network, or unicast to To. Retransmission is the machine's
// business (it sets a timer and sends again), so the runtime never
// repeats a packet. Reliable tells logs and counters that the machine
// waits for an answer to it.
type Send struct {
	Packet    tsp.Packet
	To        netip.AddrPort
	Broadcast bool
	Reliable  bool
}

// SetTimer asks for TimerFired{ID} After from now, replacing any pending
// timer with the same ID.
type SetTimer struct {
	ID    TimerID
	After time.Duration
}

// CancelTimer cancels the timer with this ID if it is pending.
type CancelTimer struct{ ID TimerID }

// StateChange reports a transition, with the reason in a few words.
type StateChange struct {
	From, To State
	Reason   string
}

// Refused reports a packet the machine did not act on because its source
// may not do what it asks: a correction from an address other than the
// master's, a QUIT from a host not known as a master. The runtime counts
// it and logs it (rate-limited); the machine has already dropped it.
type Refused struct {
	Type   tsp.Type
	From   netip.AddrPort
	Reason RefuseReason
}

// RefuseReason says why a packet was refused, as a metric label.
type RefuseReason string

// The reasons of Refused.
const (
	RefusedNotFollowed RefuseReason = "not-master-followed" // ADJTIME/SETTIME from elsewhere
	RefusedNotMaster   RefuseReason = "quit-not-master"     // QUIT from a host not known as a master
	RefusedTableFull   RefuseReason = "slave-table-full"    // MaxSlaves reached
	RefusedNameTaken   RefuseReason = "slave-name-taken"    // a listed slave's name from another address
	RefusedSendsFull   RefuseReason = "sends-full"          // too many reliable sends pending: this one is not sent
	RefusedOutranked   RefuseReason = "quit-outranked"      // QUIT from a master whose time source ours outranks (Host)
)

// Peer is another daemon on the network: its host name and address.
type Peer struct {
	Name string
	Addr netip.AddrPort
}

// SlaveList is the master's complete slave list, sent whenever it changes
// (sorted by name; empty when the daemon stops being master).
type SlaveList struct{ Slaves []Peer }

// SyncRound asks the clock layer to measure these slaves and answer with
// a SyncResult carrying the same Round. The machine sends the corrections.
type SyncRound struct {
	Round  uint64
	Slaves []Peer
	// Dictate (set by a Host, never by a lone Machine): this host's clock
	// is the truth of the round. The clock layer measures the slaves and
	// corrects each towards this host's clock, takes no vote (no network
	// time) and answers Own = 0: the host's clock follows another
	// network's master, or another network's round votes for it.
	Dictate bool
}

// AdjustClock asks the clock layer to slew the local clock by Delta: an
// ADJTIME from the master (applied once per sequence number).
type AdjustClock struct {
	Delta  time.Duration
	Master string
}

// SetClock asks the clock layer to set the local clock to Time: a SETTIME
// from the master. Time is the master's clock when it sent the packet; the
// clock layer may slew instead of stepping when the difference is small
// (FreeBSD slews under 20 s) and may add the time the packet spent queued.
type SetClock struct {
	Time   time.Time
	Master string
}

func (Send) isAction()        {}
func (SetTimer) isAction()    {}
func (CancelTimer) isAction() {}
func (StateChange) isAction() {}
func (SlaveList) isAction()   {}
func (SyncRound) isAction()   {}
func (AdjustClock) isAction() {}
func (SetClock) isAction()    {}
func (Refused) isAction()     {}

func (a Send) String() string {
	to := a.To.String()
	if a.Broadcast {
		to = "*"
	}
	r := ""
	if a.Reliable {
		r = " reliable"
	}
	return fmt.Sprintf("send %s to=%s%s", a.Packet.Format(""), to, r)
}
func (a SetTimer) String() string    { return fmt.Sprintf("set-timer %v %v", a.ID, a.After) }
func (a CancelTimer) String() string { return fmt.Sprintf("cancel-timer %v", a.ID) }
func (a StateChange) String() string {
	return fmt.Sprintf("state %v -> %v (%s)", a.From, a.To, a.Reason)
}
func (a SlaveList) String() string { return "slaves [" + peerNames(a.Slaves) + "]" }
func (a SyncRound) String() string {
	d := ""
	if a.Dictate {
		d = " dictate"
	}
	return fmt.Sprintf("sync-round %d [%s]%s", a.Round, peerNames(a.Slaves), d)
}
func (a AdjustClock) String() string {
	return fmt.Sprintf("adjust-clock %v from %s", a.Delta, a.Master)
}
func (a SetClock) String() string {
	return fmt.Sprintf("set-clock %s from %s", a.Time.UTC().Format(time.RFC3339Nano), a.Master)
}

func (a Refused) String() string {
	return fmt.Sprintf("refused %v from %v: %s", a.Type, a.From, a.Reason)
}

func peerNames(ps []Peer) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return strings.Join(names, " ")
}

package election

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	"github.com/timed-project/timed/tsp"
)

// role says which state a pending send belongs to; leaving that role
// cancels it (a master that steps down stops retransmitting its ADJTIMEs).
type role uint8

const (
	roleAny    role = iota // kept across state changes (ACK-style answers)
	roleProbe              // MASTERREQ of Start-up
	roleMaster             // ADJTIME, SETTIME, RESOLVE of a master
	// roleRival is a master's QUIT to another master or an intruder. It
	// ends with mastership, as roleMaster does, but is bounded apart:
	// every forged ELECTION under a new name draws one, and they must not
	// crowd out the ADJTIMEs that keep the master's slaves.
	roleRival
	roleCount // the number of roles
)

// outgoing is one packet the machine still has to send or is waiting an
// answer for. Its timer (id) first delays the send (AnswerDelay), then
// runs the retransmission schedule.
type outgoing struct {
	id    TimerID
	pkt   tsp.Packet
	to    netip.AddrPort
	bcast bool
	want  tsp.Type // Ack or MasterAck; Any for a delayed unreliable send
	sent  int      // copies sent so far
	role  role
	peer  string // addressee's name, when known ("" for broadcasts)

	onAck  func(from netip.AddrPort, p tsp.Packet)
	onFail func()
}

// send queues pkt (seq already set) to be sent after delay; if want is not
// Any, it is retransmitted on the Retransmit schedule until an answer of
// type want with the same seq arrives from the addressee (from anyone for a
// broadcast). onFail runs when the schedule is exhausted.
//
// Pending sends are bounded per role: answers to packets from others
// (ACCEPT, REFUSE, a slave's QUIT) and a master's QUITs to rivals at
// maxAnswers each, a master's own sends at MaxSlaves plus a margin, so that a flood of ELECTIONs under new names
// can neither grow the table without end nor crowd out the ADJTIMEs that
// keep the master's slaves. A send beyond the bound is dropped and
// reported as Refused.
func (m *Machine) send(o *outgoing, delay time.Duration) {
	if (o.want != tsp.Any || delay > 0) && m.pending[o.role] >= m.pendingBound(o.role) {
		m.emit(Refused{Type: o.pkt.Type, From: o.to, Reason: RefusedSendsFull})
		return
	}
	m.nextSend++
	o.id = firstSendTimer + m.nextSend
	if o.want == tsp.Any && delay == 0 {
		m.transmit(o)
		return
	}
	m.sends[o.id] = o
	m.pending[o.role]++
	if o.want != tsp.Any {
		m.bySeq[o.pkt.Seq] = o
	}
	if delay > 0 {
		m.setTimer(o.id, delay)
		return
	}
	m.sendCopy(o)
}

func (m *Machine) transmit(o *outgoing) {
	m.emit(Send{Packet: o.pkt, To: o.to, Broadcast: o.bcast, Reliable: o.want != tsp.Any})
}

// sendCopy sends the next copy and arms the wait for its answer.
func (m *Machine) sendCopy(o *outgoing) {
	if o.sent > 0 && o.pkt.Type == tsp.SetTime {
		m.restamp(o, m.cfg.Retransmit[o.sent-1])
	}
	m.transmit(o)
	o.sent++
	if o.want == tsp.Any {
		m.dropSend(o)
		return
	}
	m.setTimer(o.id, m.cfg.Retransmit[o.sent-1])
}

// restamp moves a SETTIME's time on by waited, the retransmission delay
// since its last copy: a copy sent because the earlier ones went
// unanswered (lost, or dropped by a receiver under a flood) must carry the
// time now, not the time of the first copy, or the slave that takes it is
// stepped back by every delay before it (60 ms at the third copy with the
// fast profile, 600 ms with BSD's). The copies share a sequence number,
// so a slave that took an earlier one ignores the rest. The delay is the
// timer's, not the host clock's difference: the master may have stepped
// its own clock in between.
func (m *Machine) restamp(o *outgoing, waited time.Duration) {
	if tv, err := tsp.TimeTimeval(o.pkt.Time.Time().Add(waited)); err == nil {
		o.pkt.Time = tv
	}
}

// sendTimer handles the timer of a pending send.
func (m *Machine) sendTimer(o *outgoing) {
	if o.want == tsp.Any || o.sent < len(m.cfg.Retransmit) {
		m.sendCopy(o)
		return
	}
	m.dropSend(o)
	if o.onFail != nil {
		o.onFail()
	}
}

func (m *Machine) dropSend(o *outgoing) {
	if _, ok := m.sends[o.id]; ok {
		m.pending[o.role]--
	}
	delete(m.sends, o.id)
	if m.bySeq[o.pkt.Seq] == o {
		delete(m.bySeq, o.pkt.Seq)
	}
	delete(m.timers, o.id)
}

// maxAnswers bounds the pending sends that answer others.
const maxAnswers = 1024

func (m *Machine) pendingBound(r role) int {
	if r == roleMaster {
		return m.cfg.MaxSlaves + 64
	}
	return maxAnswers
}

// matchAnswer completes the pending send that p answers, if any.
func (m *Machine) matchAnswer(p tsp.Packet, from netip.AddrPort) {
	if p.Type != tsp.Ack && p.Type != tsp.MasterAck {
		return
	}
	o := m.bySeq[p.Seq]
	if o == nil || o.want != p.Type || o.sent == 0 || (!o.bcast && o.to != from) {
		return
	}
	if o.role == roleProbe && !m.isTrusted(from) {
		// An untrusted master's answer does not end the search for a
		// master: it is suppressed, and probing goes on.
		return
	}
	m.dropSend(o)
	m.emit(CancelTimer{ID: o.id})
	if o.onAck != nil {
		o.onAck(from, p)
	}
}

// cancelSends drops the pending sends of a role, without their onFail.
func (m *Machine) cancelSends(r role) {
	for _, o := range sortedSends(m.sends) {
		if o.role == r {
			m.dropSend(o)
			m.emit(CancelTimer{ID: o.id})
		}
	}
}

// pendingCorrections is the master's unanswered ADJTIMEs and SETTIMEs,
// by slave, each list in the order they were queued.
func (m *Machine) pendingCorrections() map[string][]*outgoing {
	if m.pending[roleMaster] == 0 {
		return nil
	}
	out := map[string][]*outgoing{}
	for _, o := range sortedSends(m.sends) {
		if o.role == roleMaster && (o.pkt.Type == tsp.AdjTime || o.pkt.Type == tsp.SetTime) {
			out[o.peer] = append(out[o.peer], o)
		}
	}
	return out
}

// cancelSend drops a pending send without its onFail.
func (m *Machine) cancelSend(o *outgoing) {
	m.dropSend(o)
	m.emit(CancelTimer{ID: o.id})
}

// pendingTo reports whether a send of type t to the named peer is pending.
func (m *Machine) pendingTo(t tsp.Type, name string) bool {
	for _, o := range m.sends {
		if o.pkt.Type == t && o.peer == name {
			return true
		}
	}
	return false
}

func sortedSends(s map[TimerID]*outgoing) []*outgoing {
	out := make([]*outgoing, 0, len(s))
	for _, o := range s {
		out = append(out, o)
	}
	// Deterministic order: by id, that is in the order they were queued.
	slices.SortFunc(out, func(a, b *outgoing) int { return cmp.Compare(a.id, b.id) })
	return out
}

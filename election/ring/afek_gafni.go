package ring

import "math"

// AfekGafniSync is Afek and Gafni's synchronous election on a complete
// network ("Time and message bounds for election in synchronous and
// asynchronous complete networks", PODC 1985; Epema slides 1–11). A
// candidate sends CAPTURE(level, id) to 1, 2, 4, … of its untried links,
// one batch every two rounds, and dies unless every target ACKs; an
// ordinary process ACKs the lexicographically largest (level, id) it has
// seen, with level the rounds since the candidate started, so the largest
// id among the earliest starters wins. A captured node's own candidate
// stops (it can no longer win). No announcement: every node ends owned by
// the leader. Candidate messages are ≤ n·⌈log₂ n⌉+n and so are ACKs; the
// bound checked is 2n⌈log₂ n⌉+2n, in about 2⌈log₂ n⌉ rounds.
var AfekGafniSync = Algorithm{
	Name:      "afek-gafni-sync",
	Topology:  Complete,
	Elects:    Max,
	SyncOnly:  true,
	New:       func(c NodeConfig) Machine { return newAGSync(c) },
	Bound:     func(r BoundInput) float64 { return float64(2*r.N*ceilLog2(r.N) + 2*r.N) },
	BoundText: "2n⌈log₂ n⌉ + 2n (captures and acks; no announcement)",
	TimeBound: func(r BoundInput) float64 { return float64(4 * ceilLog2(r.N)) },
	TimeText:  "2⌈log₂ n⌉ rounds of 2 units",
}

type agSync struct {
	id      uint64
	links   int
	started bool
	// candidate
	cand    bool
	start   int64 // tick the candidate started
	next    int   // next untried link
	k, acks int   // last batch size, acks for it
	// ordinary: the owner is the candidate with the earliest start, then
	// the largest id (the lexicographic max of (level, id)).
	ownerStart int64
	owner      uint64
	inbox      []Incoming // CAPTUREs of this round
}

func newAGSync(c NodeConfig) *agSync {
	return &agSync{id: c.ID, links: c.N - 1, ownerStart: math.MaxInt64}
}

func (m *agSync) Step(ev Event) []Action {
	var out []Action
	switch ev.Kind {
	case Start:
		if m.started {
			return nil
		}
		m.started, m.cand, m.start = true, true, ev.Now
		m.ownerStart, m.owner = ev.Now, m.id
		m.k = 1
		out = append(out, send(0, Msg{Kind: KCapture, ID: m.id}))
		m.next = 1
	case Receive:
		m.started = true // woken: ordinary process only
		switch ev.Msg.Kind {
		case KCapture:
			m.inbox = append(m.inbox, Incoming{Port: ev.Port, Msg: ev.Msg})
		case KAck:
			m.acks++
		}
	case Tick:
		out = m.round(ev.Now)
	}
	if m.started && (len(m.inbox) > 0 || m.cand) {
		out = append(out, Action{Kind: SetTimer, At: ev.Now + 1})
	}
	return out
}

func (m *agSync) round(now int64) []Action {
	var out []Action
	// Ordinary: ack the largest capture received this round if it beats
	// the current owner. A message sent at tick now−1 with level L comes
	// from a candidate that started at now−1−L.
	best, bestStart, bestPort := uint64(0), int64(math.MaxInt64), Port(0)
	for _, x := range m.inbox {
		s := now - 1 - int64(x.Msg.Phase)
		if s < bestStart || (s == bestStart && x.Msg.ID > best) {
			best, bestStart, bestPort = x.Msg.ID, s, x.Port
		}
	}
	m.inbox = m.inbox[:0]
	if best != 0 && (bestStart < m.ownerStart || (bestStart == m.ownerStart && best > m.owner)) {
		m.ownerStart, m.owner = bestStart, best
		out = append(out, send(bestPort, Msg{Kind: KAck}))
		m.cand = false // captured: our candidate cannot win any more
	}
	// Candidate: acts every second round, when the acks are in.
	if !m.cand || (now-m.start)%2 != 0 || now == m.start {
		return out
	}
	if m.acks < m.k {
		m.cand = false
		return out
	}
	if m.next == m.links {
		m.cand = false
		return append(out, Action{Kind: Elected, Leader: m.id})
	}
	level := now - m.start
	m.k, m.acks = min(1<<(level/2), m.links-m.next), 0
	for range m.k {
		out = append(out, send(Port(m.next), Msg{Kind: KCapture, ID: m.id, Phase: uint32(level)}))
		m.next++
	}
	return out
}

// AfekGafniAsync is Afek and Gafni's asynchronous election on a complete
// network (Epema slides "asynchr. algorithm" 1–6): a candidate captures
// one node at a time with CAPTURE(level, id), level being how many it has
// captured. A node owned by someone else first forwards the attempt to its
// owner (OWNER, a kill attempt); the owner's candidate, if not larger,
// is killed and sends the attempt back, and the node then acks its new
// owner with OWNER. A candidate that has captured every other node is
// elected: O(n) time. The slides give n·log n messages up to constants; the
// bound checked, 4n(⌈log₂ n⌉+1), allows four messages per capture, no
// announcement.
var AfekGafniAsync = Algorithm{
	Name:      "afek-gafni-async",
	Topology:  Complete,
	Elects:    Any,
	New:       func(c NodeConfig) Machine { return &agAsync{id: c.ID, links: c.N - 1, father: noPort} },
	Bound:     func(r BoundInput) float64 { return float64(4 * r.N * (ceilLog2(r.N) + 1)) },
	BoundText: "4n(⌈log₂ n⌉+1): at most four messages per capture (no announcement)",
}

const (
	noPort   Port = math.MaxUint32
	selfPort Port = math.MaxUint32 - 1 // the node's own candidate process
)

type agAsync struct {
	id    uint64
	links int
	// candidate
	cand, killed bool
	level        uint32
	next         int // next untraversed link
	// ordinary
	olevel          uint32
	owner           uint64
	father, pfather Port
}

type agLocal struct {
	toCand bool
	port   Port
	msg    Msg
}

func less(l1 uint32, id1 uint64, l2 uint32, id2 uint64) bool {
	return l1 < l2 || (l1 == l2 && id1 < id2)
}

func (m *agAsync) Step(ev Event) []Action {
	var out []Action
	var work []agLocal
	switch ev.Kind {
	case Start:
		if m.cand || m.owner != 0 {
			return nil
		}
		// Our own ordinary process starts owned by our candidate, so that
		// capturing this node must go through killing it.
		m.cand, m.owner, m.father = true, m.id, selfPort
		return []Action{send(0, Msg{Kind: KCapture, ID: m.id})}
	case Receive:
		work = append(work, agLocal{toCand: ev.Msg.Kind == KOwner, port: ev.Port, msg: ev.Msg})
	}
	// Messages between a node's two processes stay local and are free.
	for len(work) > 0 {
		w := work[0]
		work = work[1:]
		var p Port
		var msg Msg
		if w.toCand {
			p, msg = m.candidate(w.port, w.msg, &out)
		} else {
			p, msg = m.ordinary(w.port, w.msg)
		}
		switch {
		case msg.Kind == 0:
		case p == selfPort:
			work = append(work, agLocal{toCand: msg.Kind == KOwner, port: selfPort, msg: msg})
		default:
			out = append(out, send(p, msg))
		}
	}
	return out
}

func (m *agAsync) candidate(from Port, in Msg, out *[]Action) (Port, Msg) {
	if !m.cand {
		// Only a node that started a candidate owns anyone, so only it
		// gets OWNER messages. A killed candidate still answers them, by
		// the level it died with.
		return noPort, Msg{}
	}
	switch {
	case in.ID == m.id && !m.killed:
		m.level++
		m.next++
		if m.next == m.links {
			*out = append(*out, Action{Kind: Elected, Leader: m.id})
			return noPort, Msg{}
		}
		return Port(m.next), Msg{Kind: KCapture, ID: m.id, Phase: m.level}
	case less(in.Phase, in.ID, m.level, m.id) || in.ID == m.id:
		return noPort, Msg{} // the attempt fails
	}
	m.killed = true
	return from, Msg{Kind: KCapture, ID: in.ID, Phase: in.Phase}
}

func (m *agAsync) ordinary(from Port, in Msg) (Port, Msg) {
	switch {
	case less(in.Phase, in.ID, m.olevel, m.owner):
		return noPort, Msg{}
	case in.Phase == m.olevel && in.ID == m.owner:
		// The old owner gave way: ack the new one.
		m.father = m.pfather
	default:
		m.pfather = from
		m.olevel, m.owner = in.Phase, in.ID
		if m.father == noPort {
			m.father = m.pfather
		}
	}
	return m.father, Msg{Kind: KOwner, ID: in.ID, Phase: in.Phase}
}

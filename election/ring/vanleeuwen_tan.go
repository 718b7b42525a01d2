package ring

// Inauguration is how van Leeuwen–Tan's algorithm E ends (§3, last
// remarks): the one node that reaches the inauguration state either claims
// the leadership itself, or elects the node whose id now sits in every ID
// register.
type Inauguration uint8

// Inauguration variants.
const (
	// InaugurateSelf: the inaugurating node is the leader and sends its id
	// round the ring. Correct with half-duplex links only: on full-duplex
	// links §4 lets two neighbours inaugurate at once.
	InaugurateSelf Inauguration = iota + 1
	// InaugurateRegister: the inaugurating node sends a flag (SLEEPWELL,
	// one byte) round the ring; the node whose id equals its ID register
	// is the leader. §4 assumes this variant.
	InaugurateRegister
)

// VanLeeuwenTan is algorithm E of van Leeuwen and Tan, "An improved
// upperbound for distributed election in bidirectional rings of
// processors" (RUU-CS-85-23, 1985), for bidirectional rings with no common
// sense of direction. Phase 0 exchanges ids; local minima turn active and
// chase the smaller neighbour with the larger neighbour's id. Observant
// nodes relay higher-phase messages and turn active on a collision (two
// same-phase messages from both sides) or when a same-phase message with a
// smaller value than their ID register arrives (§2). The number of active
// colours falls like the Fibonacci numbers (Lemma 3.7), so there are at
// most T phases with F_T ≤ n, ≈ 1.44·log₂ n, each of at most n messages
// after the 2n of phase 0 (Prop. 3.9, 4.2).
//
// FullDuplex selects the §4 modification: the q bit marks an active node's
// message for its first hop so that two same-phase messages crossing in a
// link act as the collision they would have been. Without it the links
// must be half-duplex (Config.HalfDuplex).
//
// The leader need not be the maximum. The bound checked is
// 2n + T(n)·n + (n+2): phase 0, T phases, and the inauguration message sent
// both ways until the two halves meet (two inaugurating neighbours in §4
// each send both ways).
func VanLeeuwenTan(fullDuplex bool, inaug Inauguration) Algorithm {
	if fullDuplex && inaug == InaugurateSelf {
		panic("ring: van Leeuwen–Tan on full-duplex links needs InaugurateRegister (§4)")
	}
	name := "vlt-half"
	if fullDuplex {
		name = "vlt-full"
	}
	if inaug == InaugurateSelf {
		name += "-self"
	} else {
		name += "-register"
	}
	return Algorithm{
		Name:       name,
		Topology:   Bidirectional,
		Elects:     Any,
		Announces:  true,
		HalfDuplex: !fullDuplex,
		Batches:    true,
		New: func(c NodeConfig) Machine {
			return &vanLeeuwenTan{id: c.ID, qbit: fullDuplex, inaug: inaug}
		},
		Bound: func(r BoundInput) float64 {
			return float64(2*r.N + fibPhases(r.N)*r.N + r.N + 2)
		},
		BoundText: "2n + T·n + n + 2 with T the largest index with F_T ≤ n (F_0 = F_1 = 1); inauguration included",
	}
}

// fibPhases is the largest T with F_T ≤ n, F_0 = F_1 = 1: Prop. 3.9's bound
// on the number of phases after phase 0.
func fibPhases(n int) int {
	a, b, t := 1, 1, 1 // F_{t-1}, F_t
	for a+b <= n {
		a, b = b, a+b
		t++
	}
	return t
}

type vanLeeuwenTan struct {
	id    uint64
	qbit  bool
	inaug Inauguration

	started bool
	got0    [2]bool
	nb      [2]uint64 // phase-0 ids of the neighbours
	ready   bool      // phase 0 finished
	early   []Incoming

	pnum uint32
	reg  uint64 // the ID register
	dir  Port
	// activeIn is the phase in which this node last turned active and sent
	// on dir; relayed/relayPort the phase and port of its last relay. The
	// q-bit rules of §4 need both.
	activeIn, relayed uint32
	isActive          bool
	relayPort         Port
	done              bool
}

func (m *vanLeeuwenTan) Step(ev Event) []Action {
	var out []Action
	if !m.started && (ev.Kind == Start || ev.Kind == Receive) {
		m.started = true
		e := Msg{Kind: KElect, ID: m.id}
		out = append(out, send(Left, e), send(Right, e))
	}
	if ev.Kind != Receive {
		return out
	}
	in := ev.Batch
	if in == nil {
		in = []Incoming{{Port: ev.Port, Msg: ev.Msg}}
	}
	var heads [2][]Msg
	var ends []Incoming
	for _, x := range in {
		if x.Msg.Kind == KSleepwell || x.Msg.Kind == KLeader {
			ends = append(ends, x) // after everything sent before it
			continue
		}
		if !m.got0[x.Port] {
			// FIFO: a neighbour's first message is its phase-0 id.
			m.got0[x.Port], m.nb[x.Port] = true, x.Msg.ID
			continue
		}
		if !m.ready {
			m.early = append(m.early, x)
			continue
		}
		heads[x.Port] = append(heads[x.Port], x.Msg)
	}
	if !m.ready && m.got0[Left] && m.got0[Right] {
		m.ready = true
		out = append(out, m.phase0()...)
		// Messages that overtook our phase 0 are handled now, as if they
		// had arrived together.
		for i := len(m.early) - 1; i >= 0; i-- {
			x := m.early[i]
			if x.Msg.Kind == KSleepwell || x.Msg.Kind == KLeader {
				ends = append([]Incoming{x}, ends...)
				continue
			}
			heads[x.Port] = append([]Msg{x.Msg}, heads[x.Port]...)
		}
		m.early = nil
	}
	if !m.ready {
		m.early = append(m.early, ends...)
		return out
	}
	// "Receive message(s) from one or both directions; discard any
	// message <v, p> with p < PNUM; discard any message that does not have
	// the highest p-value": everything that has arrived is looked at
	// before anything is sent, as half-duplex links require (a lower-phase
	// message acted on first would send over a link that holds a later
	// one).
	var got [2]*Msg
	for p := range heads {
		for i := range heads[p] {
			if g := &heads[p][i]; got[p] == nil || g.Phase >= got[p].Phase {
				got[p] = g
			}
		}
	}
	if !m.done && (got[Left] != nil || got[Right] != nil) {
		out = append(out, m.receive(got)...)
	}
	for _, x := range ends {
		out = append(out, m.inaugurated(x)...)
	}
	return out
}

// phase0 ends the initialisation: local minima turn active with the larger
// neighbour's id, aimed at the smaller one.
func (m *vanLeeuwenTan) phase0() []Action {
	l, r := m.nb[Left], m.nb[Right]
	m.reg = m.id
	if l == m.id { // n = 1: our own id came back from both sides
		return m.inaugurate()
	}
	if m.id < l && m.id < r {
		m.reg = max(l, r)
		m.dir = Left
		if r < l {
			m.dir = Right
		}
		// A phase-1 message that reached us from dir while we waited for
		// phase 0 and the one we are about to send there meet here,
		// before ours leaves: a collision at this node. (Sending ours
		// would cross it in the link, which half-duplex links forbid and
		// which, with the q bit, would make the neighbour count the same
		// meeting a second time.)
		for i, x := range m.early {
			if x.Port == m.dir && x.Msg.Kind == KElect {
				if x.Msg.Phase == 1 {
					m.early = append(m.early[:i], m.early[i+1:]...)
					m.pnum = 1
					return m.collide(x.Port, x.Msg.ID, x.Port.Opposite(), m.reg)
				}
				break
			}
		}
		return m.activate()
	}
	return nil
}

func (m *vanLeeuwenTan) activate() []Action {
	m.pnum++
	m.activeIn, m.isActive = m.pnum, true
	return []Action{send(m.dir, Msg{Kind: KElect, ID: m.reg, Phase: m.pnum, Q: m.qbit})}
}

func (m *vanLeeuwenTan) receive(got [2]*Msg) []Action {
	// Discard messages of old phases, then all but the highest phase.
	hi := m.pnum
	for _, g := range got {
		if g != nil && g.Phase > hi {
			hi = g.Phase
		}
	}
	var keep []Port
	for p, g := range got {
		if g != nil && g.Phase == hi {
			keep = append(keep, Port(p))
		}
	}
	switch len(keep) {
	case 1:
		p := keep[0]
		g := got[p]
		if g.Phase > m.pnum {
			m.pnum, m.reg, m.dir = g.Phase, g.ID, p.Opposite()
			m.isActive = false
			m.relayed, m.relayPort = g.Phase, m.dir
			return []Action{send(m.dir, Msg{Kind: KElect, ID: g.ID, Phase: g.Phase})}
		}
		if m.qbit {
			// §4 (i): our own phase message crossed a relayed one on the
			// link we sent it over; the relayed one is void.
			if !g.Q && m.isActive && m.activeIn == m.pnum && p == m.dir {
				return nil
			}
			// §4 (ii): an active neighbour's message crossed the one we
			// relayed to it: that was a collision here.
			if g.Q && !m.isActive && m.relayed == m.pnum && p == m.relayPort {
				return m.collide(p, g.ID, p.Opposite(), m.reg)
			}
		}
		switch {
		case g.ID == m.reg:
			return m.inaugurate()
		case g.ID < m.reg:
			m.dir = p
			return m.activate()
		}
		return nil // a larger value stops here
	case 2:
		m.pnum = hi
		return m.collide(Left, got[Left].ID, Right, got[Right].ID)
	}
	return nil
}

// collide: values a (from port pa) and b (from pb) met here in phase pnum.
func (m *vanLeeuwenTan) collide(pa Port, a uint64, pb Port, b uint64) []Action {
	if a == b {
		m.reg = a
		return m.inaugurate()
	}
	m.reg, m.dir = max(a, b), pa
	if b < a {
		m.dir = pb
	}
	return m.activate()
}

func (m *vanLeeuwenTan) inaugurate() []Action {
	m.done = true
	var out []Action
	var msg Msg
	if m.inaug == InaugurateSelf {
		out = append(out, Action{Kind: Elected, Leader: m.id})
		msg = Msg{Kind: KLeader, ID: m.id}
	} else {
		out = append(out, m.decide(m.reg))
		msg = Msg{Kind: KSleepwell}
	}
	// No orientation to agree on: announce both ways; the halves stop
	// where they meet.
	return append(out, send(Left, msg), send(Right, msg))
}

func (m *vanLeeuwenTan) decide(leader uint64) Action {
	if leader == m.id {
		return Action{Kind: Elected, Leader: leader}
	}
	return Action{Kind: LeaderIs, Leader: leader}
}

func (m *vanLeeuwenTan) inaugurated(x Incoming) []Action {
	if m.done {
		return nil
	}
	m.done = true
	leader := m.reg
	if x.Msg.Kind == KLeader {
		leader = x.Msg.ID
	}
	return []Action{m.decide(leader), send(x.Port.Opposite(), x.Msg)}
}

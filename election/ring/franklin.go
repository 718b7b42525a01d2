package ring

// Franklin is Franklin's election (CACM 25(5), 1982), "solution 2" in the
// Epema slides, on a bidirectional ring with no shared orientation: in each
// round every active node sends its id both ways, passive nodes relay, and
// an active node stays active only if its id beats both active neighbours'.
// At most half the actives survive a round, so there are at most
// ⌊log₂ n⌋+1 rounds of 2n messages; a node that gets its own id back is the
// maximum and sends one LEADER round the ring. The bound 2n⌊log₂ n⌋+3n
// counts that announcement.
var Franklin = Algorithm{
	Name:      "franklin",
	Topology:  Bidirectional,
	Elects:    Max,
	Announces: true,
	New:       func(c NodeConfig) Machine { return &franklin{id: c.ID, active: true} },
	Bound: func(r BoundInput) float64 {
		return float64(2*r.N*floorLog2(r.N) + 3*r.N)
	},
	BoundText: "2n⌊log₂ n⌋ + 3n, announcement included",
}

type franklin struct {
	id      uint64
	started bool
	active  bool
	done    bool
	// queue[p] holds ids that reached an active node on port p and wait
	// for their partner from the other side: FIFO links keep the rounds
	// apart without a round number on the wire.
	queue [2][]uint64
}

func (m *franklin) Step(ev Event) []Action {
	var out []Action
	if !m.started && (ev.Kind == Start || ev.Kind == Receive) {
		m.started = true
		out = append(out, m.sendBoth()...)
	}
	if ev.Kind != Receive || m.done {
		return out
	}
	switch ev.Msg.Kind {
	case KLeader:
		m.done = true
		if ev.Msg.ID == m.id {
			return out // home again
		}
		return append(out, Action{Kind: LeaderIs, Leader: ev.Msg.ID}, send(ev.Port.Opposite(), ev.Msg))
	case KElect:
		if !m.active {
			return append(out, send(ev.Port.Opposite(), ev.Msg))
		}
		m.queue[ev.Port] = append(m.queue[ev.Port], ev.Msg.ID)
		for m.active && len(m.queue[Left]) > 0 && len(m.queue[Right]) > 0 {
			l, r := m.queue[Left][0], m.queue[Right][0]
			m.queue[Left], m.queue[Right] = m.queue[Left][1:], m.queue[Right][1:]
			switch {
			case l == m.id || r == m.id:
				// Our id went all the way round: we are the only one left.
				m.done = true
				return append(out, Action{Kind: Elected, Leader: m.id}, send(Right, Msg{Kind: KLeader, ID: m.id}))
			case m.id > l && m.id > r:
				out = append(out, m.sendBoth()...)
			default:
				m.active = false
				// Anything already queued belongs to later rounds of other
				// nodes: pass it on as a relay would have.
				for _, p := range [...]Port{Left, Right} {
					for _, v := range m.queue[p] {
						out = append(out, send(p.Opposite(), Msg{Kind: KElect, ID: v}))
					}
					m.queue[p] = nil
				}
			}
		}
	}
	return out
}

func (m *franklin) sendBoth() []Action {
	e := Msg{Kind: KElect, ID: m.id}
	return []Action{send(Left, e), send(Right, e)}
}

package ring

// Peterson is Peterson's unidirectional election (ACM TOPLAS 4(4), 1982),
// the simulation of Franklin on a unidirectional ring (Epema slides): an
// active node learns its upstream active neighbour's temporary id (ELECT)
// and that neighbour's upstream one (PETERSON2), and survives with the
// middle id when it is the largest of the three. Each round costs 2n
// messages and halves the actives; the node whose own temporary id returns
// knows the maximum and sends one LEADER round the ring. The bound
// 2n⌊log₂ n⌋+3n counts that announcement. No time bound is checked: the
// slides' 2n−1 does not hold here (ids 1 3 2 4 5 6 7: detection after 16
// synchronous hops, not 13); see testdata/peterson-1324567.golden.
var Peterson = Algorithm{
	Name:      "peterson",
	Topology:  Unidirectional,
	Elects:    Max,
	Announces: true,
	New:       func(c NodeConfig) Machine { return &peterson{id: c.ID, tid: c.ID, active: true} },
	Bound: func(r BoundInput) float64 {
		return float64(2*r.N*floorLog2(r.N) + 3*r.N)
	},
	BoundText: "2n⌊log₂ n⌋ + 3n, announcement included",
}

type peterson struct {
	id, tid, ntid uint64
	started       bool
	active        bool
	second        bool // waiting for the round's PETERSON2
	done          bool
}

func (m *peterson) Step(ev Event) []Action {
	var out []Action
	if !m.started && (ev.Kind == Start || ev.Kind == Receive) {
		m.started = true
		out = append(out, send(Right, Msg{Kind: KElect, ID: m.tid}))
	}
	if ev.Kind != Receive || m.done {
		return out
	}
	v := ev.Msg.ID
	if ev.Msg.Kind == KLeader {
		m.done = true
		switch {
		case v == m.id:
			return append(out, Action{Kind: Elected, Leader: v}, send(Right, ev.Msg))
		case m.active:
			return append(out, Action{Kind: LeaderIs, Leader: v}) // the announcer: home again
		}
		return append(out, Action{Kind: LeaderIs, Leader: v}, send(Right, ev.Msg))
	}
	if !m.active {
		return append(out, send(Right, ev.Msg))
	}
	switch {
	case ev.Msg.Kind == KElect && !m.second:
		if v == m.tid {
			// Our temporary id went round: it is the maximum. Tell
			// everyone, the owner of that id included.
			if v == m.id {
				m.done = true
				return append(out, Action{Kind: Elected, Leader: v}, send(Right, Msg{Kind: KLeader, ID: v}))
			}
			return append(out, send(Right, Msg{Kind: KLeader, ID: v}))
		}
		m.ntid, m.second = v, true
		return append(out, send(Right, Msg{Kind: KPeterson2, ID: max(m.tid, v)}))
	case ev.Msg.Kind == KPeterson2 && m.second:
		m.second = false
		// v = max(ntid, its upstream id), so ntid ≥ v means ntid beats both
		// (equal, not greater, also covers n = 2 where that upstream is us).
		if m.ntid > m.tid && m.ntid >= v {
			m.tid = m.ntid
			return append(out, send(Right, Msg{Kind: KElect, ID: m.tid}))
		}
		m.active = false
	}
	return out
}

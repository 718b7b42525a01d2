package ring

// ChangRoberts is Chang and Roberts' election (CACM 22(5), 1979) on a
// unidirectional ring: a node forwards only ids larger than its own, so
// only the maximum comes home. Election messages are at most n(n+1)/2, met
// exactly when the ids decrease along the direction of travel (see
// DescendingIDs) and n·H_n ≈ 0.69·n·log₂ n on average over arrangements.
// The maximum then sends one LEADER message round the ring: n more, which
// the bound counts.
var ChangRoberts = Algorithm{
	Name:      "chang-roberts",
	Topology:  Unidirectional,
	Elects:    Max,
	Announces: true,
	Quadratic: true,
	New:       func(c NodeConfig) Machine { return &changRoberts{id: c.ID} },
	Bound:     func(r BoundInput) float64 { return float64(r.N*(r.N+1)/2 + r.N) },
	BoundText: "n(n+1)/2 election + n announcement",
	TimeBound: func(r BoundInput) float64 { return float64(2 * r.N) },
	TimeText:  "2n: the maximum's tour, then the announcement's",
}

type changRoberts struct {
	id   uint64
	sent bool // own id sent, or no longer worth sending
	done bool
}

func (m *changRoberts) Step(ev Event) []Action {
	if m.done {
		return nil
	}
	switch ev.Kind {
	case Start:
		if !m.sent {
			m.sent = true
			return []Action{send(Right, Msg{Kind: KElect, ID: m.id})}
		}
	case Receive:
		v := ev.Msg.ID
		switch ev.Msg.Kind {
		case KElect:
			switch {
			case v > m.id:
				m.sent = true // a larger id is out: ours could never win
				return []Action{send(Right, ev.Msg)}
			case v < m.id && !m.sent:
				m.sent = true
				return []Action{send(Right, Msg{Kind: KElect, ID: m.id})}
			case v == m.id:
				return []Action{{Kind: Elected, Leader: m.id}, send(Right, Msg{Kind: KLeader, ID: m.id})}
			}
		case KLeader:
			if v == m.id {
				m.done = true // the announcement came home
				return nil
			}
			m.done = true
			return []Action{{Kind: LeaderIs, Leader: v}, send(Right, ev.Msg)}
		}
	}
	return nil
}

// DescendingIDs is Chang and Roberts' worst case: ids n, n−1, …, 1 in the
// direction of travel, so id k travels k hops before it meets a larger one.
func DescendingIDs(n int) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(n - i)
	}
	return ids
}

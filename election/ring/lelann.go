package ring

// LeLann is Le Lann's election (Information Processing 77, 1977) on a
// unidirectional ring: every node sends its id round the whole ring and
// every node forwards every id, so when a node's own id returns it has seen
// all ids and knows the maximum. Exactly n² messages; there is no separate
// announcement because every node decides for itself.
var LeLann = Algorithm{
	Name:      "lelann",
	Topology:  Unidirectional,
	Elects:    Max,
	Announces: true,
	Quadratic: true,
	New:       func(c NodeConfig) Machine { return &leLann{id: c.ID, best: c.ID} },
	Bound:     func(r BoundInput) float64 { return float64(r.N * r.N) },
	BoundText: "n² (no announcement: every node decides itself)",
	TimeBound: func(r BoundInput) float64 { return float64(r.N) },
	TimeText:  "n: every id makes n hops of at most one unit",
}

type leLann struct {
	id, best uint64
	started  bool
	done     bool
}

func (m *leLann) Step(ev Event) []Action {
	var out []Action
	if !m.started && (ev.Kind == Start || ev.Kind == Receive) {
		// A node woken by a message joins first: its id must precede every
		// id it forwards, so that it has seen all of them when its own
		// comes back (FIFO links).
		m.started = true
		out = append(out, send(Right, Msg{Kind: KElect, ID: m.id}))
	}
	if ev.Kind != Receive || ev.Msg.Kind != KElect || m.done {
		return out
	}
	v := ev.Msg.ID
	if v != m.id {
		m.best = max(m.best, v)
		return append(out, send(Right, ev.Msg))
	}
	m.done = true
	if m.best == m.id {
		return append(out, Action{Kind: Elected, Leader: m.id})
	}
	return append(out, Action{Kind: LeaderIs, Leader: m.best})
}

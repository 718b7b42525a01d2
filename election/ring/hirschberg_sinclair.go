package ring

// HirschbergSinclair is Hirschberg and Sinclair's election (CACM 23(11),
// 1980), "solution 1" in the Epema slides, on a bidirectional ring with no
// shared orientation. In phase k a candidate sends a PROBE both ways for
// 2^k hops; a node with a larger id swallows it, otherwise the last node
// sends a REPLY back. A candidate with both replies goes on to phase k+1;
// one whose probe comes home from the far side is the maximum and sends one
// LEADER round the ring. Each phase costs at most 8n messages, so the
// total, the announcement included, is within 8n⌈log₂ n⌉+8n.
var HirschbergSinclair = Algorithm{
	Name:      "hirschberg-sinclair",
	Topology:  Bidirectional,
	Elects:    Max,
	Announces: true,
	New:       func(c NodeConfig) Machine { return &hirschbergSinclair{id: c.ID} },
	Bound: func(r BoundInput) float64 {
		return float64(8*r.N*ceilLog2(r.N) + 8*r.N)
	},
	BoundText: "8n⌈log₂ n⌉ + 8n, announcement included",
	// The maximum is never held up: phase k takes 2·2^k, the last phase's
	// probe n, the announcement n.
	TimeBound: func(r BoundInput) float64 {
		return float64(2*((1<<ceilLog2(r.N))-1) + 2*r.N)
	},
	TimeText: "2(2^⌈log₂ n⌉−1) + 2n: the maximum's phases, then the announcement",
}

type hirschbergSinclair struct {
	id        uint64
	started   bool
	candidate bool
	phase     uint32
	replies   int
	done      bool
}

func (m *hirschbergSinclair) probe() []Action {
	p := Msg{Kind: KProbe, ID: m.id, Phase: m.phase, Hops: 1}
	return []Action{send(Left, p), send(Right, p)}
}

func (m *hirschbergSinclair) Step(ev Event) []Action {
	var out []Action
	if !m.started && (ev.Kind == Start || ev.Kind == Receive) {
		m.started = true
		// A node woken by a larger id's probe would lose anyway; it joins
		// as a relay only.
		if ev.Kind == Start || ev.Msg.ID < m.id {
			m.candidate = true
			out = append(out, m.probe()...)
		}
	}
	if ev.Kind != Receive || m.done {
		return out
	}
	msg, p := ev.Msg, ev.Port
	switch msg.Kind {
	case KProbe:
		switch {
		case msg.ID == m.id:
			// Our probe passed every other node: we are the maximum. The
			// probe from the other side is swallowed here too.
			m.done = true
			return append(out, Action{Kind: Elected, Leader: m.id}, send(Right, Msg{Kind: KLeader, ID: m.id}))
		case msg.ID < m.id:
			return out
		}
		m.candidate = false
		if uint64(msg.Hops) < uint64(1)<<msg.Phase {
			msg.Hops++
			return append(out, send(p.Opposite(), msg))
		}
		return append(out, send(p, Msg{Kind: KReply, ID: msg.ID, Phase: msg.Phase}))
	case KReply:
		if msg.ID != m.id {
			return append(out, send(p.Opposite(), msg))
		}
		if !m.candidate || msg.Phase != m.phase {
			return out
		}
		if m.replies++; m.replies == 2 {
			m.replies = 0
			m.phase++
			out = append(out, m.probe()...)
		}
	case KLeader:
		m.done = true
		if msg.ID == m.id {
			return out
		}
		return append(out, Action{Kind: LeaderIs, Leader: msg.ID}, send(p.Opposite(), msg))
	}
	return out
}

package ring

// TimeSlice is the synchronous time-slice election (Epema slides "Election
// 3/3"; IMT slides "Timeslice algorithm"; Lynch, Distributed Algorithms
// §3.5) on a unidirectional ring of known size n whose nodes all start in
// round 0: rounds are cut into slices of n, and the node with id v, if it
// has heard nothing by round (v−1)·n, elects itself and sends a TOKEN with
// its id once round the ring. Only the minimum ever sends: exactly n
// messages, no other announcement; about l·n rounds for least id l. It
// uses the ids as numbers (not comparison-based), which is how it gets
// under the Ω(n log n) bound.
var TimeSlice = Algorithm{
	Name:      "timeslice",
	Topology:  Unidirectional,
	Elects:    Min,
	Announces: true,
	SyncOnly:  true,
	New:       func(c NodeConfig) Machine { return &timeSlice{id: c.ID, n: c.N} },
	Bound:     func(r BoundInput) float64 { return float64(r.N) },
	BoundText: "n: the token's one tour, which is also the announcement",
	TimeBound: func(r BoundInput) float64 { return float64(2*int(minID(r.IDs)-1)*r.N + r.N) },
	TimeText:  "(l−1)·n silent rounds of 2 units, then the token's n hops",
}

type timeSlice struct {
	id      uint64
	n       int
	started bool
	done    bool
}

func (m *timeSlice) Step(ev Event) []Action {
	switch {
	case m.done:
		return nil
	case ev.Kind == Start && !m.started:
		m.started = true
		slot := int64(m.id-1) * int64(m.n)
		return []Action{{Kind: SetTimer, At: ev.Now + slot}}
	case ev.Kind == Tick:
		m.done = true
		return []Action{{Kind: Elected, Leader: m.id}, send(Right, Msg{Kind: KToken, ID: m.id})}
	case ev.Kind == Receive && ev.Msg.Kind == KToken:
		m.done = true
		// Someone smaller spoke first: our slot never comes.
		return []Action{{Kind: SetTimer, At: -1}, {Kind: LeaderIs, Leader: ev.Msg.ID}, send(Right, ev.Msg)}
	}
	return nil
}

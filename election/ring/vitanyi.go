package ring

import (
	"math"
	"time"
)

// VitanyiTimer is the holding function f of Vitányi's protocol.
type VitanyiTimer uint8

// Holding functions.
const (
	// Pow2: f(i) = 2^i local time units (§2).
	Pow2 VitanyiTimer = iota + 1
	// Scaled: f(i) = ⌈u·2^i/m⌉, the protocol adjusted to the clocks (§3):
	// fewer than 5N messages.
	Scaled
	// MinimalTime: f(i,j) = ⌊2^(j−i)⌋ for message M_j at processor i (§3).
	// A message is only ever passed on when j < i, where this is 0: the
	// winner is never held and the election takes about three walk times,
	// at the price of Chang–Roberts-like message counts.
	MinimalTime
)

// Vitanyi is Vitányi's election in an Archimedean ring, "Distributed
// elections in an Archimedean ring of processors" (CWI IW 243/83, 1983):
// Le Lann's ring where each processor holds the election message M_j for
// f(j) of its own clock ticks, so that the smallest id's message overtakes
// and annihilates all others. It elects the minimum. Processors wake
// spontaneously or on a WAKEUP (N messages); the winner sends SLEEPWELL
// round the ring (N more).
//
// The bound checked for Pow2 and Scaled is the paper's (2) plus N:
// 3N + N·(u/m)·(f(l)+1)·Σ_i 1/f(i), l the least id, wakeups and sleepwell
// included. The extra N is one pass per election message: the Protocol
// sends M_i from its origin after one tick (timer ← 1), not f(i), and (1)
// does not count that hop; without it (2) fails, e.g. 145 > 143 messages
// for f = ⌈3·2^i⌉ on a synchronous ring of 33. For MinimalTime, whose f is
// 0 on every hop taken, the bound is N(N+1)/2 + 2N. Every run is also held
// to N² + 2N, since no M_j passes a processor twice.
//
// uOverM is the u/m the Scaled protocol is tuned to. With synchronous
// true (the Synchronous schedule: one tick per hop) the leader measures the
// ring size from the sleepwell's tour (§2, synchronous case) and reports it
// with a second Elected action.
func Vitanyi(f VitanyiTimer, uOverM float64, synchronous bool) Algorithm {
	name := map[VitanyiTimer]string{Pow2: "vitanyi-2^i", Scaled: "vitanyi-u2^i/m", MinimalTime: "vitanyi-mintime"}[f]
	if synchronous {
		name += "-sync"
	}
	hold := func(k uint64) int64 { return vitanyiHold(f, uOverM, k) }
	return Algorithm{
		Name:      name,
		Topology:  Unidirectional,
		Elects:    Min,
		Announces: true,
		SyncOnly:  synchronous,
		Quadratic: f == MinimalTime,
		New: func(c NodeConfig) Machine {
			return &vitanyi{id: c.ID, f: f, hold: hold, sync: synchronous}
		},
		Bound: func(r BoundInput) float64 {
			n := float64(r.N)
			universal := n*n + 2*n
			if f == MinimalTime {
				return min(universal, n*(n+1)/2+2*n)
			}
			l := minID(r.IDs)
			var sum float64
			for _, id := range r.IDs {
				sum += 1 / float64(hold(id))
			}
			return min(universal, 3*n+n*r.UOverM*(float64(hold(l))+1)*sum)
		},
		BoundText: "(2)+N: 3N + N(u/m)(f(l)+1)Σ1/f(i), capped at N²+2N; wakeups and sleepwell included",
		// §2: all awake within N·u, M_l's tour within N·u·f(l), the
		// sleepwell's within N·u, so N·u·(2^l+2); one u more for the
		// origin's first tick. Minimal time: three walks (§3, "3w").
		TimeBound: func(r BoundInput) float64 {
			n := float64(r.N)
			if f == MinimalTime {
				return r.U * (3*n + 1)
			}
			return r.U * (n*(float64(hold(minID(r.IDs)))+2) + 1)
		},
		TimeText: "u·(N(f(l)+2)+1) (§2), u·(3N+1) for minimal time (§3)",
	}
}

// maxHold keeps deadlines far in the future but clear of overflow; a
// message held that long is annihilated before it would move.
const maxHold = int64(1) << 40

func vitanyiHold(f VitanyiTimer, uOverM float64, k uint64) int64 {
	switch f {
	case Pow2:
		if k >= 40 {
			return maxHold
		}
		return int64(1) << k
	case Scaled:
		if k >= 40 {
			return maxHold
		}
		return min(maxHold, int64(math.Ceil(uOverM*float64(int64(1)<<k))))
	}
	return 0
}

type vstate uint8

const (
	asleep vstate = iota
	awake
	leaderWait // elected, waiting for the sleepwell to come home
	finished
)

type vitanyi struct {
	id    uint64
	f     VitanyiTimer
	hold  func(uint64) int64
	sync  bool
	state vstate

	k        uint64 // least id seen
	deadline int64  // tick at which M_k leaves
	sent     bool   // M_k already left (the timer went through 0)
	queue    []Msg  // read one per tick
	swSent   int64  // tick the sleepwell left (ring size)
}

func (m *vitanyi) Step(ev Event) []Action {
	var out []Action
	switch ev.Kind {
	case Start:
		if m.state == asleep {
			out = m.wake(ev.Now)
		}
	case Receive:
		switch {
		case ev.Msg.Kind == KWakeup:
			if m.state == asleep {
				out = m.wake(ev.Now)
			}
			return out // an awake processor needs no second wakeup
		case m.state == awake || m.state == leaderWait:
			m.queue = append(m.queue, ev.Msg)
		default:
			return nil
		}
	case Tick:
		out = m.tick(ev.Now)
	}
	return append(out, m.timer(ev.Now))
}

func (m *vitanyi) wake(now int64) []Action {
	m.state, m.k, m.deadline = awake, m.id, now+1
	return []Action{send(Right, Msg{Kind: KWakeup})}
}

// timer asks for the next tick that matters: the next one if a message
// waits to be read, else the deadline of M_k. Ticks in between would only
// count the timer down, which the deadline already does.
func (m *vitanyi) timer(now int64) Action {
	switch {
	case m.state == finished:
		return Action{Kind: SetTimer, At: -1}
	case len(m.queue) > 0:
		return Action{Kind: SetTimer, At: now + 1}
	case m.state == awake && !m.sent:
		return Action{Kind: SetTimer, At: max(m.deadline, now+1)}
	}
	return Action{Kind: SetTimer, At: -1}
}

func (m *vitanyi) tick(now int64) []Action {
	var in *Msg
	if len(m.queue) > 0 {
		in = &m.queue[0]
		m.queue = m.queue[1:]
	}
	if m.state == leaderWait {
		if in != nil && in.Kind == KSleepwell {
			m.state = finished
			if m.sync {
				return []Action{{Kind: Elected, Leader: m.id, RingSize: int(now - m.swSent)}}
			}
		}
		return nil
	}
	if m.state != awake {
		return nil
	}
	if in != nil {
		switch {
		case in.Kind == KSleepwell:
			m.state = finished
			return []Action{{Kind: LeaderIs, Leader: m.k}, send(Right, *in)}
		case in.ID == m.k:
			// Our message went round: every other one has been
			// annihilated (k = i here).
			m.state, m.swSent = leaderWait, now
			return []Action{{Kind: Elected, Leader: m.id}, send(Right, Msg{Kind: KSleepwell})}
		case in.ID < m.k:
			m.k, m.sent = in.ID, false
			if m.f == MinimalTime {
				m.deadline = now // f(i,j) = ⌊2^(j−i)⌋ = 0: pass it on now
			} else {
				m.deadline = now + m.hold(m.k)
			}
		}
		// in.ID > k: annihilated; the timer counts down as without a message.
	}
	if !m.sent && now >= m.deadline {
		m.sent = true
		return []Action{send(Right, Msg{Kind: KElect, ID: m.k})}
	}
	return nil
}

// VitanyiAdversary is §3's worst case: ids 1…n placed ascending in the
// direction of travel and processor i's tick u_i = 2^(n−i+1)·base, against
// f(i) = 2^i. The message count grows as n².
func VitanyiAdversary(n int, base time.Duration) (ids []uint64, ticks []time.Duration) {
	for i := 1; i <= n; i++ {
		ids = append(ids, uint64(i))
		ticks = append(ticks, base<<(n-i+1))
	}
	return ids, ticks
}

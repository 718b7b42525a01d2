package live

import (
	"container/heap"
	"fmt"
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/election/ring"
	"github.com/timed-project/timed/tsp"
)

// node is this daemon's node in the current election. Its events (start,
// ticks, deliveries) run from its own queue in the order of their time on
// the network clock, then of their scheduling, as the simulator runs
// them: a message sent at t is read at t + unit, so one sent at tick k
// reaches every node after its own tick k, however the nodes' timers
// happen to fire.
type node struct {
	id      uint16
	coord   netip.AddrPort // zero when we coordinate
	alg     ring.Algorithm
	me, n   int
	addrs   []netip.AddrPort
	m       ring.Machine
	t0      time.Time
	unit    time.Duration
	tick    time.Duration
	queue   queue
	events  uint64    // events scheduled so far: ties at one time run in this order
	logical time.Time // the time of the event being run: what sends are stamped with
	armed   time.Time // when the earliest pending wake-up is due; zero if none
	timer   uint64    // generation of the machine's pending tick
	sentTo  []uint64  // per-destination counters, for FIFO on the receiver
	next    []uint64  // per-sender: the counter expected next
	held    []map[uint64]incoming
	rep     Report
}

type incoming struct {
	port ring.Port
	msg  ring.Msg
	sent time.Duration // since T0, on the sender's (synchronised) clock
}

// queue is a node's pending events, earliest first.
type queue []event

type event struct {
	at  time.Time
	seq uint64
	fn  func()
}

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// start sets up this daemon's node for the election id the START c
// describes. from is the coordinator (zero if it is us); its own entry in
// the member list carries no address. A START is checked as anything
// from the network: an error says why it is refused. A duplicate of the
// current election's START is ignored.
func (r *Runner) start(c Ctl, from netip.AddrPort, id uint16) error {
	if nd := r.node; nd != nil && nd.id == id && nd.coord == from && nd.t0.UnixNano() == c.T0 {
		return nil
	}
	alg, err := Algorithm(c.Algorithm)
	if err != nil {
		return fmt.Errorf("ring start: %w", err)
	}
	n := len(c.Members)
	t0 := time.Unix(0, c.T0)
	switch {
	case n == 0 || n > maxMembers:
		err = fmt.Errorf("%d members: %w", n, errOutOfRange)
	case alg.Topology == ring.Complete && n < 2:
		err = fmt.Errorf("a complete network of %d: %w", n, errOutOfRange)
	case c.Unit <= 0 || c.Unit > maxUnit:
		err = fmt.Errorf("unit %v: %w", c.Unit, errOutOfRange)
	case t0.Sub(r.h.Now()).Abs() > timeout:
		err = fmt.Errorf("start %v, %v from now: %w", t0, t0.Sub(r.h.Now()), errOutOfRange)
	}
	if err != nil {
		return fmt.Errorf("ring start: %w", err)
	}
	nd := &node{id: id, coord: from, alg: alg, n: n, me: -1, t0: t0, unit: c.Unit, tick: 2 * c.Unit,
		sentTo: make([]uint64, n), next: make([]uint64, n), held: make([]map[uint64]incoming, n)}
	names, ids := make(map[string]bool, n), make(map[uint64]bool, n)
	for i, m := range c.Members {
		if names[m.Name] || ids[m.ID] || m.ID == 0 {
			return fmt.Errorf("ring start: member %d %q, id %d: %w", i, m.Name, m.ID, errNotDistinct)
		}
		names[m.Name], ids[m.ID] = true, true
		var a netip.AddrPort
		switch {
		case m.Name == r.name:
			nd.me = i
		case m.Addr == "":
			a = from // the coordinator
		default:
			if a, err = netip.ParseAddrPort(m.Addr); err != nil {
				return fmt.Errorf("ring start: member %q: %w", m.Name, err)
			}
		}
		nd.addrs = append(nd.addrs, a)
	}
	if nd.me < 0 {
		return fmt.Errorf("ring start: %w", errNotMember)
	}
	nd.m = alg.New(ring.NodeConfig{ID: c.Members[nd.me].ID, N: n})
	nd.rep.Index = nd.me
	r.node = nd
	r.schedule(nd, nd.t0, func() { r.step(nd, ring.Event{Kind: ring.Start, Now: 0}) })
	return nil
}

// schedule queues fn for when the network clock reads at.
func (r *Runner) schedule(nd *node, at time.Time, fn func()) {
	nd.events++
	heap.Push(&nd.queue, event{at: at, seq: nd.events, fn: fn})
	r.arm(nd)
}

// arm makes sure a wake-up is pending for the earliest event.
func (r *Runner) arm(nd *node) {
	if len(nd.queue) == 0 {
		return
	}
	next := nd.queue[0].at
	if !nd.armed.IsZero() && !next.Before(nd.armed) {
		return
	}
	nd.armed = next
	r.h.At(next, func() {
		if r.node != nd {
			return
		}
		nd.armed = time.Time{}
		now := r.h.Now()
		for len(nd.queue) > 0 && !nd.queue[0].at.After(now) && r.node == nd {
			e := heap.Pop(&nd.queue).(event)
			// The node lives at its events' scheduled times, never at the
			// moment a busy loop got round to them: a late timer must not
			// make a message look sent late. Kept monotonic in case the
			// network was slower than a unit.
			if e.at.After(nd.logical) {
				nd.logical = e.at
			}
			e.fn()
		}
		r.arm(nd)
	})
}

// now is the node's local clock in ticks since T0, at the event being run.
func (nd *node) now() int64 { return int64(nd.logical.Sub(nd.t0) / nd.tick) }

// step feeds the node one event and carries out its actions.
func (r *Runner) step(nd *node, ev ring.Event) {
	acts := nd.m.Step(ev)
	if tracing(r.log) {
		r.log.WithFields(logrus.Fields{"kind": ev.Kind, "port": ev.Port, "msg": ev.Msg.String(), "now": ev.Now, "actions": fmt.Sprint(acts)}).Trace("ring step")
	}
	for _, a := range acts {
		switch a.Kind {
		case ring.Send:
			r.send(nd, a.Port, a.Msg)
		case ring.SetTimer:
			nd.timer++ // replaces the pending tick, if any
			if a.At >= 0 {
				gen, at := nd.timer, a.At
				r.schedule(nd, nd.t0.Add(time.Duration(at)*nd.tick), func() {
					if nd.timer == gen {
						r.step(nd, ring.Event{Kind: ring.Tick, Now: at})
					}
				})
			}
		case ring.Elected, ring.LeaderIs:
			first := !nd.rep.Decided
			nd.rep.Decided, nd.rep.Leader = true, a.Leader
			nd.rep.Elected = nd.rep.Elected || a.Kind == ring.Elected
			if first || a.Kind == ring.Elected {
				rep := nd.rep
				r.toCoord(nd, &rep)
			}
		}
	}
}

func (r *Runner) toCoord(nd *node, rep *Report) {
	if !nd.coord.IsValid() {
		r.reported(nd.id, rep) // we coordinate
		return
	}
	r.sendCtl(nd.coord, nd.id, Ctl{Op: OpReport, Report: rep})
}

// send carries a message out on port p: to the neighbour that way on a
// ring, to the node p leads to on a complete network.
func (r *Runner) send(nd *node, p ring.Port, m ring.Msg) {
	var to int
	switch {
	case nd.alg.Topology == ring.Complete:
		to = (nd.me + 1 + int(p)) % nd.n
	case p == ring.Right:
		to = (nd.me + 1) % nd.n
	default:
		to = (nd.me - 1 + nd.n) % nd.n
	}
	nd.rep.Sent++
	nd.rep.Bits += m.Bits()
	nd.rep.LastSend = r.h.Now().UnixNano()
	h := header{from: nd.me, out: p, count: nd.sentTo[to], sent: max(nd.logical.Sub(nd.t0), 0)}
	nd.sentTo[to]++
	if to == nd.me { // a ring of one
		r.arrived(nd, h, m)
		return
	}
	pkt := tsp.ExtPacket{Kind: tsp.ExtRing, Seq: nd.id, Name: r.name, Payload: appendMsg(nil, h, m)}
	if err := r.h.Send(pkt, nd.addrs[to]); err != nil {
		r.log.WithError(err).Debug("ring message not sent")
	}
}

// inPort is the port a message sent by node from on its port out arrives
// on here: on a ring the opposite side (every node uses the same
// orientation, the member order); on a complete network the port that
// leads back to the sender.
func (nd *node) inPort(from int, out ring.Port) ring.Port {
	if nd.alg.Topology == ring.Complete {
		return ring.Port((from - nd.me - 1 + 2*nd.n) % nd.n)
	}
	return out.Opposite()
}

// message handles an ExtRing packet.
func (r *Runner) message(from netip.AddrPort, p tsp.ExtPacket) {
	nd := r.node
	if nd == nil || nd.id != p.Seq {
		r.drop(dropStray, from, fmt.Errorf("election %d: %w", p.Seq, errNotMember))
		return
	}
	h, m, err := parseMsg(p.Payload)
	if err == nil && (h.from >= nd.n || h.from == nd.me || int(h.out) >= max(nd.n, 2)) {
		err = fmt.Errorf("sender %d, port %d: %w", h.from, h.out, errOutOfRange)
	}
	if err != nil {
		r.drop(dropBadMessage, from, err)
		return
	}
	if h.count >= nd.next[h.from]+maxHeld || len(nd.queue) >= maxQueue {
		r.drop(dropFull, from, fmt.Errorf("message %d from %d, %d expected, %d events pending: %w",
			h.count, h.from, nd.next[h.from], len(nd.queue), errOutOfRange))
		return
	}
	r.arrived(nd, h, m)
}

// arrived puts a message into its link's order and schedules every
// message that is next in line for its reading time, send + unit (or now,
// if the network took longer than a unit).
func (r *Runner) arrived(nd *node, h header, m ring.Msg) {
	from := h.from
	if h.count < nd.next[from] {
		return // a duplicate
	}
	if nd.held[from] == nil {
		nd.held[from] = map[uint64]incoming{}
	}
	nd.held[from][h.count] = incoming{port: nd.inPort(from, h.out), msg: m, sent: h.sent}
	for {
		in, ok := nd.held[from][nd.next[from]]
		if !ok {
			return
		}
		delete(nd.held[from], nd.next[from])
		nd.next[from]++
		r.schedule(nd, nd.t0.Add(in.sent+nd.unit), func() {
			r.step(nd, ring.Event{Kind: ring.Receive, Port: in.port, Msg: in.msg, Now: nd.now()})
		})
	}
}

// tracing reports whether l writes trace logs, so that the hot path builds
// none when it does not. A logger of another kind gets none.
func tracing(l logrus.FieldLogger) bool {
	switch l := l.(type) {
	case *logrus.Logger:
		return l.IsLevelEnabled(logrus.TraceLevel)
	case *logrus.Entry:
		return l.Logger.IsLevelEnabled(logrus.TraceLevel)
	}
	return false
}

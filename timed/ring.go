package timed

import (
	"container/heap"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/election/ring"
	"github.com/timed-project/timed/election/ring/live"
	"github.com/timed-project/timed/tsp"
)

// Live ring elections (`timedc ring elect`): the election/ring machines run
// inside the daemons, their messages carried in tsp.ExtRing packets and
// the coordination in tsp.ExtRingCtl packets (JSON), so BSD daemons ignore
// all of it.
//
// The daemon timedc asks coordinates: it calls the roll (HELLO, answered
// by HERE), orders the members (the configured peer list's order, else by
// address), gives them the ids 1…n in a random order, and sends START with
// a start time T0 on the network clock, which the daemons keep
// synchronised: every node starts at T0 and its ticks are aligned to it,
// which is what the synchronous algorithms need. Nodes report decisions;
// once the leader is known the coordinator waits for the ring to fall
// quiet, collects every node's counts and answers timedc.

// The ring control protocol's types are live.Ctl and friends, shared
// with timedc.
type (
	ringCtl        = live.Ctl
	ringReportBody = live.Report
)

const (
	ringElect   = live.OpElect
	ringHello   = live.OpHello
	ringHere    = live.OpHere
	ringStart   = live.OpStart
	ringCollect = live.OpCollect
	ringReport  = live.OpReport
	ringResult  = live.OpResult
)

// Timing of the coordination, in real time.
const (
	ringRollCall = 500 * time.Millisecond // how long HERE answers are awaited
	ringTimeout  = 60 * time.Second       // an election that has not finished by then fails
	ringQuiet    = 200 * time.Millisecond // no ring message for this long: the election is over
)

// DefaultRingUnit bounds one link delay on a LAN; a tick is two units.
const DefaultRingUnit = 10 * time.Millisecond

// liveAlgorithm finds an algorithm that can run over the network.
func liveAlgorithm(name string) (ring.Algorithm, error) {
	var names []string
	for _, a := range ring.All() {
		if a.HalfDuplex {
			if a.Name == name {
				return a, fmt.Errorf("algorithm %s needs half-duplex links, and the network's are full duplex: use vlt-full-register", name)
			}
			continue
		}
		if a.Name == name {
			return a, nil
		}
		names = append(names, a.Name)
	}
	return ring.Algorithm{}, fmt.Errorf("unknown algorithm %q (one of: %s)", name, strings.Join(names, ", "))
}

// ringCoord is an election this daemon coordinates.
type ringCoord struct {
	id        uint16
	alg       ring.Algorithm
	unit      time.Duration
	requester netip.AddrPort
	reqSeq    uint16                    // the seq timedc asked with; the result echoes it
	here      map[string]netip.AddrPort // roll call answers by name
	members   []live.Member
	addrs     []netip.AddrPort // members' addresses; ours is the zero value
	t0        time.Time
	reports   map[int]*ringReportBody
	collect   time.Time // when COLLECT went out; zero before
	tries     int
	done      bool
}

// ringNode is this daemon's node in the current election. Its events
// (start, ticks, deliveries) run from its own queue in the order of their
// time on the network clock, then of their scheduling, as the simulator
// runs them: a message sent at t is read at t + unit, so one sent at tick
// k reaches every node after its own tick k, however the nodes' timers
// happen to fire.
type ringNode struct {
	id      uint16
	coord   netip.AddrPort
	alg     ring.Algorithm
	me, n   int
	addrs   []netip.AddrPort
	m       ring.Machine
	t0      time.Time
	unit    time.Duration
	tick    time.Duration
	queue   ringQueue
	events  uint64    // events scheduled so far: ties at one time run in this order
	logical time.Time // the time of the event being run: what sends are stamped with
	armed   time.Time // when the earliest pending wake-up is due; zero if none
	timer   uint64    // generation of the machine's pending tick
	sentTo  []uint64  // per-destination counters, for FIFO on the receiver
	next    []uint64  // per-sender: the counter expected next
	held    []map[uint64]ringIncoming
	rep     ringReportBody
}

type ringIncoming struct {
	from int
	port ring.Port
	msg  ring.Msg
	sent time.Duration // since T0, on the sender's (synchronised) clock
}

// ringQueue is a node's pending events, earliest first.
type ringQueue []ringEvent

type ringEvent struct {
	at  time.Time
	seq uint64
	fn  func()
}

func (q ringQueue) Len() int { return len(q) }
func (q ringQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q ringQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *ringQueue) Push(x any)   { *q = append(*q, x.(ringEvent)) }
func (q *ringQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// ringControl handles an ExtRingCtl packet.
func (d *Daemon) ringControl(r tsp.Received) {
	var c ringCtl
	if err := json.Unmarshal(r.Ext.Payload, &c); err != nil {
		d.log.WithError(err).WithField("from", r.From.String()).Debug("dropped: bad ring control")
		return
	}
	if r.Ext.Name == d.hostname && c.Op != ringElect {
		return // our own roll call or start, broadcast back to us
	}
	switch c.Op {
	case ringElect:
		d.ringElect(c, r.From, r.Ext.Seq)
	case ringHello:
		d.sendRingCtl(r.From, r.Ext.Seq, ringCtl{Op: ringHere})
	case ringHere:
		if rc := d.ring.coord; rc != nil && rc.id == r.Ext.Seq && rc.members == nil {
			rc.here[r.Ext.Name] = r.From
		}
	case ringStart:
		d.ringStart(c, r.From, r.Ext.Seq)
	case ringCollect:
		if rn := d.ring.node; rn != nil && rn.id == r.Ext.Seq {
			rep := rn.rep
			rep.Final = true
			d.sendRingCtl(r.From, rn.id, ringCtl{Op: ringReport, Report: &rep})
		}
	case ringReport:
		if c.Report != nil {
			d.ringReported(r.Ext.Seq, c.Report)
		}
	}
}

func (d *Daemon) sendRingCtl(to netip.AddrPort, id uint16, c ringCtl) {
	b, err := json.Marshal(c)
	if err == nil {
		err = d.tr.SendExt(&tsp.ExtPacket{Kind: tsp.ExtRingCtl, Seq: id, Name: d.hostname, Payload: b}, to)
	}
	if err != nil {
		d.log.WithError(err).WithField("op", c.Op).Warn("ring control not sent")
	}
}

// ringElect starts coordinating an election asked for by timedc.
func (d *Daemon) ringElect(c ringCtl, from netip.AddrPort, seq uint16) {
	fail := func(err error) {
		d.sendRingCtl(from, seq, ringCtl{Op: ringResult, Result: &live.Result{Algorithm: c.Algorithm, Error: err.Error()}})
	}
	alg, err := liveAlgorithm(c.Algorithm)
	if err != nil {
		fail(err)
		return
	}
	if rc := d.ring.coord; rc != nil && !rc.done {
		fail(errors.New("a ring election is already running here"))
		return
	}
	unit := c.Unit
	if unit <= 0 {
		unit = DefaultRingUnit
	}
	rc := &ringCoord{id: uint16(rand.Uint32()), alg: alg, unit: unit, requester: from, reqSeq: seq, here: map[string]netip.AddrPort{}}
	d.ring.coord = rc
	d.log.WithFields(logrus.Fields{"algorithm": alg.Name, "election": rc.id}).Info("ring election: calling the roll")
	b, _ := json.Marshal(ringCtl{Op: ringHello})
	if err := d.tr.BroadcastExt(&tsp.ExtPacket{Kind: tsp.ExtRingCtl, Seq: rc.id, Name: d.hostname, Payload: b}, d.network); err != nil {
		d.log.WithError(err).Warn("ring roll call not sent")
	}
	d.after(ringRollCall, func() { d.ringLaunch(rc) })
	d.after(ringTimeout, func() {
		if !rc.done {
			d.ringFinish(rc, fmt.Errorf("no result within %v", ringTimeout))
		}
	})
}

// ringLaunch orders the members who answered and starts them.
func (d *Daemon) ringLaunch(rc *ringCoord) {
	if rc.done || d.ring.coord != rc {
		return
	}
	type member struct {
		name string
		addr netip.AddrPort
	}
	ms := []member{{name: d.hostname}}
	for name, a := range rc.here {
		ms = append(ms, member{name, a})
	}
	own := d.ownAddr()
	order := func(m member) netip.AddrPort {
		if m.name == d.hostname {
			return own
		}
		return m.addr
	}
	if peers := d.tr.Peers(); len(peers) > 0 {
		// Peers mode: the configured list's order.
		slices.SortFunc(ms, func(a, b member) int {
			return slices.Index(peers, order(a)) - slices.Index(peers, order(b))
		})
	} else {
		slices.SortFunc(ms, func(a, b member) int { return order(a).Compare(order(b)) })
	}
	ids := rand.New(rand.NewPCG(uint64(rc.id), 0x71d)).Perm(len(ms))
	for i, m := range ms {
		rm := live.Member{Name: m.name, ID: uint64(ids[i] + 1)}
		if m.name != d.hostname {
			rm.Addr = m.addr.String()
		}
		rc.members = append(rc.members, rm)
		rc.addrs = append(rc.addrs, m.addr)
	}
	rc.reports = map[int]*ringReportBody{}
	rc.t0 = d.clock.Now().Add(max(200*time.Millisecond, 20*rc.unit))
	start := ringCtl{Op: ringStart, Algorithm: rc.alg.Name, Unit: rc.unit, Members: rc.members, T0: rc.t0.UnixNano()}
	if b, _ := json.Marshal(start); len(b) > tsp.MaxExtPayload {
		d.ringFinish(rc, fmt.Errorf("%d daemons do not fit one START packet", len(ms)))
		return
	}
	d.log.WithFields(logrus.Fields{"algorithm": rc.alg.Name, "election": rc.id, "members": len(ms)}).Info("ring election: starting")
	for i, a := range rc.addrs {
		if rc.members[i].Name == d.hostname {
			d.ringStart(start, netip.AddrPort{}, rc.id)
			continue
		}
		d.sendRingCtl(a, rc.id, start)
	}
}

// ownAddr is this daemon's address as the others see it: on its network,
// or, in peers mode, the peer entry that is one of this host's addresses
// on our port.
func (d *Daemon) ownAddr() netip.AddrPort {
	port := d.tr.LocalAddr().Port()
	peers := d.tr.Peers()
	if len(peers) == 0 {
		return netip.AddrPortFrom(d.network.Addr, port)
	}
	local := map[netip.Addr]bool{}
	if ifaddrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ifaddrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				local[p.Addr().Unmap()] = true
			}
		}
	}
	for _, p := range peers {
		if p.Port() == port && (local[p.Addr()] || p.Addr().IsLoopback()) {
			return p
		}
	}
	return netip.AddrPortFrom(netip.IPv4Unspecified(), port)
}

// ringStart sets up this daemon's node. from is the coordinator (zero if
// it is us); its own entry in the member list carries no address.
func (d *Daemon) ringStart(c ringCtl, from netip.AddrPort, id uint16) {
	alg, err := liveAlgorithm(c.Algorithm)
	if err != nil {
		d.log.WithError(err).Warn("ring start refused")
		return
	}
	n := len(c.Members)
	rn := &ringNode{id: id, coord: from, alg: alg, n: n, me: -1, t0: time.Unix(0, c.T0), unit: c.Unit, tick: 2 * c.Unit,
		sentTo: make([]uint64, n), next: make([]uint64, n), held: make([]map[uint64]ringIncoming, n)}
	for i, m := range c.Members {
		var a netip.AddrPort
		switch {
		case m.Name == d.hostname:
			rn.me = i
		case m.Addr == "":
			a = from // the coordinator
		default:
			if a, err = netip.ParseAddrPort(m.Addr); err != nil {
				d.log.WithError(err).Warn("ring start refused: bad member address")
				return
			}
		}
		rn.addrs = append(rn.addrs, a)
	}
	if rn.me < 0 || rn.tick <= 0 {
		d.log.Warn("ring start refused: we are not a member, or no unit")
		return
	}
	rn.m = alg.New(ring.NodeConfig{ID: c.Members[rn.me].ID, N: n})
	rn.rep.Index = rn.me
	d.ring.node = rn
	d.ringSchedule(rn, rn.t0, func() { d.ringStep(rn, ring.Event{Kind: ring.Start, Now: 0}) })
}

// ringSchedule queues fn for when the clock reads at.
func (d *Daemon) ringSchedule(rn *ringNode, at time.Time, fn func()) {
	rn.events++
	heap.Push(&rn.queue, ringEvent{at: at, seq: rn.events, fn: fn})
	d.ringArm(rn)
}

// ringArm makes sure a wake-up is pending for the earliest event.
func (d *Daemon) ringArm(rn *ringNode) {
	if len(rn.queue) == 0 {
		return
	}
	next := rn.queue[0].at
	if !rn.armed.IsZero() && !next.Before(rn.armed) {
		return
	}
	rn.armed = next
	d.after(max(next.Sub(d.clock.Now()), 0), func() {
		if d.ring.node != rn {
			return
		}
		rn.armed = time.Time{}
		now := d.clock.Now()
		for len(rn.queue) > 0 && !rn.queue[0].at.After(now) && d.ring.node == rn {
			e := heap.Pop(&rn.queue).(ringEvent)
			// The node lives at its events' scheduled times, never at the
			// moment a busy loop got round to them: a late timer must not
			// make a message look sent late. Kept monotonic in case the
			// network was slower than a unit.
			if e.at.After(rn.logical) {
				rn.logical = e.at
			}
			e.fn()
		}
		d.ringArm(rn)
	})
}

// ringNow is the node's local clock in ticks since T0, at the event being run.
func (d *Daemon) ringNow(rn *ringNode) int64 {
	return int64(rn.logical.Sub(rn.t0) / rn.tick)
}

// ringStep feeds the node one event and carries out its actions.
func (d *Daemon) ringStep(rn *ringNode, ev ring.Event) {
	acts := rn.m.Step(ev)
	if d.log.IsLevelEnabled(logrus.TraceLevel) {
		d.log.WithFields(logrus.Fields{"kind": ev.Kind, "port": ev.Port, "msg": ev.Msg.String(), "now": ev.Now, "actions": fmt.Sprint(acts)}).Trace("ring step")
	}
	for _, a := range acts {
		switch a.Kind {
		case ring.Send:
			d.ringSend(rn, a.Port, a.Msg)
		case ring.SetTimer:
			rn.timer++ // replaces the pending tick, if any
			if a.At >= 0 {
				gen, at := rn.timer, a.At
				d.ringSchedule(rn, rn.t0.Add(time.Duration(at)*rn.tick), func() {
					if rn.timer == gen {
						d.ringStep(rn, ring.Event{Kind: ring.Tick, Now: at})
					}
				})
			}
		case ring.Elected, ring.LeaderIs:
			first := !rn.rep.Decided
			rn.rep.Decided, rn.rep.Leader = true, a.Leader
			rn.rep.Elected = rn.rep.Elected || a.Kind == ring.Elected
			if first || a.Kind == ring.Elected {
				rep := rn.rep
				d.ringToCoord(rn, ringCtl{Op: ringReport, Report: &rep})
			}
		}
	}
}

func (d *Daemon) ringToCoord(rn *ringNode, c ringCtl) {
	if !rn.coord.IsValid() {
		d.ringReported(rn.id, c.Report) // we coordinate
		return
	}
	d.sendRingCtl(rn.coord, rn.id, c)
}

// Ring message payload: the sender's index and out-port (so the receiver
// knows the port it arrived on, even on a ring of two), a counter per
// destination (so the receiver keeps the link FIFO even if UDP reorders),
// the send time since T0 (so it is read at send + unit, as in the
// simulator), then the message.
func (d *Daemon) ringSend(rn *ringNode, p ring.Port, m ring.Msg) {
	var to int
	switch {
	case rn.alg.Topology == ring.Complete:
		to = (rn.me + 1 + int(p)) % rn.n
	case p == ring.Right:
		to = (rn.me + 1) % rn.n
	default:
		to = (rn.me - 1 + rn.n) % rn.n
	}
	rn.rep.Sent++
	rn.rep.Bits += m.Bits()
	rn.rep.LastSend = d.clock.Now().UnixNano()
	sent := max(rn.logical.Sub(rn.t0), 0)
	if to == rn.me { // a ring of one
		d.ringArrived(rn, rn.me, rn.sentTo[to], ringIncoming{from: rn.me, port: d.ringInPort(rn, rn.me, p), msg: m, sent: sent})
		rn.sentTo[to]++
		return
	}
	payload := binary.AppendUvarint(nil, uint64(rn.me))
	payload = binary.AppendUvarint(payload, uint64(p))
	payload = binary.AppendUvarint(payload, rn.sentTo[to])
	payload = binary.AppendUvarint(payload, uint64(sent))
	payload = append(payload, m.Marshal()...)
	rn.sentTo[to]++
	if err := d.tr.SendExt(&tsp.ExtPacket{Kind: tsp.ExtRing, Seq: rn.id, Name: d.hostname, Payload: payload}, rn.addrs[to]); err != nil {
		d.log.WithError(err).Debug("ring message not sent")
	}
}

// ringInPort is the port a message sent by node from on its port out
// arrives on here: on a ring the opposite side (every node uses the same
// orientation, the member order); on a complete network the port that
// leads back to the sender.
func (d *Daemon) ringInPort(rn *ringNode, from int, out ring.Port) ring.Port {
	if rn.alg.Topology == ring.Complete {
		return ring.Port((from - rn.me - 1 + 2*rn.n) % rn.n)
	}
	return out.Opposite()
}

// ringMessage handles an ExtRing packet.
func (d *Daemon) ringMessage(r tsp.Received) {
	rn := d.ring.node
	if rn == nil || rn.id != r.Ext.Seq {
		d.log.WithField("from", r.From.String()).Debug("dropped: ring message for no election of ours")
		return
	}
	b := r.Ext.Payload
	var hdr [4]uint64
	for i := range hdr {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			d.log.WithField("from", r.From.String()).Debug("dropped: malformed ring message")
			return
		}
		hdr[i], b = v, b[n:]
	}
	from, out, count, sent := hdr[0], hdr[1], hdr[2], time.Duration(hdr[3])
	m, err := ring.Unmarshal(b)
	if err != nil || from >= uint64(rn.n) || int(from) == rn.me || out >= uint64(max(rn.n, 2)) || sent < 0 {
		d.log.WithField("from", r.From.String()).Debug("dropped: malformed ring message")
		return
	}
	d.ringArrived(rn, int(from), count, ringIncoming{from: int(from), port: d.ringInPort(rn, int(from), ring.Port(out)), msg: m, sent: sent})
}

// ringArrived puts a message into its link's order and schedules every
// message that is next in line for its reading time, send + unit (or now,
// if the network took longer than a unit).
func (d *Daemon) ringArrived(rn *ringNode, from int, count uint64, in ringIncoming) {
	if count < rn.next[from] {
		return // a duplicate
	}
	if rn.held[from] == nil {
		rn.held[from] = map[uint64]ringIncoming{}
	}
	rn.held[from][count] = in
	for {
		msg, ok := rn.held[from][rn.next[from]]
		if !ok {
			return
		}
		delete(rn.held[from], rn.next[from])
		rn.next[from]++
		d.ringSchedule(rn, rn.t0.Add(msg.sent+rn.unit), func() {
			d.ringStep(rn, ring.Event{Kind: ring.Receive, Port: msg.port, Msg: msg.msg, Now: d.ringNow(rn)})
		})
	}
}

// ringReported takes a node's report. Once the leader is known (and, for
// algorithms that announce, every node knows it), the coordinator waits
// for the ring to fall quiet and collects the final counts.
func (d *Daemon) ringReported(id uint16, rep *ringReportBody) {
	rc := d.ring.coord
	if rc == nil || rc.id != id || rc.done || rep.Index < 0 || rep.Index >= len(rc.members) {
		return
	}
	r := *rep
	rc.reports[rep.Index] = &r
	if !rc.collect.IsZero() {
		d.ringMaybeFinish(rc)
		return
	}
	decided, leader := 0, false
	for _, r := range rc.reports {
		if r.Decided {
			decided++
		}
		leader = leader || r.Elected
	}
	if leader && (!rc.alg.Announces || decided == len(rc.members)) {
		rc.collect = time.Now() // marks the wait; COLLECT goes out after it
		d.after(ringQuiet, func() { d.ringCollect(rc) })
	}
}

func (d *Daemon) ringCollect(rc *ringCoord) {
	if rc.done {
		return
	}
	rc.tries++
	rc.collect = time.Now()
	for i := range rc.reports {
		if rc.reports[i] != nil {
			rc.reports[i].Final = false
		}
	}
	for i, a := range rc.addrs {
		if rc.members[i].Name == d.hostname {
			if rn := d.ring.node; rn != nil && rn.id == rc.id {
				rep := rn.rep
				rep.Final = true
				d.ringReported(rc.id, &rep)
			}
			continue
		}
		d.sendRingCtl(a, rc.id, ringCtl{Op: ringCollect})
	}
}

// ringMaybeFinish ends the election once every node has answered COLLECT
// and none has sent for a quiet period; otherwise it collects again.
func (d *Daemon) ringMaybeFinish(rc *ringCoord) {
	var last int64
	for i := range rc.members {
		r := rc.reports[i]
		if r == nil || !r.Final {
			return // still waiting for answers
		}
		last = max(last, r.LastSend)
	}
	if quiet := d.clock.Now().Sub(time.Unix(0, last)); quiet < ringQuiet && rc.tries < 10 {
		d.after(ringQuiet, func() { d.ringCollect(rc) })
		return
	}
	d.ringFinish(rc, nil)
}

// agreement checks the outcome the way the simulator does: exactly one
// node elected, and, where the algorithm announces, every node naming it.
func (rc *ringCoord) agreement(elected int, leader uint64) error {
	if elected != 1 {
		return fmt.Errorf("%d nodes say they are the leader", elected)
	}
	if !rc.alg.Announces {
		return nil
	}
	for i := range rc.members {
		if r := rc.reports[i]; r == nil || !r.Decided || r.Leader != leader {
			return fmt.Errorf("%s does not name the leader (id %d)", rc.members[i].Name, leader)
		}
	}
	return nil
}

// ringFinish answers timedc with the result, or with err.
func (d *Daemon) ringFinish(rc *ringCoord, err error) {
	if rc.done {
		return
	}
	rc.done = true
	res := &live.Result{Algorithm: rc.alg.Name, N: len(rc.members), Members: rc.members, BoundText: rc.alg.BoundText}
	var ids []uint64
	for _, m := range rc.members {
		ids = append(ids, m.ID)
	}
	// Vitányi's u and u/m in units: a tick is two, a link delay at most one
	// more; synchronous rounds read a hop at the next tick.
	in := ring.BoundInput{N: len(ids), IDs: ids, Synchronous: rc.alg.SyncOnly, UOverM: 1.5, U: 3}
	if rc.alg.SyncOnly {
		in.UOverM, in.U = 1, 2
	}
	res.Bound = rc.alg.Bound(in)
	var last int64
	elected := 0
	for i, r := range rc.reports {
		res.Messages += r.Sent
		res.Bits += r.Bits
		last = max(last, r.LastSend)
		if r.Elected {
			elected++
			res.Leader, res.LeaderID = rc.members[i].Name, r.Leader
		}
	}
	if last > 0 {
		res.Seconds = time.Unix(0, last).Sub(rc.t0).Seconds()
	}
	if err == nil {
		err = rc.agreement(elected, res.LeaderID)
	}
	if err != nil {
		res.Error = err.Error()
	}
	d.log.WithFields(logrus.Fields{"algorithm": res.Algorithm, "leader": res.Leader, "messages": res.Messages,
		"bits": res.Bits, "n": res.N, "error": res.Error}).Info("ring election finished")
	d.sendRingCtl(rc.requester, rc.reqSeq, ringCtl{Op: ringResult, Result: res})
}

package live

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/election/ring"
	"github.com/timed-project/timed/tsp"
)

// The coordinator is the daemon timedc asks. It calls the roll (HELLO,
// answered by HERE), orders the members (the configured peer list's
// order, else by address), gives them the ids 1…n in a random order, and
// sends START with a start time T0 on the network clock, which the
// daemons keep synchronised: every node starts at T0 and its ticks are
// aligned to it, which is what the synchronous algorithms need. Nodes
// report decisions; once the leader is known the coordinator waits for the
// ring to fall quiet, collects every node's counts and answers timedc.

// coord is an election this daemon coordinates.
type coord struct {
	id         uint16
	alg        ring.Algorithm
	unit       time.Duration
	reply      func(Result)
	here       map[string]netip.AddrPort // roll call answers by name
	members    []Member
	addrs      []netip.AddrPort // members' addresses; ours is the zero value
	t0         time.Time
	reports    map[int]*Report
	collecting bool // the leader is known: waiting for quiet, then COLLECT
	tries      int
	done       bool
}

// Elect starts coordinating an election of the named algorithm among the
// daemons that answer the roll call, with links of at most unit (0:
// DefaultUnit). reply gets the result, or the error, once: at once or
// from a later call into the runner. Elect reports whether the election
// started (false: reply has had the error).
func (r *Runner) Elect(algorithm string, unit time.Duration, reply func(Result)) bool {
	fail := func(err error) bool {
		reply(Result{Algorithm: algorithm, Error: err.Error()})
		return false
	}
	alg, err := Algorithm(algorithm)
	if err != nil {
		return fail(err)
	}
	if rc := r.coord; rc != nil && !rc.done {
		return fail(errors.New("a ring election is already running here"))
	}
	if unit <= 0 {
		unit = DefaultUnit
	}
	if unit > maxUnit {
		return fail(fmt.Errorf("unit %v: at most %v (the start is 20 units away, and an election has %v)", unit, maxUnit, timeout))
	}
	rc := &coord{id: uint16(r.rng.Uint32()), alg: alg, unit: unit, reply: reply, here: map[string]netip.AddrPort{}}
	r.coord, r.asked = rc, electReq{}
	r.log.WithFields(logrus.Fields{"algorithm": alg.Name, "election": rc.id}).Info("ring election: calling the roll")
	hello, err := ctlPacket(r.name, rc.id, Ctl{Op: OpHello})
	if err == nil {
		err = r.h.Broadcast(hello)
	}
	if err != nil {
		r.log.WithError(err).Warn("ring roll call not sent")
	}
	r.after(rollCall, func() { r.launch(rc) })
	r.after(timeout, func() {
		if !rc.done {
			r.finish(rc, fmt.Errorf("no result within %v", timeout))
		}
	})
	return true
}

// launch orders the members who answered and starts them.
func (r *Runner) launch(rc *coord) {
	if rc.done || r.coord != rc {
		return
	}
	type member struct {
		name string
		addr netip.AddrPort
	}
	ms := []member{{name: r.name}}
	for name, a := range rc.here {
		ms = append(ms, member{name, a})
	}
	if rc.alg.Topology == ring.Complete && len(ms) < 2 {
		r.finish(rc, fmt.Errorf("%s runs on a complete network of two daemons or more, and no other answered the roll call", rc.alg.Name))
		return
	}
	own := r.h.Addr()
	order := func(m member) netip.AddrPort {
		if m.name == r.name {
			return own
		}
		return m.addr
	}
	if peers := r.h.Peers(); len(peers) > 0 {
		// Peers mode: the configured list's order.
		slices.SortFunc(ms, func(a, b member) int {
			return slices.Index(peers, order(a)) - slices.Index(peers, order(b))
		})
	} else {
		slices.SortFunc(ms, func(a, b member) int { return order(a).Compare(order(b)) })
	}
	ids := rand.New(rand.NewPCG(uint64(rc.id), 0x71d)).Perm(len(ms))
	for i, m := range ms {
		rm := Member{Name: m.name, ID: uint64(ids[i] + 1)}
		if m.name != r.name {
			rm.Addr = m.addr.String()
		}
		rc.members = append(rc.members, rm)
		rc.addrs = append(rc.addrs, m.addr)
	}
	rc.reports = map[int]*Report{}
	rc.t0 = r.h.Now().Add(max(200*time.Millisecond, 20*rc.unit))
	start := Ctl{Op: OpStart, Algorithm: rc.alg.Name, Unit: rc.unit, Members: rc.members, T0: rc.t0.UnixNano()}
	if b, _ := json.Marshal(start); len(b) > tsp.MaxExtPayload {
		r.finish(rc, fmt.Errorf("%d daemons do not fit one START packet", len(ms)))
		return
	}
	r.log.WithFields(logrus.Fields{"algorithm": rc.alg.Name, "election": rc.id, "members": len(ms)}).Info("ring election: starting")
	for i, a := range rc.addrs {
		if rc.members[i].Name == r.name {
			if err := r.start(start, netip.AddrPort{}, rc.id); err != nil {
				r.finish(rc, err)
				return
			}
			continue
		}
		r.sendCtl(a, rc.id, start)
	}
}

// reported takes a node's report. Once the leader is known (and, for
// algorithms that announce, every node knows it), the coordinator waits
// for the ring to fall quiet and collects the final counts.
func (r *Runner) reported(id uint16, rep *Report) {
	rc := r.coord
	if rc == nil || rc.id != id || rc.done || rep.Index < 0 || rep.Index >= len(rc.members) {
		return
	}
	kept := *rep
	rc.reports[rep.Index] = &kept
	if rc.collecting {
		r.maybeFinish(rc)
		return
	}
	decided, leader := 0, false
	for _, rp := range rc.reports {
		if rp.Decided {
			decided++
		}
		leader = leader || rp.Elected
	}
	if leader && (!rc.alg.Announces || decided == len(rc.members)) {
		rc.collecting = true
		r.after(quiet, func() { r.collect(rc) })
	}
}

// collect asks every member for its final counts.
func (r *Runner) collect(rc *coord) {
	if rc.done {
		return
	}
	rc.tries++
	for _, rp := range rc.reports {
		rp.Final = false
	}
	for i, a := range rc.addrs {
		if rc.members[i].Name == r.name {
			if nd := r.node; nd != nil && nd.id == rc.id {
				rep := nd.rep
				rep.Final = true
				r.reported(rc.id, &rep)
			}
			continue
		}
		r.sendCtl(a, rc.id, Ctl{Op: OpCollect})
	}
}

// maybeFinish ends the election once every node has answered COLLECT and
// none has sent for a quiet period; otherwise it collects again.
func (r *Runner) maybeFinish(rc *coord) {
	var last int64
	for i := range rc.members {
		rp := rc.reports[i]
		if rp == nil || !rp.Final {
			return // still waiting for answers
		}
		last = max(last, rp.LastSend)
	}
	if r.h.Now().Sub(time.Unix(0, last)) < quiet && rc.tries < 10 {
		r.after(quiet, func() { r.collect(rc) })
		return
	}
	r.finish(rc, nil)
}

// agreement checks the outcome the way the simulator does: exactly one
// node elected, and, where the algorithm announces, every node naming it.
func (rc *coord) agreement(elected int, leader uint64) error {
	if elected != 1 {
		return fmt.Errorf("%d nodes say they are the leader", elected)
	}
	if !rc.alg.Announces {
		return nil
	}
	for i := range rc.members {
		if rp := rc.reports[i]; rp == nil || !rp.Decided || rp.Leader != leader {
			return fmt.Errorf("%s does not name the leader (id %d)", rc.members[i].Name, leader)
		}
	}
	return nil
}

// finish answers timedc with the result, or with err.
func (r *Runner) finish(rc *coord, err error) {
	if rc.done {
		return
	}
	rc.done = true
	res := Result{Algorithm: rc.alg.Name, N: len(rc.members), Members: rc.members, BoundText: rc.alg.BoundText}
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
	for i, rp := range rc.reports {
		res.Messages += rp.Sent
		res.Bits += rp.Bits
		last = max(last, rp.LastSend)
		if rp.Elected {
			elected++
			res.Leader, res.LeaderID = rc.members[i].Name, rp.Leader
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
	r.log.WithFields(logrus.Fields{"algorithm": res.Algorithm, "leader": res.Leader, "messages": res.Messages,
		"bits": res.Bits, "n": res.N, "error": res.Error}).Info("ring election finished")
	rc.reply(res)
}

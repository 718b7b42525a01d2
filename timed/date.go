package timed

import (
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/udp"
)

// The date path (facts §4): date(1) sends SETDATE to its local timed; a
// master changes the network's time, a slave asks its master with
// SETDATEREQ and confirms with DATEACK once the master has. What to do is
// clocksync.DecideDate's call; this file carries it out.
//
// On several networks the host has one role for the date, as BSD's: with
// a slavenet it asks the master it follows there, whether the request is
// date(1)'s SETDATE or a SETDATEREQ from a slave of a network it masters
// (a submaster passes its slaves' requests up); without one, where it
// masters a network it changes the time, and every network it masters
// follows its clock for the next rounds.

// dateState is a network's date path: the last request of each of its
// slaves, and the rounds its master dictates after a date change.
type dateState struct {
	dictate int               // rounds left in which the master's clock is the truth
	seq     map[string]uint16 // last SETDATEREQ seq per slave (BSD htp->seq)
}

// dateForwards are the SETDATEREQs this host sent to its master, waiting
// for its DATEACK: host-wide, as the master is the slavenet's.
type dateForwards struct {
	seqNext uint16
	pending map[uint16]*dateForward
}

// dateForward is a SETDATEREQ this host sent to its master on behalf of a
// local SETDATE or of a slave's SETDATEREQ, waiting for the master's
// DATEACK.
type dateForward struct {
	requester netip.AddrPort
	reqSeq    uint16
	tries     int
	pkt       tsp.Packet
	to        netip.AddrPort
	log       *logrus.Entry
}

// dateRole is the host's role for a date request: slave where it follows
// a master (its slavenet), master where it masters a network, else none.
func (d *Daemon) dateRole() clocksync.DateRole {
	if _, ok := d.host.SlaveNet(); ok {
		return clocksync.DateSlave
	}
	if len(d.masteredNets()) > 0 {
		return clocksync.DateMaster
	}
	return clocksync.DateNoMaster
}

// masteredNets are the runtimes of the networks this host is master of
// (not in conflict there).
func (d *Daemon) masteredNets() []*netRuntime {
	var out []*netRuntime
	for _, rt := range d.runtimes {
		if rt.masters() {
			out = append(out, rt)
		}
	}
	return out
}

// datePacket handles SETDATE, SETDATEREQ and DATEACK; rt is the network
// the packet came from, nil for none (date(1) on this host).
func (d *Daemon) datePacket(rt *netRuntime, p tsp.Packet, r udp.Received) {
	if p.Type == tsp.DateAck {
		d.dateAcked(p, r.From)
		return
	}
	log := d.log.WithField("network", "none")
	if rt != nil {
		log = rt.log
	}
	log = log.WithFields(logrus.Fields{"type": p.Type.String(), "from": p.Name, "addr": r.From.String()})
	if d.ref != nil {
		// A reference never changes its clock, and as master keeps the
		// network on it: date(1) is for the program that keeps it.
		log.Info("date request ignored: " + errReference.Error())
		return
	}
	req := clocksync.DateRequest{Type: p.Type, Seq: p.Seq, From: p.Name, Time: p.Time.Time(), Queued: time.Since(r.At)}
	// The -F list is the host's: every machine has it.
	req.Trusted = d.host.Machine(0).Trusted(r.From)
	if p.Type == tsp.SetDateReq {
		if rt == nil {
			return // the transport delivers SETDATEREQ from served networks only
		}
		// From a slave of ours on the network it came from.
		req.KnownSlave = d.host.Running(rt.i) && rt.m().IsSlaveAt(p.Name, r.From)
		last, seen := rt.date.seq[p.Name]
		req.NewSeq = !seen || last != p.Seq
	}
	dec := clocksync.DecideDate(d.dateRole(), req, d.clock.Now(), d.cfg.Sync.StepThreshold)
	if dec.LogUntrusted {
		log.Warn("date change from an untrusted host refused")
	}
	if dec.Ignore {
		log.WithField("reason", dec.Reason).Info("date request ignored")
		if dec.SpreadTime && rt != nil {
			rt.spreadTime()
		}
		return
	}
	if p.Type == tsp.SetDateReq {
		rt.date.seq[p.Name] = p.Seq
	}
	log = log.WithField("to", dec.Target.UTC().Format(time.RFC3339Nano))
	if dec.DateAck {
		d.sendTo(tsp.Packet{Type: tsp.DateAck, Version: tsp.Version, Seq: p.Seq, Name: d.hostname}, r.From)
	}
	switch {
	case dec.Step:
		log.Info("date changed: stepping the network")
		d.applySetTime(dec.Target, 0, p.Name)
		for _, m := range d.masteredNets() {
			m.date.dictate = dec.Dictate
			m.spreadTime()
		}
	case dec.Slew != 0 || dec.Dictate > 0:
		log.Info("date changed: slewing the network")
		d.applyAdjust(dec.Slew, p.Name)
		for _, m := range d.masteredNets() {
			m.date.dictate = dec.Dictate
			m.step(election.ForceElection{}, time.Time{}) // a master's TEST: sync now
		}
	case dec.ForwardReq:
		d.forwardDateReq(dec.Target, p.Seq, r.From, log)
	}
}

// forwardDateReq asks the master the host follows on its slavenet to
// change the date (SETDATEREQ), and answers requester with DATEACK once
// the master has.
func (d *Daemon) forwardDateReq(target time.Time, reqSeq uint16, requester netip.AddrPort, log *logrus.Entry) {
	var m election.Peer
	ok := false
	if i, slave := d.host.SlaveNet(); slave {
		m, ok = d.host.Master(i)
	}
	if !ok {
		log.Info("date request dropped: no master known")
		return
	}
	tv, err := tsp.TimeTimeval(target)
	if err != nil {
		log.WithError(err).Warn("date request dropped")
		return
	}
	if d.dates.pending == nil {
		d.dates.pending = map[uint16]*dateForward{}
	}
	d.dates.seqNext++
	f := &dateForward{requester: requester, reqSeq: reqSeq, to: m.Addr, log: log,
		pkt: tsp.Packet{Type: tsp.SetDateReq, Version: tsp.Version, Seq: d.dates.seqNext, Time: tv, Name: d.hostname}}
	d.dates.pending[f.pkt.Seq] = f
	log.WithField("master", m.Name).Info("date request forwarded to the master")
	d.forwardDate(f)
}

// forwardDate sends (or resends) a SETDATEREQ on acksend's schedule.
func (d *Daemon) forwardDate(f *dateForward) {
	sched := d.cfg.Election.Retransmit
	if f.tries >= len(sched) {
		delete(d.dates.pending, f.pkt.Seq)
		f.log.WithField("master", f.to.String()).Warn("master did not confirm the date change")
		return
	}
	d.sendTo(f.pkt, f.to)
	wait := sched[f.tries]
	f.tries++
	d.after(wait, func() {
		if d.dates.pending[f.pkt.Seq] == f {
			d.forwardDate(f)
		}
	})
}

// dateAcked: the master confirmed our SETDATEREQ; confirm to whoever
// asked us (date(1), or our slave).
func (d *Daemon) dateAcked(p tsp.Packet, from netip.AddrPort) {
	f, ok := d.dates.pending[p.Seq]
	if !ok || f.to != from {
		return
	}
	delete(d.dates.pending, p.Seq)
	d.sendTo(tsp.Packet{Type: tsp.DateAck, Version: tsp.Version, Seq: f.reqSeq, Name: d.hostname}, f.requester)
}

// spreadTime re-asserts the master's time on every slave (BSD spreadtime):
// the next round's corrections follow the master alone, and it runs now.
func (rt *netRuntime) spreadTime() {
	if !rt.masters() {
		return
	}
	rt.date.dictate = max(rt.date.dictate, 1)
	rt.step(election.ForceElection{}, time.Time{})
}

// masters reports whether the host is master of this network.
func (rt *netRuntime) masters() bool {
	return rt.d.host.Running(rt.i) && rt.d.host.State(rt.i) == election.Master
}

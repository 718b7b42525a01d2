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

// dateState is a network's date path: the date requests of its slaves and
// those forwarded to its master.
type dateState struct {
	dictate  int               // rounds left in which the master's clock is the truth
	seq      map[string]uint16 // last SETDATEREQ seq per slave (BSD htp->seq)
	seqNext  uint16
	forwards map[uint16]*dateForward
}

// dateForward is a SETDATEREQ this slave sent to its master on behalf of a
// local SETDATE, waiting for the master's DATEACK.
type dateForward struct {
	requester netip.AddrPort
	reqSeq    uint16
	tries     int
	pkt       tsp.Packet
	to        netip.AddrPort
}

func (rt *netRuntime) datePacket(p tsp.Packet, r udp.Received) {
	d := rt.d
	if p.Type == tsp.DateAck {
		rt.dateAcked(p)
		return
	}
	role := clocksync.DateNoMaster
	switch rt.m.State() {
	case election.Master:
		role = clocksync.DateMaster
	case election.Slave, election.Accept:
		role = clocksync.DateSlave
	}
	req := clocksync.DateRequest{Type: p.Type, Seq: p.Seq, From: p.Name, Time: p.Time.Time(),
		Queued: time.Since(r.At), Trusted: rt.m.Trusted(r.From)}
	if p.Type == tsp.SetDateReq {
		req.KnownSlave = rt.m.IsSlaveAt(p.Name, r.From)
		last, seen := rt.date.seq[p.Name]
		req.NewSeq = !seen || last != p.Seq
	}
	dec := clocksync.DecideDate(role, req, d.clock.Now(), d.cfg.Sync.StepThreshold)
	log := rt.log.WithFields(logrus.Fields{"type": p.Type.String(), "from": p.Name, "addr": r.From.String()})
	if dec.LogUntrusted {
		log.Warn("date change from an untrusted host refused")
	}
	if dec.Ignore {
		log.WithField("reason", dec.Reason).Info("date request ignored")
		if dec.SpreadTime {
			rt.spreadTime()
		}
		return
	}
	if p.Type == tsp.SetDateReq {
		rt.date.seq[p.Name] = p.Seq
	}
	log = log.WithField("to", dec.Target.UTC().Format(time.RFC3339Nano))
	if dec.DateAck {
		rt.send(election.Send{Packet: tsp.Packet{Type: tsp.DateAck, Version: tsp.Version, Seq: p.Seq, Name: d.hostname}, To: r.From})
	}
	switch {
	case dec.Step:
		log.Info("date changed: stepping the network")
		d.applySetTime(dec.Target, 0, p.Name)
		rt.date.dictate = dec.Dictate
		rt.spreadTime()
	case dec.Slew != 0 || dec.Dictate > 0:
		log.Info("date changed: slewing the network")
		d.applyAdjust(dec.Slew, p.Name)
		rt.date.dictate = dec.Dictate
		rt.step(election.ForceElection{}, time.Time{}) // a master's TEST: sync now
	case dec.ForwardReq:
		m, ok := rt.m.Master()
		if !ok {
			log.Info("date request dropped: no master known")
			return
		}
		tv, err := tsp.TimeTimeval(dec.Target)
		if err != nil {
			log.WithError(err).Warn("date request dropped")
			return
		}
		rt.date.seqNext++
		f := &dateForward{requester: r.From, reqSeq: p.Seq, to: m.Addr,
			pkt: tsp.Packet{Type: tsp.SetDateReq, Version: tsp.Version, Seq: rt.date.seqNext, Time: tv, Name: d.hostname}}
		rt.date.forwards[f.pkt.Seq] = f
		log.WithField("master", m.Name).Info("date request forwarded to the master")
		rt.forwardDate(f)
	}
}

// forwardDate sends (or resends) a SETDATEREQ on acksend's schedule.
func (rt *netRuntime) forwardDate(f *dateForward) {
	d := rt.d
	sched := d.cfg.Election.Retransmit
	if f.tries >= len(sched) {
		delete(rt.date.forwards, f.pkt.Seq)
		rt.log.WithField("to", f.to.String()).Warn("master did not confirm the date change")
		return
	}
	rt.send(election.Send{Packet: f.pkt, To: f.to, Reliable: true})
	wait := sched[f.tries]
	f.tries++
	d.after(wait, func() {
		if rt.date.forwards[f.pkt.Seq] == f {
			rt.forwardDate(f)
		}
	})
}

// dateAcked: the master confirmed our SETDATEREQ; confirm to date(1).
func (rt *netRuntime) dateAcked(p tsp.Packet) {
	f, ok := rt.date.forwards[p.Seq]
	if !ok {
		return
	}
	delete(rt.date.forwards, p.Seq)
	rt.send(election.Send{Packet: tsp.Packet{Type: tsp.DateAck, Version: tsp.Version, Seq: f.reqSeq, Name: rt.d.hostname}, To: f.requester})
}

// spreadTime re-asserts the master's time on every slave (BSD spreadtime):
// the next round's corrections follow the master alone, and it runs now.
func (rt *netRuntime) spreadTime() {
	if rt.m.State() != election.Master {
		return
	}
	rt.date.dictate = max(rt.date.dictate, 1)
	rt.step(election.ForceElection{}, time.Time{})
}

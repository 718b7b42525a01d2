package timed

import (
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/udp"
)

// timerEntry is a running timer; gen tells a firing of this timer from one
// of a timer that was since cancelled or re-set under the same ID.
type timerEntry struct {
	t   *time.Timer
	gen uint64
}

type timerFire struct {
	id  election.TimerID
	gen uint64
}

// step feeds one event to the machine and carries out what it asks.
// arrived is when the packet behind the event reached us (zero for other
// events): SETTIME's time is corrected for the time since.
//
// The machine's now is the host clock's reading, not the kernel's: the
// master stamps SETTIME with it, and under a simulated clock the two
// differ. The machine's timers are durations the loop runs on real
// timers, so a stepped clock does not disturb them.
func (d *Daemon) step(ev election.Event, arrived time.Time) {
	rd := d.m.Step(d.clock.Now(), ev)
	for _, a := range rd.Actions {
		d.do(a, arrived)
	}
}

func (d *Daemon) do(a election.Action, arrived time.Time) {
	if d.log.IsLevelEnabled(logrus.TraceLevel) {
		d.log.WithField("action", a).Trace("election action")
	}
	switch a := a.(type) {
	case election.Send:
		d.send(a)
	case election.SetTimer:
		d.setTimer(a.ID, a.After)
	case election.CancelTimer:
		d.cancelTimer(a.ID)
	case election.StateChange:
		d.stateChanged(a)
	case election.SlaveList:
		d.st.setSlaves(a.Slaves)
	case election.SyncRound:
		d.startSyncRound(a)
	case election.AdjustClock:
		d.applyAdjust(a.Delta, a.Master)
	case election.SetClock:
		queued := time.Duration(0)
		if !arrived.IsZero() {
			queued = time.Since(arrived)
		}
		d.applySetTime(a.Time, queued, a.Master)
	case election.Refused:
		d.st.refusedPacket(a.Reason)
		d.log.WithFields(logrus.Fields{"type": a.Type.String(), "from": a.From.String(), "reason": string(a.Reason)}).Debug("refused")
	default:
		d.log.WithField("action", a).Error("unknown action from the election machine")
	}
}

func (d *Daemon) send(a election.Send) {
	p := a.Packet
	var err error
	if a.Broadcast {
		err = d.tr.Broadcast(&p, d.network)
	} else {
		err = d.tr.Send(&p, a.To)
	}
	if d.st.trace {
		to := a.To.String()
		if a.Broadcast {
			to = "broadcast"
		}
		d.log.WithField("to", to).Info("sent " + p.String())
	}
	if err != nil {
		d.log.WithError(err).WithField("packet", p.String()).Debug("send failed")
	}
}

func (d *Daemon) setTimer(id election.TimerID, after time.Duration) {
	e := d.timers[id]
	if e == nil {
		e = &timerEntry{}
		d.timers[id] = e
	} else if e.t != nil {
		e.t.Stop()
	}
	e.gen++
	f := timerFire{id: id, gen: e.gen}
	// The callback must never block the timer goroutine for long: the loop
	// drains timerCh, and at shutdown roundCtx is done.
	e.t = time.AfterFunc(after, func() {
		select {
		case d.timerCh <- f:
		case <-d.roundCtx.Done():
		}
	})
}

func (d *Daemon) cancelTimer(id election.TimerID) {
	if e := d.timers[id]; e != nil {
		e.t.Stop()
		delete(d.timers, id)
	}
}

// after runs fn on the loop once wait has passed, unless the daemon has
// stopped by then: the daemon's own timers (the machine has its own).
func (d *Daemon) after(wait time.Duration, fn func()) {
	time.AfterFunc(wait, func() {
		select {
		case d.callCh <- fn:
		case <-d.roundCtx.Done():
		}
	})
}

func (d *Daemon) fire(f timerFire) {
	e := d.timers[f.id]
	if e == nil || e.gen != f.gen {
		return // cancelled or re-set after it fired
	}
	delete(d.timers, f.id)
	if d.log.IsLevelEnabled(logrus.TraceLevel) {
		d.log.WithField("timer", f.id.String()).Trace("timer fired")
	}
	d.step(election.TimerFired{ID: f.id}, time.Time{})
}

func (d *Daemon) stateChanged(a election.StateChange) {
	if a.To == election.Candidate || a.To == election.Accept {
		d.electionSeen()
	}
	d.st.stateChanged(a)
	fields := logrus.Fields{"from": a.From.String(), "to": a.To.String(), "reason": a.Reason}
	if m, ok := d.m.Master(); ok && a.To != election.Master {
		fields["master"] = m.Name
	}
	d.log.WithFields(fields).Info("state change")
	d.metrics.setState(a.To)
	notifyStatus(d)
}

func (d *Daemon) electionSeen() {
	if d.st.electionSeen() {
		d.metrics.electionSeen()
	}
}

// receive dispatches one datagram: extensions to the probe, the admin
// types (BSD answers them outside the election) here, the rest to the
// machine.
func (d *Daemon) receive(r udp.Received) {
	if r.Ext != nil {
		d.receiveExt(r)
		return
	}
	p := *r.Packet
	if d.st.trace {
		d.log.Info("recv " + p.Format(r.From.String()))
	}
	if !p.Type.Known() {
		d.st.dropUnknownType()
		d.log.WithField("packet", p.Format(r.From.String())).Debug("dropped: unknown type")
		return
	}
	switch p.Type {
	case tsp.TraceOn, tsp.TraceOff, tsp.Test, tsp.SetDate:
		if !d.adminAllowed(p, r.From) {
			return
		}
	}
	switch p.Type {
	case tsp.TraceOn, tsp.TraceOff:
		d.setTrace(p.Type == tsp.TraceOn)
		d.ack(p, r.From, d.hostname)
	case tsp.MSite:
		d.answerMsite(p, r.From)
	case tsp.SetDate, tsp.SetDateReq, tsp.DateAck:
		d.datePacket(p, r)
	default:
		if p.Type == tsp.Election {
			d.electionSeen()
		}
		d.step(election.Recv{Packet: p, From: r.From}, r.At)
	}
}

func (d *Daemon) ack(p tsp.Packet, to netip.AddrPort, name string) {
	reply := tsp.Packet{Type: tsp.Ack, Version: tsp.Version, Seq: p.Seq, Name: name}
	d.send(election.Send{Packet: reply, To: to})
}

func (d *Daemon) setTrace(on bool) {
	if d.st.trace != on {
		d.log.WithField("trace", on).Info("packet tracing")
	}
	d.st.trace = on
}

// answerMsite: a master names itself; a slave names its master (BSD asks
// with MSITEREQ first; our slave knows its master from the election). With
// no master known there is nothing true to say, and no answer, as BSD.
func (d *Daemon) answerMsite(p tsp.Packet, from netip.AddrPort) {
	if m, ok := d.m.Master(); ok {
		d.ack(p, from, m.Name)
	}
}

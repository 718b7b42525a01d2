package timed

import (
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/internal/limit"
	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/udp"
)

// timerEntry is a running timer; gen tells a firing of this timer from one
// of a timer that was since cancelled or re-set under the same ID.
type timerEntry struct {
	t   *time.Timer
	gen uint64
}

// timerFire is a machine's timer running out; rt is whose machine.
type timerFire struct {
	rt  *netRuntime
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
func (rt *netRuntime) step(ev election.Event, arrived time.Time) {
	rd := rt.m.Step(rt.d.clock.Now(), ev)
	for _, a := range rd.Actions {
		rt.do(a, arrived)
	}
}

func (rt *netRuntime) do(a election.Action, arrived time.Time) {
	d := rt.d
	if d.log.IsLevelEnabled(logrus.TraceLevel) {
		rt.log.WithField("action", a).Trace("election action")
	}
	switch a := a.(type) {
	case election.Send:
		rt.send(a)
	case election.SetTimer:
		rt.setTimer(a.ID, a.After)
	case election.CancelTimer:
		rt.cancelTimer(a.ID)
	case election.StateChange:
		rt.stateChanged(a)
	case election.SlaveList:
		rt.st.setSlaves(a.Slaves)
	case election.SyncRound:
		rt.startSyncRound(a)
	case election.AdjustClock:
		d.applyAdjust(a.Delta, a.Master)
	case election.SetClock:
		queued := time.Duration(0)
		if !arrived.IsZero() {
			queued = time.Since(arrived)
		}
		d.applySetTime(a.Time, queued, a.Master)
	case election.Refused:
		rt.st.refusedPacket(a.Reason)
		// Refusals come at the rate of whoever sends them: the log says
		// each kind once a minute per source, with the count suppressed.
		if e := rt.d.refusedLog.Entry(limit.Key{Msg: "refused " + string(a.Reason), Source: a.From.Addr()}, time.Now()); e != nil {
			e.WithFields(logrus.Fields{"network": rt.network.String(), "type": a.Type.String(), "from": a.From.String()}).Debug("refused " + string(a.Reason))
		}
	default:
		rt.log.WithField("action", a).Error("unknown action from the election machine")
	}
}

// send transmits a packet once: broadcast on this runtime's network, or
// to one address.
func (rt *netRuntime) send(a election.Send) {
	p := a.Packet
	var err error
	if a.Broadcast {
		err = rt.d.tr.Broadcast(&p, rt.network)
	} else {
		err = rt.d.tr.Send(&p, a.To)
	}
	if rt.d.st.trace {
		to := a.To.String()
		if a.Broadcast {
			to = "broadcast"
		}
		rt.log.WithField("to", to).Info("sent " + p.String())
	}
	if err != nil {
		rt.log.WithError(err).WithField("packet", p.String()).Debug("send failed")
	}
}

func (rt *netRuntime) setTimer(id election.TimerID, after time.Duration) {
	e := rt.timers[id]
	if e == nil {
		e = &timerEntry{}
		rt.timers[id] = e
	} else if e.t != nil {
		e.t.Stop()
	}
	e.gen++
	f := timerFire{rt: rt, id: id, gen: e.gen}
	// The callback must never block the timer goroutine for long: the loop
	// drains timerCh, and at shutdown roundCtx is done.
	d := rt.d
	e.t = time.AfterFunc(after, func() {
		select {
		case d.timerCh <- f:
		case <-d.roundCtx.Done():
		}
	})
}

func (rt *netRuntime) cancelTimer(id election.TimerID) {
	if e := rt.timers[id]; e != nil {
		e.t.Stop()
		delete(rt.timers, id)
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

func (rt *netRuntime) fire(f timerFire) {
	e := rt.timers[f.id]
	if e == nil || e.gen != f.gen {
		return // cancelled or re-set after it fired
	}
	delete(rt.timers, f.id)
	if rt.d.log.IsLevelEnabled(logrus.TraceLevel) {
		rt.log.WithField("timer", f.id.String()).Trace("timer fired")
	}
	rt.step(election.TimerFired{ID: f.id}, time.Time{})
}

func (rt *netRuntime) stateChanged(a election.StateChange) {
	d := rt.d
	if a.To == election.Candidate || a.To == election.Accept {
		rt.electionSeen()
	}
	rt.st.stateChanged(a)
	fields := logrus.Fields{"from": a.From.String(), "to": a.To.String(), "reason": a.Reason}
	if m, ok := rt.m.Master(); ok && a.To != election.Master {
		fields["master"] = m.Name
	}
	rt.log.WithFields(fields).Info("state change")
	d.metrics.setState(a.To)
	notifyStatus(d)
}

func (rt *netRuntime) electionSeen() {
	if rt.st.electionSeen() {
		rt.d.metrics.electionSeen()
	}
}

// receive dispatches one datagram: extensions to the probe, the rest to
// the runtime of the network it came from, where the admin types (BSD
// answers them outside the election) are answered and the others go to
// the machine.
func (d *Daemon) receive(r udp.Received) {
	if r.Ext != nil {
		d.receiveExt(r)
		return
	}
	p := *r.Packet
	rt := d.runtimeFor(r.Network)
	if d.st.trace {
		rt.log.Info("recv " + p.Format(r.From.String()))
	}
	if !p.Type.Known() {
		d.st.dropUnknownType()
		rt.log.WithField("packet", p.Format(r.From.String())).Debug("dropped: unknown type")
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
		rt.ack(p, r.From, d.hostname)
	case tsp.MSite:
		rt.answerMsite(p, r.From)
	case tsp.SetDate, tsp.SetDateReq, tsp.DateAck:
		rt.datePacket(p, r)
	default:
		if p.Type == tsp.Election {
			rt.electionSeen()
		}
		rt.step(election.Recv{Packet: p, From: r.From}, r.At)
	}
}

func (rt *netRuntime) ack(p tsp.Packet, to netip.AddrPort, name string) {
	reply := tsp.Packet{Type: tsp.Ack, Version: tsp.Version, Seq: p.Seq, Name: name}
	rt.send(election.Send{Packet: reply, To: to})
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
func (rt *netRuntime) answerMsite(p tsp.Packet, from netip.AddrPort) {
	if m, ok := rt.m.Master(); ok {
		rt.ack(p, from, m.Name)
	}
}

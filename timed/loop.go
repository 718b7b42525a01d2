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

// timerFire is a timer of the Host running out: rt is the network it was
// set on (timers are per network and TimerID).
type timerFire struct {
	rt  *netRuntime
	id  election.TimerID
	gen uint64
}

// step feeds one event of this runtime's network to the Host and carries
// out what it asks, on whichever networks it asks. arrived is when the
// packet behind the event reached us (zero for other events): SETTIME's
// time is corrected for the time since.
//
// The Host's now is d.now (runtime.go): the kernel's monotonic time. Its
// timers are durations the loop runs on real timers, so a stepped clock
// does not disturb them either.
func (rt *netRuntime) step(ev election.Event, arrived time.Time) {
	d := rt.d
	d.carryOut(d.host.Step(d.now(), rt.i, ev), arrived)
}

// carryOut carries out the Host's actions in order, each on its network.
func (d *Daemon) carryOut(as []election.NetAction, arrived time.Time) {
	for _, a := range as {
		d.runtimes[a.Net].do(a.Action, arrived)
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
		d.ks.dirty = true // a master's judgement counts its slaves
	case election.SyncRound:
		rt.startSyncRound(a)
	case election.AdjustClock:
		// The Host passes only the slavenet's corrections on.
		applied, _ := d.applyAdjust(a.Delta, a.Master) // applied logs failures
		rt.st.heard.heard(a.Master, time.Now(), applied.Requested, d.cfg.Election.SyncInterval)
	case election.SetClock:
		queued := time.Duration(0)
		if !arrived.IsZero() {
			queued = time.Since(arrived)
		}
		applied, _ := d.applySetTime(a.Time, queued, a.Master)
		rt.st.heard.heard(a.Master, time.Now(), applied.Requested, d.cfg.Election.SyncInterval)
	case election.Refused:
		rt.st.refusedPacket(a.Reason)
		// Refusals come at the rate of whoever sends them: the log says
		// each kind once a minute per source, with the count suppressed.
		if e := rt.d.peerLog("refused "+string(a.Reason), a.From); e != nil {
			e.WithFields(logrus.Fields{"network": rt.network.String(), "type": a.Type.String()}).Debug("refused " + string(a.Reason))
		}
	case election.Ignored:
		rt.ignored(a)
	case election.CycleDetected:
		rt.cycleDetected(a)
	case election.AskSource:
		rt.askSource(a)
	case election.TellReference:
		rt.tellReference(a)
	case election.TellSpan:
		rt.tellSpan()
	case election.TellResign:
		rt.tellResign(a)
	case election.TellSource:
		rt.tellSource(a)
	default:
		rt.log.WithField("action", a).Error("unknown action from the election")
	}
}

// send transmits a packet once: broadcast on this runtime's network, or
// to one address. A SETTIME carries the time of the machine's now (the
// kernel's) plus the correction: it goes out on the disciplined clock's.
func (rt *netRuntime) send(a election.Send) {
	p := a.Packet
	if p.Type == tsp.SetTime {
		p.Time = rt.d.onClock(p.Time)
	}
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

// onClock moves a time stamped on the kernel's clock (d.now) to the
// disciplined clock's reading of the same instant.
func (d *Daemon) onClock(tv tsp.Timeval) tsp.Timeval {
	off := d.clock.Now().Sub(time.Now().Round(0))
	if off == 0 {
		return tv
	}
	moved, err := tsp.TimeTimeval(tv.Time().Add(off))
	if err != nil {
		return tv
	}
	return moved
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
// stopped by then: the daemon's own timers (the Host has its own).
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
	if a.To.IsMaster() && !a.From.IsMaster() {
		// A new mastership: short rounds until the slaves are known.
		rt.rounds.Restart()
		rt.roundAt, rt.prevAt = time.Time{}, time.Time{}
	}
	fields := logrus.Fields{"from": a.From.String(), "to": a.To.String(), "reason": a.Reason}
	if m, ok := rt.m().Master(); ok && a.To != election.Master {
		fields["master"] = m.Name
	}
	rt.log.WithFields(fields).Info("state change")
	d.ks.dirty = true
	d.metrics.setState(rt.label, a.To.String())
	notifyStatus(d)
}

// ignored: the Host put this network out of use (BSD IGNORE: its machine
// stopped, another gateway or master serves it) or back into use. The
// LOOPs that decide it are a peer's doing, so the lines are limited per
// network.
func (rt *netRuntime) ignored(a election.Ignored) {
	d := rt.d
	msg, state := "network back in use", election.StartUp.String()
	if a.On {
		msg, state = "network ignored", stateIgnore
	}
	d.metrics.setState(rt.label, state)
	d.ks.dirty = true
	notifyStatus(d)
	if e := d.netLog.Entry(limit.Key{Msg: msg + " " + rt.label}, time.Now()); e != nil {
		e.WithFields(logrus.Fields{"network": rt.network.String(), "reason": a.Reason}).Info(msg)
	}
}

// stateIgnore is the state shown for a network the Host ignores (BSD's
// IGNORE).
const stateIgnore = "ignore"

// cycleDetected: our own LOOP came back from the master we follow on this
// network, round a cycle of gateways; the Host stops following it.
func (rt *netRuntime) cycleDetected(a election.CycleDetected) {
	d := rt.d
	d.loopDetected(rt)
	const msg = "loop detected: our own LOOP came back from the master we follow; we stop following it"
	if e := d.netLog.Entry(limit.Key{Msg: msg, Source: a.Master.Addr.Addr()}, time.Now()); e != nil {
		e.WithFields(logrus.Fields{"network": rt.network.String(), "master": a.Master.Name, "hops": a.Hops}).Warn(msg)
	}
}

// loopDetected counts one of BSD's "loop detected" cases: a cycle of
// gateways, or a LOOP from a second master on a network we master.
func (d *Daemon) loopDetected(rt *netRuntime) {
	d.st.loopsDetected++
	d.metrics.loopDetected(rt.label)
}

// foreignLoop notes a LOOP from another daemon on a network this host
// masters: a second master there (its own LOOP, or one it passes on),
// which the machine settles. Our own LOOPs, back from the network or
// passed on by us, come from our own address, which the Host drops; in
// peers mode, where daemons share an address, by our name (a peer list
// may name this daemon too).
func (rt *netRuntime) foreignLoop(p tsp.Packet, from netip.AddrPort) {
	d := rt.d
	own := from.Addr() == rt.network.Addr || rt.network.Peers && p.Name == d.hostname
	if own || !d.host.Running(rt.i) || !d.host.State(rt.i).IsMaster() || !rt.m().Trusted(from) {
		return
	}
	d.loopDetected(rt)
	const msg = "loop detected: a LOOP from a second master on a network we master"
	if e := d.netLog.Entry(limit.Key{Msg: msg, Source: from.Addr()}, time.Now()); e != nil {
		e.WithFields(logrus.Fields{"network": rt.network.String(), "from": from.String(), "name": p.Name, "hops": p.HopCount}).Info(msg)
	}
}

func (rt *netRuntime) electionSeen() {
	if rt.st.electionSeen() {
		rt.d.metrics.electionSeen(rt.label)
	}
}

// receive dispatches one datagram: extensions to the probe, the rest to
// the runtime of the network it came from, where the election types go to
// the Host; the admin types (BSD answers them outside the election) are
// answered by the host, whichever network they came from, and they alone
// may come from no served network.
func (d *Daemon) receive(r udp.Received) {
	if r.Ext != nil {
		if d.bsdCompat {
			d.st.dropExt()
			return // BSD drops version 2 unread
		}
		d.receiveExt(r)
		return
	}
	p := *r.Packet
	rt := d.runtimeFor(r.Network)
	log := d.log.WithField("network", "none")
	if rt != nil {
		log = rt.log
	}
	if d.st.trace {
		log.Info("recv " + p.Format(r.From.String()))
	}
	if !p.Type.Known() {
		d.st.dropUnknownType()
		if e := d.peerLog("dropped: unknown type", r.From); e != nil {
			e.WithField("packet", p.Format(r.From.String())).Debug("dropped: unknown type")
		}
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
		return
	case tsp.MSite:
		d.answerMsite(rt, p, r.From)
		return
	case tsp.SetDate, tsp.SetDateReq, tsp.DateAck:
		d.datePacket(rt, p, r)
		return
	case tsp.Test:
		if rt == nil {
			// timedc election from this host: every network, as the
			// control socket's.
			d.forceElection()
			return
		}
	}
	if rt == nil {
		// The transport delivers only the types above from no served
		// network; anything else has no network to go to.
		if e := d.peerLog("dropped: from no served network", r.From); e != nil {
			e.WithField("packet", p.Format(r.From.String())).Debug("dropped: from no served network")
		}
		return
	}
	switch p.Type {
	case tsp.Election:
		rt.electionSeen()
	case tsp.Loop:
		rt.foreignLoop(p, r.From)
	}
	rt.step(election.Recv{Packet: p, From: r.From}, r.At)
}

// forceElection is BSD's TEST on every network: slaves start an election,
// masters run a sync round now.
func (d *Daemon) forceElection() {
	for _, rt := range d.runtimes {
		rt.step(election.ForceElection{}, time.Time{})
	}
}

func (d *Daemon) ack(p tsp.Packet, to netip.AddrPort, name string) {
	reply := tsp.Packet{Type: tsp.Ack, Version: tsp.Version, Seq: p.Seq, Name: name}
	d.sendTo(reply, to)
}

// sendTo unicasts a packet the host itself answers with (ACK, DATEACK,
// SETDATEREQ): unicast needs no network.
func (d *Daemon) sendTo(p tsp.Packet, to netip.AddrPort) {
	err := d.tr.Send(&p, to)
	if d.st.trace {
		d.log.WithField("to", to.String()).Info("sent " + p.String())
	}
	if err != nil {
		d.log.WithError(err).WithField("packet", p.String()).Debug("send failed")
	}
}

func (d *Daemon) setTrace(on bool) {
	if d.st.trace != on {
		d.log.WithField("trace", on).Info("packet tracing")
	}
	d.st.trace = on
}

// answerMsite: a master names itself; a slave names its master (BSD asks
// with MSITEREQ first; our slave knows its master from the election). On
// several networks the answer is the master of the network the request
// came from; a request from no served network (timedc on this host), or
// from a network the host ignores, gets the master the host's clock
// follows: the slavenet's, else itself where it masters a network. With
// no master known there is nothing true to say, and no answer, as BSD.
func (d *Daemon) answerMsite(rt *netRuntime, p tsp.Packet, from netip.AddrPort) {
	var m election.Peer
	ok := false
	if rt != nil {
		m, ok = d.host.Master(rt.i)
	}
	if !ok {
		pr := d.primary()
		m, ok = d.host.Master(pr.i)
	}
	if ok {
		d.ack(p, from, m.Name)
	}
}

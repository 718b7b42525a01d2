package timed

import (
	"errors"
	"net/netip"
	"time"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/udp"
)

// receiveExt handles our version-2 extensions: clock probes are answered
// at once (their timestamps are backdated to the kernel's arrival stamp,
// so time spent queued here does not count), replies go to the prober,
// ring messages to the ring; questions for time sources and their
// answers, references' claims, spans and resignations go to the Host, on
// the network they came from.
func (d *Daemon) receiveExt(r udp.Received) {
	dg := clocksync.Datagram{Packet: *r.Ext, From: r.From, At: r.At}
	switch r.Ext.Kind {
	case tsp.ExtProbe:
		if err := d.respond.Answer(dg, extSender{d.tr}); errors.Is(err, clocksync.ErrProbePayload) {
			if e := d.peerLog("bad probe", r.From); e != nil {
				e.WithError(err).Debug("bad probe")
			}
			return
		} else if err != nil {
			d.log.WithError(err).Debug("probe reply not sent")
		}
		d.st.probedBy(r.From, time.Now()) // how our master measures us (sync.go)
	case tsp.ExtProbeReply:
		d.probe.Deliver(dg)
		if f, ok := d.measurer.(*fallbackMeasurer); ok {
			f.sawProbeReply(r.From) // a late reply too: BSD sends none
		}
	case tsp.ExtRing, tsp.ExtRingCtl:
		d.ring.Receive(r.From, *r.Ext)
	case tsp.ExtSourceReq, tsp.ExtSource:
		d.sourcePacket(r)
	case tsp.ExtReference:
		d.referencePacket(r)
	case tsp.ExtSpan:
		d.spanPacket(r)
	case tsp.ExtResign:
		d.resignPacket(r)
	default:
		if e := d.peerLog("dropped: extension not served", r.From); e != nil {
			e.WithField("kind", r.Ext.Kind.String()).Debug("dropped: extension not served")
		}
	}
}

// sourcePacket hands a question for our time source, or an answer to one
// of ours, to the Host, on the network it came from (election/source.go):
// the Host answers only where it is master, and takes an answer only from
// the address it asked, with the sequence number it asked.
func (d *Daemon) sourcePacket(r udp.Received) {
	rt := d.runtimeFor(r.Network)
	if rt == nil {
		return // the transport delivers extensions only from a served network
	}
	var ev election.Event = election.SourceQuery{From: r.From, Seq: r.Ext.Seq}
	if r.Ext.Kind == tsp.ExtSource {
		s, err := tsp.UnmarshalSource(r.Ext.Payload)
		if err != nil {
			if e := d.peerLog("bad time-source answer", r.From); e != nil {
				e.WithError(err).Debug("bad time-source answer")
			}
			return
		}
		ev = election.SourceAnswer{From: r.From, Seq: r.Ext.Seq, Source: s.Name, Hops: int(s.Hops)}
	}
	rt.step(ev, time.Time{})
}

// askSource asks a master on this runtime's network which time source it
// serves; tellSource answers such a question. A --bsd-compat daemon sends
// neither (the Host's LOOPs decide then, as BSD's).
func (rt *netRuntime) askSource(a election.AskSource) {
	rt.sendExt(tsp.ExtPacket{Kind: tsp.ExtSourceReq, Seq: a.Seq}, a.To.Addr)
}

func (rt *netRuntime) tellSource(a election.TellSource) {
	payload, err := tsp.SourcePayload{Name: a.Source, Hops: uint8(min(max(a.Hops, 0), election.LoopHops))}.Marshal()
	if err != nil {
		rt.log.WithError(err).Debug("time-source answer not sent")
		return
	}
	rt.sendExt(tsp.ExtPacket{Kind: tsp.ExtSource, Seq: a.Seq, Payload: payload}, a.To)
}

// referencePacket hands a reference's claim to the Host, on the network
// it came from; the Host keeps claims from trusted addresses only.
func (d *Daemon) referencePacket(r udp.Received) {
	toHost(d, r, "bad reference claim", tsp.UnmarshalReference, func(p tsp.ReferencePayload) election.Event {
		return election.ReferenceHeard{From: r.From, Name: r.Ext.Name, MaxError: p.MaxError}
	})
}

// resignPacket hands a master's resignation to the Host, on the network
// it came from; the Host takes it from trusted addresses only, and the
// machine from the master it follows only.
func (d *Daemon) resignPacket(r udp.Received) {
	toHost(d, r, "bad resignation", tsp.UnmarshalResign, func(p tsp.ResignPayload) election.Event {
		return election.ResignHeard{From: r.From, Name: r.Ext.Name, Slaves: p.Slaves}
	})
}

// toHost decodes an extension's payload and hands the Host the event ev
// makes of it, on the network it came from; a payload that does not
// decode is dropped, logged as bad (what) at most once a minute per
// source.
func toHost[P any](d *Daemon, r udp.Received, what string, decode func([]byte) (P, error), ev func(P) election.Event) {
	rt := d.runtimeFor(r.Network)
	if rt == nil {
		return
	}
	p, err := decode(r.Ext.Payload)
	if err != nil {
		if e := d.peerLog(what, r.From); e != nil {
			e.WithError(err).Debug(what)
		}
		return
	}
	rt.step(ev(p), time.Time{})
}

// tellResign broadcasts that this host gives its master's place on the
// runtime's network up (not with --bsd-compat).
func (rt *netRuntime) tellResign(a election.TellResign) {
	payload, err := tsp.ResignPayload{Slaves: min(a.Slaves, tsp.MaxResignSlaves)}.Marshal()
	if err != nil {
		rt.log.WithError(err).Debug("resignation not sent")
		return
	}
	rt.broadcastExt(tsp.ExtPacket{Kind: tsp.ExtResign, Payload: payload}, "resignation")
}

// tellReference broadcasts this host's claim on the runtime's network
// (not with --bsd-compat).
func (rt *netRuntime) tellReference(a election.TellReference) {
	payload, err := tsp.ReferencePayload{MaxError: min(a.MaxError, tsp.MaxReferenceError)}.Marshal()
	if err != nil {
		rt.log.WithError(err).Debug("reference claim not sent")
		return
	}
	rt.broadcastExt(tsp.ExtPacket{Kind: tsp.ExtReference, Payload: payload}, "reference claim")
}

// spanPacket hands a host's word that it serves both families of the
// link to the Host, on the network it came from (election/span.go); the
// Host keeps those from trusted addresses only. It carries no payload.
func (d *Daemon) spanPacket(r udp.Received) {
	rt := d.runtimeFor(r.Network)
	if rt == nil {
		return
	}
	if len(r.Ext.Payload) != 0 {
		if e := d.peerLog("bad span announcement", r.From); e != nil {
			e.WithField("bytes", len(r.Ext.Payload)).Debug("bad span announcement")
		}
		return
	}
	rt.step(election.SpanHeard{From: r.From, Name: r.Ext.Name}, time.Time{})
}

// tellSpan broadcasts on the runtime's network that this host serves
// both families of its link (not with --bsd-compat).
func (rt *netRuntime) tellSpan() {
	rt.broadcastExt(tsp.ExtPacket{Kind: tsp.ExtSpan}, "span announcement")
}

// broadcastExt broadcasts p on the runtime's network; what names it in
// the log if that fails. A --bsd-compat daemon sends no version 2.
func (rt *netRuntime) broadcastExt(p tsp.ExtPacket, what string) {
	if rt.d.bsdCompat {
		return
	}
	if err := rt.d.tr.BroadcastExt(&p, rt.network); err != nil {
		rt.log.WithError(err).Debug(what + " not sent")
	}
}

func (rt *netRuntime) sendExt(p tsp.ExtPacket, to netip.AddrPort) {
	if rt.d.bsdCompat {
		return
	}
	err := rt.d.tr.SendExt(&p, to)
	if rt.d.st.trace {
		rt.log.WithField("to", to.String()).Info("sent " + p.Kind.String())
	}
	if err != nil {
		rt.log.WithError(err).WithField("kind", p.Kind.String()).Debug("send failed")
	}
}

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
// so time spent queued here does not count), replies go to the prober;
// questions for time sources and their answers go to the Host.
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
	rt := d.runtimeFor(r.Network)
	if rt == nil {
		return
	}
	p, err := tsp.UnmarshalReference(r.Ext.Payload)
	if err != nil {
		if e := d.peerLog("bad reference claim", r.From); e != nil {
			e.WithError(err).Debug("bad reference claim")
		}
		return
	}
	rt.step(election.ReferenceHeard{From: r.From, Name: r.Ext.Name, MaxError: p.MaxError}, time.Time{})
}

// tellReference broadcasts this host's claim on the runtime's network
// (not with --bsd-compat).
func (rt *netRuntime) tellReference(a election.TellReference) {
	payload, err := tsp.ReferencePayload{MaxError: min(a.MaxError, tsp.MaxReferenceError)}.Marshal()
	if err != nil || rt.d.bsdCompat {
		return
	}
	p := tsp.ExtPacket{Kind: tsp.ExtReference, Payload: payload}
	if err := rt.d.tr.BroadcastExt(&p, rt.network); err != nil {
		rt.log.WithError(err).Debug("reference claim not sent")
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

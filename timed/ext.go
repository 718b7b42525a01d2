package timed

import (
	"errors"
	"time"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/udp"
)

// receiveExt handles our version-2 extensions: clock probes are answered
// at once (their timestamps are backdated to the kernel's arrival stamp,
// so time spent queued here does not count), replies go to the prober.
func (d *Daemon) receiveExt(r udp.Received) {
	dg := clocksync.Datagram{Packet: *r.Ext, From: r.From, Waited: time.Since(r.At)}
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
	case tsp.ExtRing, tsp.ExtRingCtl:
		d.ring.Receive(r.From, *r.Ext)
	default:
		if e := d.peerLog("dropped: extension not served", r.From); e != nil {
			e.WithField("kind", r.Ext.Kind.String()).Debug("dropped: extension not served")
		}
	}
}

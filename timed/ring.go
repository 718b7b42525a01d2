package timed

import (
	"errors"
	"net/netip"
	"time"

	"github.com/timed-project/timed/election/ring/live"
	"github.com/timed-project/timed/tsp"
)

// Live ring elections (`timedc ring elect`) run in election/ring/live. The
// daemon is their host: it carries their packets, lends them its clock
// (the network time it keeps) and runs their callbacks on its loop.

// ringHost is the daemon as the ring runner sees it.
type ringHost struct{ d *Daemon }

func newRingRunner(d *Daemon) *live.Runner {
	return live.New(ringHost{d}, live.Config{Name: d.hostname, Log: d.log.WithField("component", "ring")})
}

// Ring elections run on the first network (a ring is one network's).
// A --bsd-compat daemon sends no version 2: they fail.
func (h ringHost) Send(p tsp.ExtPacket, to netip.AddrPort) error {
	if h.d.bsdCompat {
		return errBSDCompat
	}
	return h.d.tr.SendExt(&p, to)
}

func (h ringHost) Broadcast(p tsp.ExtPacket) error {
	if h.d.bsdCompat {
		return errBSDCompat
	}
	return h.d.tr.BroadcastExt(&p, h.d.runtimes[0].network)
}

// errBSDCompat: a --bsd-compat daemon sends no version-2 datagram.
var errBSDCompat = errors.New("bsd-compat: no version-2 datagrams")

func (h ringHost) Now() time.Time          { return h.d.clock.Now() }
func (h ringHost) Peers() []netip.AddrPort { return h.d.tr.Peers() }
func (h ringHost) Addr() netip.AddrPort    { return h.d.ownAddr() }

// At runs fn on the loop once the clock reads t: the wait is taken on the
// clock now, and then run on a real timer, as the daemon's own are.
func (h ringHost) At(t time.Time, fn func()) { h.d.after(max(t.Sub(h.d.clock.Now()), 0), fn) }

// ownAddr is this daemon's address as the others see it: on its network,
// or, in peers mode, the peer entry that is one of this host's addresses
// on our port.
func (d *Daemon) ownAddr() netip.AddrPort {
	port := d.tr.LocalAddr().Port()
	peers := d.tr.Peers()
	if len(peers) == 0 {
		return netip.AddrPortFrom(d.runtimes[0].network.Addr, port)
	}
	for _, p := range peers {
		if p.Port() == port && d.local.isLocal(p.Addr(), time.Now()) {
			return p
		}
	}
	return netip.AddrPortFrom(netip.IPv4Unspecified(), port)
}

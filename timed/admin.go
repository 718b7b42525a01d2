package timed

import (
	"net"
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/internal/limit"
	"github.com/timed-project/timed/tsp"
)

// Admin packets from the network (TRACEON/TRACEOFF, TEST, SETDATE) change
// what the daemon does or the time itself, and BSD took them from anyone.
// Ours take them only from a reserved source port (< 1024: root's, as
// BSD's setuid timedc and date(1) use) on one of this host's own
// addresses. An unprivileged local user, or anyone on the LAN, is refused,
// counted and logged once per source; local admins have the control
// socket.

const (
	reservedPorts = 1024             // source ports below this need root
	localAddrsTTL = 10 * time.Second // how long the host's address list is trusted
)

// localAddrs caches this host's addresses: who may send admin packets,
// and which peer entry is this daemon (ring.go).
type localAddrs struct {
	addrs  map[netip.Addr]bool
	readAt time.Time
}

// isLocal: a is loopback or one of this host's interface addresses, IPv4
// or IPv6. A link-local IPv6 address is ours only on its own interface
// (fe80::1%eth0), since another link may hold the same address. The list
// is read again at most every localAddrsTTL, so a flood of admin packets
// does not become a flood of netlink dumps.
func (s *localAddrs) isLocal(a netip.Addr, now time.Time) bool {
	a = a.Unmap()
	if a.IsLoopback() {
		return true
	}
	if s.addrs == nil || now.Sub(s.readAt) > localAddrsTTL {
		s.addrs, s.readAt = map[netip.Addr]bool{}, now
		ifs, _ := net.Interfaces()
		for _, ifi := range ifs {
			ifAddrs, err := ifi.Addrs()
			if err != nil {
				continue
			}
			for _, ia := range ifAddrs {
				if pn, ok := ia.(*net.IPNet); ok {
					if ip, ok := netip.AddrFromSlice(pn.IP); ok {
						ip = ip.Unmap()
						if ip.Is6() && ip.IsLinkLocalUnicast() {
							ip = ip.WithZone(ifi.Name)
						}
						s.addrs[ip] = true
					}
				}
			}
		}
	}
	return s.addrs[a]
}

// adminAllowed decides whether an admin packet from the network is obeyed.
func (d *Daemon) adminAllowed(p tsp.Packet, from netip.AddrPort) bool {
	if from.Port() < reservedPorts && d.local.isLocal(from.Addr(), time.Now()) {
		return true
	}
	d.st.refusedAdmin()
	const msg = "refused an admin packet: accepted only from a reserved port on this host (use the control socket); further ones from this source are only counted"
	if e := d.refusedOnce.Entry(limit.Key{Msg: msg, Source: from.Addr()}, time.Now()); e != nil {
		e.WithFields(logrus.Fields{"type": p.Type.String(), "from": from.String()}).Warn(msg)
	}
	return false
}

package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/sirupsen/logrus"
	"golang.org/x/net/ipv6"

	"github.com/timed-project/timed/internal/sockopt"
)

// socket6 is the transport's IPv6 socket, bound to [::] on the IPv4
// socket's port and IPv6-only. IPv6 has no broadcast: on each IPv6 link
// served the socket joins the link-local group (Network.Broadcast) that
// stands for it, and what TSP broadcasts goes there; answers go back
// unicast to the sender's address, link-local ones with their zone.
type socket6 struct {
	conn *net.UDPConn
	pc   *ipv6.PacketConn
	tx   *sockopt.TxStamper // nil where the kernel gives no transmit stamps
}

// setup prepares the socket for the IPv6 networks in nets:
//
//   - IPV6_PKTINFO on received datagrams (the arrival interface, which
//     places a link-local source on its link, and the destination);
//   - the group joined on each network's interface, with the outgoing
//     interface set to the first (each send names its own through
//     IPV6_PKTINFO, which the socket-wide setting cannot do for several);
//   - multicast loopback off, so that the daemon does not hear its own
//     group datagrams (BSD dropped its own broadcasts by name; both hold);
//   - hop limit 1 for the group: scope 2 stays on the link anyway.
//
// Kernel timestamps and the receive buffer are as on IPv4.
func (s *socket6) setup(nets []Network, rcvbuf int, log logrus.FieldLogger) error {
	if err := s.pc.SetControlMessage(ipv6.FlagDst|ipv6.FlagInterface, true); err != nil {
		return fmt.Errorf("tsp: enable IPV6_PKTINFO: %w", err)
	}
	first := true
	for _, n := range nets {
		if !n.IPv6() {
			continue
		}
		ifi, err := net.InterfaceByIndex(n.Index)
		if err != nil {
			return fmt.Errorf("tsp: interface %s: %w", n.Interface, err)
		}
		if err := s.pc.JoinGroup(ifi, &net.UDPAddr{IP: n.Broadcast.AsSlice()}); err != nil {
			return fmt.Errorf("tsp: join group %v on %s: %w", n.Broadcast, n.Interface, err)
		}
		if first {
			if err := s.pc.SetMulticastInterface(ifi); err != nil {
				return fmt.Errorf("tsp: multicast interface %s: %w", n.Interface, err)
			}
			first = false
		}
		log.WithFields(logrus.Fields{"group": n.Broadcast.String(), "interface": n.Interface}).Debug("tsp: joined group")
	}
	if err := s.pc.SetMulticastLoopback(false); err != nil {
		return fmt.Errorf("tsp: multicast loopback off: %w", err)
	}
	if err := s.pc.SetMulticastHopLimit(1); err != nil {
		return fmt.Errorf("tsp: multicast hop limit: %w", err)
	}
	s.tx, _ = setupSocket(s.conn, rcvbuf, log)
	return nil
}

// parse6 reads IPV6_PKTINFO.
func parse6(oob []byte) (int, netip.Addr) {
	var cm ipv6.ControlMessage
	if cm.Parse(oob) != nil {
		return 0, netip.Addr{}
	}
	a, _ := netip.AddrFromSlice(cm.Dst)
	return cm.IfIndex, a
}

// errNoIPv6 is a send to an IPv6 address by a transport that serves no
// IPv6 network or peer.
var errNoIPv6 = errors.New("no IPv6 socket: the daemon serves no IPv6 network or peer")

func (s *socket6) stamper() *sockopt.TxStamper {
	if s == nil {
		return nil
	}
	return s.tx
}

func (s *socket6) close() error {
	if s == nil {
		return nil
	}
	return s.conn.Close()
}

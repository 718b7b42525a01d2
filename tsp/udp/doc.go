// Package udp is the UDP transport of TSP, the protocol whose wire format
// package tsp owns. It owns everything that touches the network:
//
//   - the sockets (port 525; IPv4 with SO_BROADCAST and IP_PKTINFO, IPv6
//     with the link-local group and IPV6_PKTINFO; kernel timestamps) and
//     the reader goroutines that deliver Received datagrams on
//     Transport.Packets;
//   - the networks served (Network, BSD's struct netinfo: an IPv4 subnet
//     or an IPv6 link), found by Discover from a go-sockaddr template,
//     BSD's -n / -i filters and the family rule, or the single peers
//     network of peers mode, where a broadcast is unicast to every peer;
//   - the receiver's checks, in BSD readmsg's order (length, version, NUL
//     in the name, known network, own echo), and the counters of what was
//     sent, received and dropped and why (Stats, DropReason).
//
// # IPv6
//
// IPv6 has no broadcast. An IPv6 link is served through a link-local
// multicast group, ff02::20d by default (DefaultGroup says why it is
// free; --ipv6-group changes it): the transport's IPv6 socket (one per
// family, on the same port) joins it on every IPv6 interface served,
// with multicast loopback off and IPV6_PKTINFO on, and what TSP
// broadcasts is sent to it out of the link's interface. Answers are
// unicast to the sender's address as it came: a link-local one keeps its
// zone (fe80::1%eth0), which is also how a peers-mode entry names one
// (ParsePeer). Kernel receive and transmit timestamps, the rate limits
// and the auth trailer are the same on both families. ICMPv6 has no
// timestamp messages, so BSD daemons, measured by ICMP, can only be on
// IPv4; BSD's timed never spoke IPv6 anyway.
//
// # One election per link
//
// An IPv6 link is one network, whatever prefixes it holds: one per
// interface, its address our link-local one, and every source of the
// link on it (a link-local source by its zone, another by the link's
// prefixes and the interface it came in by). The group reaches every
// daemon of the link and nothing beyond it, as a broadcast reaches its
// subnet: the daemons that serve a link on one family all hear each
// other, and TSP's election gives them one master.
//
// A link that has both families is served on one of them, or on both
// (Family): auto takes IPv4 where the interface has an IPv4 network
// (where BSD daemons may be) and IPv6 where it has none (and has a global
// or unique-local address: not a container's veth); ipv4 and ipv6 force
// it. Under those a daemon never runs two elections on one link, and the
// dual-stack daemons of a link under one --family all choose alike (auto
// depends only on what the interface holds), so they never split between
// two elections. Two masters on one wire come then from daemons with no
// family in common, an IPv4-only host beside an IPv6-only one: they
// cannot exchange a datagram, and are two TSP networks, as two IPv4
// subnets on one wire are for BSD. A dual-stack daemon that serves a
// link on IPv4 listens to the link's group all the same, and warns once
// per source of TSP heard there: so the split is seen, not guessed.
//
// both serves a dual-stack interface on both families, as two networks
// (SameLink; LinkOf gives the election their link): the daemon joins the
// two TSP networks of the wire as a gateway does, and the election's
// rule for hosts that span a link (go doc ./election, "One master per
// link") keeps one master on it while such a daemon is up. It is the
// setting for the dual-stack daemons of a link that mixes IPv4-only
// (BSD's among them), IPv6-only and dual-stack hosts. It is not the
// default: where no IPv6-only daemons are, it would double the
// election's traffic for nothing and have ours outrank BSD's masters,
// while auto behaves as BSD's daemon does, and warns when the link turns
// out to hold IPv6-only daemons.
//
// It decides nothing about elections or clocks: it sends what it is given
// and delivers what passes the checks. Its errors and log lines say "tsp:",
// the name a sysadmin knows the protocol by.
package udp

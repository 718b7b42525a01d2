// Package udp is the UDP transport of TSP, the protocol whose wire format
// package tsp owns. It owns everything that touches the network:
//
//   - the socket (port 525, SO_BROADCAST, IP_PKTINFO, kernel receive
//     timestamps) and the reader goroutine that delivers Received
//     datagrams on Transport.Packets;
//   - the networks served (Network, BSD's struct netinfo), found by
//     Discover from a go-sockaddr template and BSD's -n / -i filters, or
//     the single peers network of peers mode, where a broadcast is
//     unicast to every peer;
//   - the receiver's checks, in BSD readmsg's order (length, version, NUL
//     in the name, known network, own echo), and the counters of what was
//     sent, received and dropped and why (Stats, DropReason).
//
// It decides nothing about elections or clocks: it sends what it is given
// and delivers what passes the checks. Its errors and log lines say "tsp:",
// the name a sysadmin knows the protocol by.
package udp

// Package netbench is the pure and the privileged parts of `make
// bench-net` (cmd/bench-net): names and addresses for one run's network
// namespaces, veth pairs and bridge; setting them up and tearing them
// down with ip(8); the daemons' simulated clocks; and the figures drawn
// from the samples (spread percentiles, the time the spread stays under
// a bound for good, packets per slave per round) and their table.
//
// It knows the daemons only through their command line, `timedc status`
// JSON and metrics text, never their internals.
package netbench

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
)

// MaxDaemons bounds N: interface names must fit IFNAMSIZ (15 bytes), and
// the addresses one /16.
const MaxDaemons = 999

// Prefix begins every name a run makes (namespaces, links), so that an
// operator can tell them from others' (`ip netns | grep ^tbn-`).
const Prefix = "tbn"

// Names are one run's names. Run is random, so two runs at once (or a
// run and what a killed one left) never collide.
type Names struct {
	Run string // 6 hex digits
}

// NewNames draws a run id.
func NewNames() (Names, error) {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Names{}, fmt.Errorf("run id: %w", err)
	}
	return Names{Run: hex.EncodeToString(b[:])}, nil
}

// Bridge is the run's bridge: "tbn1a2b3c".
func (n Names) Bridge() string { return Prefix + n.Run }

// Netns is daemon i's network namespace: "tbn-1a2b3c-7".
func (n Names) Netns(i int) string { return Prefix + "-" + n.Run + "-" + strconv.Itoa(i) }

// Veth is daemon i's veth pair: the end on the bridge and the end moved
// into its namespace (renamed eth0 there). At most 13 bytes.
func (n Names) Veth(i int) (host, peer string) {
	s := strconv.Itoa(i)
	return Prefix + n.Run + "h" + s, Prefix + n.Run + "p" + s
}

// Host is daemon i's host name, sent in its packets.
func (n Names) Host(i int) string { return "h" + strconv.Itoa(i) }

// Subnet holds every daemon's address. Nothing in the host's own
// namespace has an address on the bridge, so runs at once may share it.
var Subnet = netip.MustParsePrefix("10.99.0.0/16")

// Addr is daemon i's address in Subnet: 10.99.i/200.i%200+1, never a
// network or broadcast address.
func (n Names) Addr(i int) netip.Addr {
	b := Subnet.Addr().As4()
	b[2], b[3] = byte(i/200), byte(i%200+1)
	return netip.AddrFrom4(b)
}

// Subnet6 holds every daemon's IPv6 address on an IPv6 link (a
// unique-local /64, RFC 4193); the link-local ones are fe80::i+1.
var Subnet6 = netip.MustParsePrefix("fd7e:d6::/64")

// Addr6 is daemon i's address in Subnet6: fd7e:d6::i+1.
func (n Names) Addr6(i int) netip.Addr {
	b := Subnet6.Addr().As16()
	b[14], b[15] = byte((i+1)>>8), byte(i+1)
	return netip.AddrFrom16(b)
}

// LinkLocal is daemon i's link-local address: fe80::i+1.
func (n Names) LinkLocal(i int) netip.Addr {
	b := netip.MustParseAddr("fe80::").As16()
	b[14], b[15] = byte((i+1)>>8), byte(i+1)
	return netip.AddrFrom16(b)
}

// Check refuses an n the names cannot serve.
func Check(n int) error {
	if n < 2 || n > MaxDaemons {
		return fmt.Errorf("%d daemons: accepted 2 to %d", n, MaxDaemons)
	}
	return nil
}

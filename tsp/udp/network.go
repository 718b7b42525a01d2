package udp

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	sockaddr "github.com/hashicorp/go-sockaddr"
	sockaddrtemplate "github.com/hashicorp/go-sockaddr/template"
)

// Network is one network the transport serves, BSD's struct netinfo: the
// interface, our address on it, the network that decides whether a source
// is "on" it, and where a broadcast goes. Network is a comparable value,
// so it can key the caller's per-network state.
//
// An IPv4 network is an interface address and its subnet, as BSD's. An
// IPv6 network is a link: one per interface, whatever prefixes it holds,
// since the multicast group that stands for the broadcast reaches the
// whole link and nothing beyond it. Its Addr is our link-local address
// there (zoned: the source the kernel picks for a link-scope group), its
// Prefix the interface's first global or unique-local prefix (fe80::/64
// where it has none), and its Broadcast the group.
type Network struct {
	Interface string       // interface name ("eth0"), or "peers"
	Index     int          // interface index; 0 for the peers network
	Addr      netip.Addr   // our address on the network
	Prefix    netip.Prefix // the network: Addr masked (IPv6: see above)
	// Broadcast is where what TSP broadcasts goes: the IPv4 broadcast
	// address, or the IPv6 link-local multicast group; invalid for the
	// peers network.
	Broadcast netip.Addr
	// Peers marks the single network of peers mode: broadcasting on it is
	// unicast to every configured peer, and every peer is on it.
	Peers bool
}

// IPv6 reports whether n is an IPv6 link (multicast, no BSD peers).
func (n Network) IPv6() bool { return !n.Peers && n.Addr.Is6() }

// SameLink reports whether n and o are the two families of one link: an
// IPv4 network and an IPv6 one on the same interface (--family both).
func (n Network) SameLink(o Network) bool {
	return !n.Peers && !o.Peers && n.Index != 0 && n.Index == o.Index && n.Addr.Is4() != o.Addr.Is4()
}

// LinkOf is the link network i of nets spans with another (its
// interface index, for election.Config.Link), or 0 when no other network
// of nets is its link's other family.
func LinkOf(nets []Network, i int) int {
	for j, o := range nets {
		if j != i && nets[i].SameLink(o) {
			return nets[i].Index
		}
	}
	return 0
}

func (n Network) String() string {
	switch {
	case n.Peers:
		return "peers"
	case n.IPv6():
		return fmt.Sprintf("%s %v (%v, group %v)", n.Interface, n.Addr, n.Prefix, n.Broadcast)
	}
	return fmt.Sprintf("%s %v (%v, broadcast %v)", n.Interface, n.Addr, n.Prefix, n.Broadcast)
}

// DefaultGroup is the IPv6 link-local multicast group that stands for
// IPv4's broadcast: ff02::20d, whose group ID is 0x20d = 525, timed's
// port. IANA has assigned TSP no IPv6 group (TSP predates IPv6), so the
// choice is ours and configurable (Selection.Group, --ipv6-group). It is
// free: it is in neither IANA's table of link-local scope addresses
// (ff02::1 to ff02::6f, ff02::fb, ff02::1:1 to ff02::1:6, the
// solicited-node and node-information blocks) nor in its variable-scope
// table, which holds for ff02:: too (its neighbours there are ff0x::201
// to ff0x::206, rwho among them, and ff0x::2c0-2ff); IANA reserves every
// address it does not list. The group's scope (2, link) keeps it on the
// link, as a broadcast stays on its subnet.
var DefaultGroup = netip.MustParseAddr("ff02::20d")

// Family says which address family serves a link that has both.
type Family string

const (
	// FamilyAuto serves IPv4 on an interface with a selected IPv4
	// address (where BSD daemons may be) and IPv6 on one with IPv6 only,
	// a global or unique-local address among them.
	FamilyAuto Family = "auto"
	FamilyIPv4 Family = "ipv4" // IPv4 only: BSD's choice
	FamilyIPv6 Family = "ipv6" // IPv6 only
	// FamilyBoth serves a link that has both families on both, as two
	// networks of one election (election.Config.Link): the daemon spans
	// the link, and the spanning daemons keep one master on it for the
	// IPv4-only, IPv6-only and dual-stack daemons together. Elsewhere it
	// is auto.
	FamilyBoth Family = "both"
)

// FamilyValues lists the accepted values, for messages.
const FamilyValues = "auto, ipv4, ipv6, both"

// ParseFamily accepts auto, ipv4, ipv6 and both ("" is auto).
func ParseFamily(s string) (Family, error) {
	switch f := Family(strings.ToLower(strings.TrimSpace(s))); f {
	case "", FamilyAuto:
		return FamilyAuto, nil
	case FamilyIPv4, FamilyIPv6, FamilyBoth:
		return f, nil
	}
	return "", fmt.Errorf("family %q: accepted: %s", s, FamilyValues)
}

// CheckGroup accepts an IPv6 link-local scope multicast address (ff02::/16
// or a transient ff12::/16).
func CheckGroup(a netip.Addr) error {
	if !a.Is6() || a.Is4In6() || !a.IsLinkLocalMulticast() || a.Zone() != "" {
		return fmt.Errorf("%v is not an IPv6 link-local multicast address (ff02::/16), e.g. %v", a, DefaultGroup)
	}
	return nil
}

// Selection chooses the networks to serve.
type Selection struct {
	// Template is a go-sockaddr template (empty: DefaultInterfaces).
	Template string
	UseOnly  []netip.Prefix // BSD -n: serve only networks matching these
	Ignore   []netip.Prefix // BSD -i: do not serve networks matching these
	Family   Family         // on a link with both families ("": auto)
	Group    netip.Addr     // IPv6 group (zero: DefaultGroup)
}

// DefaultInterfaces is the selection used when no template is given: every
// up, broadcast-capable, non-loopback IPv4 interface, as BSD timed takes
// them (it also took point-to-point links; name them in a template), and
// every up, multicast-capable, non-loopback IPv6 interface with a global
// or unique-local address. An interface with link-local addresses only
// (the host side of every container's veth) is left out: on a container
// host each would be a network (with --family ipv6, a template may name
// one).
const DefaultInterfaces = `{{ GetAllInterfaces | ` + default4 + ` | join "address" " " }} {{ GetAllInterfaces | ` + default6 + ` | join "address" " " }}`

const (
	default4 = `include "type" "IPv4" | include "flags" "up" | include "flags" "broadcast" | exclude "flags" "loopback"`
	default6 = `include "type" "IPv6" | include "flags" "up" | include "flags" "multicast" | exclude "flags" "loopback" | include "flags" "global unicast"`
)

// ErrNoNetwork is returned when interface selection and the -n/-i filters
// leave nothing to serve.
var ErrNoNetwork = errors.New("no network to serve")

// Discover returns the networks the host's interfaces offer, selected by a
// go-sockaddr template (empty: DefaultInterfaces), then by BSD's -n
// (UseOnly) / -i (Ignore) filters, which cannot be combined, and last by
// the family rule on links that have both. An IPv4 network matches a
// filter prefix when the prefix contains our address on it, an IPv6 one
// when it contains any of our IPv6 addresses on the link. A -n prefix that
// matches no selected address is an error, as is a selection that leaves
// nothing.
//
// The template is either a bare pipeline of IfAddrs
// (`GetAllInterfaces | include "name" "^eth"`) or a full go-sockaddr
// template whose output is a list of addresses
// (`{{ GetAllInterfaces | include "name" "^eth" | join "address" " " }}`).
func Discover(sel Selection) ([]Network, error) {
	f, err := discover(sel)
	return f.nets, err
}

// found is what discover found: the networks to serve, each IPv6 one's
// on-link prefixes by interface index (the sources the transport takes
// as on the link besides the link-local ones), and the IPv6 links of the
// interfaces served on IPv4 by the family rule (auto), where the
// transport listens only to say that IPv6-only daemons are there.
type found struct {
	nets  []Network
	links map[int][]netip.Prefix
	other []Network
}

// discover is Discover, with all it found.
func discover(sel Selection) (found, error) {
	ifs, err := sockaddr.GetAllInterfaces()
	if err != nil {
		return found{}, fmt.Errorf("list interfaces: %w", err)
	}
	return selectNetworks(ifs, sel)
}

// candidate is a network found, before the filters.
type candidate struct {
	Network
	addrs  []netip.Addr   // our addresses on it (IPv6: every one of the link)
	onLink []netip.Prefix // IPv6: the link's prefixes but link-local
}

// same: c is a network cands has (a second address on an IPv4 subnet, a
// second address on an IPv6 link).
func (c candidate) in(cands []candidate) bool {
	return slices.ContainsFunc(cands, func(o candidate) bool {
		return c.IPv6() && o.IPv6() && o.Index == c.Index || c.Addr.Is4() && o.Addr.Is4() && o.Prefix == c.Prefix
	})
}

// selectNetworks is discover on a given interface list, so that tests can
// feed it synthetic interfaces.
func selectNetworks(ifs sockaddr.IfAddrs, sel Selection) (found, error) {
	useOnly, ignore := sel.UseOnly, sel.Ignore
	if len(useOnly) > 0 && len(ignore) > 0 {
		return found{}, errors.New("networks to use only (-n) and networks to ignore (-i) cannot be combined")
	}
	family := sel.Family
	if family == "" {
		family = FamilyAuto
	}
	group := sel.Group
	if !group.IsValid() {
		group = DefaultGroup
	}
	if err := CheckGroup(group); err != nil {
		return found{}, err
	}
	tmpl := sel.Template
	if strings.TrimSpace(tmpl) == "" {
		// DefaultInterfaces, applied to the list we were given.
		tmpl = `{{ . | ` + default4 + ` | join "address" " " }} {{ . | ` + default6 + ` | join "address" " " }}`
	}
	addrs, err := evalTemplate(tmpl, ifs)
	if err != nil {
		return found{}, err
	}
	var cands []candidate
	for _, a := range addrs {
		cs, err := candidatesFor(a, ifs, group)
		if err != nil {
			return found{}, err
		}
		for _, c := range cs {
			if !c.in(cands) {
				cands = append(cands, c)
			}
		}
	}
	if len(cands) == 0 {
		return found{}, fmt.Errorf("%w: interface selection %q matched no interface with an IPv4 or IPv6 address", ErrNoNetwork, tmpl)
	}
	// The family rule first: it says which network serves a link, and
	// the filters choose among those.
	cands, shadowed := byFamily(cands, family)
	for _, p := range useOnly {
		if !slices.ContainsFunc(cands, func(c candidate) bool { return anyAddrIn([]netip.Prefix{p}, c.addrs) }) {
			return found{}, fmt.Errorf("%w: network %v (-n) matches no address of the networks selected with family %s (%s)", ErrNoNetwork, p, family, candidateList(cands))
		}
	}
	f := found{links: map[int][]netip.Prefix{}}
	for _, c := range cands {
		if len(useOnly) > 0 && !anyAddrIn(useOnly, c.addrs) || anyAddrIn(ignore, c.addrs) {
			continue
		}
		f.nets = append(f.nets, c.Network)
		if c.IPv6() {
			f.links[c.Index] = c.onLink
		}
	}
	if len(f.nets) == 0 {
		return found{}, fmt.Errorf("%w: the -n/-i filters removed every network (%s)", ErrNoNetwork, candidateList(cands))
	}
	for _, c := range shadowed {
		if slices.ContainsFunc(f.nets, func(n Network) bool { return n.Index == c.Index }) {
			f.other = append(f.other, c.Network)
		}
	}
	return f, nil
}

// byFamily applies the family rule: one family per link. With auto, an
// interface with an IPv4 network is served on IPv4 only, and an IPv6 link
// with link-local addresses only (the host side of a container's veth)
// is not served: a template that did not ask for IPv6 alone would
// otherwise take every one of them. --family ipv6 serves it.
//
// With both, an interface with both families is served on both (the
// daemon spans the link: SameLink); the rest is as with auto.
//
// It returns the candidates kept, and apart the IPv6 links that auto left
// to IPv4.
func byFamily(cands []candidate, family Family) (kept, shadowed []candidate) {
	has4 := map[int]bool{}
	for _, c := range cands {
		if c.Addr.Is4() {
			has4[c.Index] = true
		}
	}
	for _, c := range cands {
		switch {
		case c.Addr.Is4() && family == FamilyIPv6,
			c.IPv6() && family == FamilyIPv4,
			c.IPv6() && (family == FamilyAuto || family == FamilyBoth) && !has4[c.Index] && len(c.onLink) == 0:
		case c.IPv6() && family == FamilyAuto && has4[c.Index]:
			shadowed = append(shadowed, c)
		default:
			kept = append(kept, c)
		}
	}
	return kept, shadowed
}

func candidateList(cs []candidate) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.Interface+" "+c.Prefix.String())
	}
	return strings.Join(s, ", ")
}

// evalTemplate runs a go-sockaddr template with ifs as its data (".")
// and returns the addresses it printed. A bare pipeline is wrapped so that
// it prints addresses. Sources named in the template (GetAllInterfaces, …)
// read the host as go-sockaddr always does; tests start their templates
// from "." to run on synthetic interfaces.
func evalTemplate(tmpl string, ifs sockaddr.IfAddrs) ([]netip.Addr, error) {
	src := tmpl
	if !strings.Contains(src, "{{") {
		src = "{{ " + src + ` | join "address" " " }}`
	}
	out, err := sockaddrtemplate.ParseIfAddrs(src, ifs)
	if err != nil {
		return nil, fmt.Errorf("interface template %q: %w", tmpl, err)
	}
	var addrs []netip.Addr
	for _, f := range strings.Fields(out) {
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("interface template %q printed %q, not an address", tmpl, f)
		}
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// ifAddr is one address of an interface, with its prefix length.
type ifAddr struct {
	prefix netip.Prefix // the address with its length, not masked
	iface  int          // index into ifs
}

// addrsOf lists ifs' addresses as prefixes (address/length).
func addrsOf(ifs sockaddr.IfAddrs) []ifAddr {
	var out []ifAddr
	for i, ifa := range ifs {
		switch ip := sockaddr.ToIPAddr(ifa.SockAddr); {
		case ip == nil:
		case sockaddr.ToIPv4Addr(ifa.SockAddr) != nil:
			v4 := sockaddr.ToIPv4Addr(ifa.SockAddr)
			out = append(out, ifAddr{netip.PrefixFrom(uint32Addr(uint32(v4.Address)), v4.Maskbits()), i})
		default:
			v6 := sockaddr.ToIPv6Addr(ifa.SockAddr)
			if v6 == nil {
				continue
			}
			a, ok := netip.AddrFromSlice(v6.NetIP().To16())
			if !ok {
				continue
			}
			out = append(out, ifAddr{netip.PrefixFrom(a, v6.Maskbits()), i})
		}
	}
	return out
}

// candidatesFor finds the interfaces holding address a and describes the
// network there: an IPv4 subnet, or an IPv6 link. A link-local IPv6
// address may be on several interfaces; each is a link.
func candidatesFor(a netip.Addr, ifs sockaddr.IfAddrs, group netip.Addr) ([]candidate, error) {
	a = a.Unmap().WithZone("")
	all := addrsOf(ifs)
	var out []candidate
	for _, x := range all {
		if x.prefix.Addr() != a {
			continue
		}
		ifc := ifs[x.iface].Interface
		if a.Is4() {
			v4 := sockaddr.ToIPv4Addr(ifs[x.iface].SockAddr)
			return []candidate{{Network: Network{
				Interface: ifc.Name,
				Index:     ifc.Index,
				Addr:      a,
				Prefix:    x.prefix.Masked(),
				Broadcast: uint32Addr(uint32(v4.BroadcastAddress())),
			}, addrs: []netip.Addr{a}}}, nil
		}
		out = append(out, linkOf(ifc.Index, ifc.Name, all, ifs, group))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("interface selection chose %v, which is on no interface", a)
	}
	return out, nil
}

// linkOf describes the IPv6 link of interface index: our link-local
// address there (zoned), its first global or unique-local prefix, and
// every IPv6 address we have on it.
func linkOf(index int, name string, all []ifAddr, ifs sockaddr.IfAddrs, group netip.Addr) candidate {
	c := candidate{Network: Network{Interface: name, Index: index, Broadcast: group}}
	var routable netip.Prefix
	for _, x := range all {
		if ifs[x.iface].Interface.Index != index || !x.prefix.Addr().Is6() {
			continue
		}
		a := x.prefix.Addr()
		c.addrs = append(c.addrs, a)
		if !a.IsLinkLocalUnicast() {
			c.onLink = append(c.onLink, x.prefix.Masked())
		}
		switch {
		case a.IsLinkLocalUnicast() && !c.Addr.IsValid():
			c.Addr = a.WithZone(name)
			if !routable.IsValid() {
				c.Prefix = x.prefix.Masked()
			}
		case !a.IsLinkLocalUnicast() && !routable.IsValid():
			routable = x.prefix.Masked()
			c.Prefix = routable
		}
	}
	if !c.Addr.IsValid() && len(c.addrs) > 0 {
		c.Addr = c.addrs[0] // no link-local address: the first one
	}
	return c
}

func uint32Addr(u uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)})
}

func anyAddrIn(prefixes []netip.Prefix, addrs []netip.Addr) bool {
	for _, p := range prefixes {
		for _, a := range addrs {
			if p.Contains(a) {
				return true
			}
		}
	}
	return false
}

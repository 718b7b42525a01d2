package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// ParsePeer reads one peers-mode entry: host:port, [IPv6]:port, or
// [fe80::1%eth0]:port for a link-local address, whose zone must name an
// interface of this host (an index is turned into its name, the form the
// kernel gives back on received datagrams, so that the peer is recognised).
// For an address it returns addr; for a host name, host, left to the
// caller to resolve, and the port in addr (whose address is invalid). The errors say what is wrong and what
// is accepted: an IPv6 address without brackets, a bracket not closed, a
// port missing or out of range, a zone on no interface, a link-local
// address without its zone.
func ParsePeer(s string) (addr netip.AddrPort, host string, err error) {
	h, ps, err := net.SplitHostPort(s)
	if err != nil {
		var hint string
		switch {
		case strings.HasPrefix(s, "[") && !strings.Contains(s, "]"):
			hint = "missing ']'"
		case strings.HasPrefix(s, "[") && !strings.Contains(s, "]:"):
			hint = "missing the port after ']'"
		case strings.Count(s, ":") > 1 && !strings.HasPrefix(s, "["):
			hint = "an IPv6 address goes in brackets, [2001:db8::1]:525"
		case !strings.Contains(s, ":"):
			hint = "missing the port"
		default:
			hint = strings.TrimPrefix(err.Error(), "address "+s+": ")
		}
		return netip.AddrPort{}, "", fmt.Errorf("peer %q: %s", s, hint)
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || port == 0 {
		return netip.AddrPort{}, "", fmt.Errorf("peer %q: port %q, accepted: 1-65535", s, ps)
	}
	if h == "" {
		return netip.AddrPort{}, "", fmt.Errorf("peer %q: no host", s)
	}
	a, err := netip.ParseAddr(h)
	if err != nil {
		if strings.ContainsAny(h, ":%[] /") {
			return netip.AddrPort{}, "", fmt.Errorf("peer %q: %q is neither an address nor a host name", s, h)
		}
		return netip.AddrPortFrom(netip.Addr{}, uint16(port)), h, nil
	}
	a = a.Unmap()
	if a.Is6() && !strings.HasPrefix(s, "[") {
		return netip.AddrPort{}, "", fmt.Errorf("peer %q: an IPv6 address goes in brackets, [%v]:%d", s, a, port)
	}
	if a.IsUnspecified() || a.IsMulticast() {
		return netip.AddrPort{}, "", fmt.Errorf("peer %q: not a unicast address", s)
	}
	if a, err = checkZone(a); err != nil {
		return netip.AddrPort{}, "", fmt.Errorf("peer %q: %w", s, err)
	}
	return netip.AddrPortFrom(a, uint16(port)), "", nil
}

// errZone is wrapped by every zone error.
var errZone = errors.New("zone")

// checkZone checks a's zone: present on a link-local IPv6 address (and
// only there), naming an interface of this host (by name, or by index,
// which becomes the name).
func checkZone(a netip.Addr) (netip.Addr, error) {
	zone := a.Zone()
	switch {
	case zone == "" && a.Is6() && a.IsLinkLocalUnicast():
		return a, fmt.Errorf("%w: link-local address %v needs its interface, [%v%%eth0]", errZone, a, a)
	case zone == "":
		return a, nil
	case !a.IsLinkLocalUnicast():
		return a, fmt.Errorf("%w: %q on %v: only a link-local address (fe80::/10) takes a zone", errZone, zone, a.WithZone(""))
	}
	var ifi *net.Interface
	var err error
	if i, aerr := strconv.Atoi(zone); aerr == nil {
		ifi, err = net.InterfaceByIndex(i)
	} else {
		ifi, err = net.InterfaceByName(zone)
	}
	if err != nil {
		return a, fmt.Errorf("%w: unknown zone %q: no such interface on this host (%s)", errZone, zone, interfaceNames())
	}
	return a.WithZone(ifi.Name), nil
}

func interfaceNames() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return "interfaces unknown"
	}
	var s []string
	for _, i := range ifs {
		s = append(s, i.Name)
	}
	return "interfaces: " + strings.Join(s, ", ")
}

package udp

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	sockaddr "github.com/hashicorp/go-sockaddr"
	sockaddrtemplate "github.com/hashicorp/go-sockaddr/template"
)

// Network is one network the transport serves, BSD's struct netinfo: the
// interface, our address on it, the network (address & mask) that decides
// whether a source is "on" it, and where a broadcast goes. Network is a
// comparable value, so it can key the caller's per-network state.
type Network struct {
	Interface string       // interface name ("eth0"), or "peers"
	Index     int          // interface index; 0 for the peers network
	Addr      netip.Addr   // our address on the network
	Prefix    netip.Prefix // the network: Addr masked
	Broadcast netip.Addr   // broadcast address; invalid for the peers network
	// Peers marks the single network of peers mode: broadcasting on it is
	// unicast to every configured peer, and every peer is on it.
	Peers bool
}

func (n Network) String() string {
	if n.Peers {
		return "peers"
	}
	return fmt.Sprintf("%s %v (%v, broadcast %v)", n.Interface, n.Addr, n.Prefix, n.Broadcast)
}

// DefaultInterfaces is the selection used when no template is given: every
// up, broadcast-capable, non-loopback IPv4 interface, as BSD timed takes
// them (it also took point-to-point links; name them in a template).
const DefaultInterfaces = "GetAllInterfaces | " + defaultFilter

const defaultFilter = `include "type" "IPv4" | include "flags" "up" | include "flags" "broadcast" | exclude "flags" "loopback"`

// ErrNoNetwork is returned when interface selection and the -n/-i filters
// leave nothing to serve.
var ErrNoNetwork = errors.New("no network to serve")

// Discover returns the networks the host's interfaces offer, selected by a
// go-sockaddr template (empty: DefaultInterfaces) and then by BSD's -n
// (useOnly) / -i (ignore) filters, which cannot be combined. A network
// matches a filter prefix when the prefix contains our address on it.
//
// The template is either a bare pipeline of IfAddrs
// (`GetAllInterfaces | include "name" "^eth"`) or a full go-sockaddr
// template whose output is a list of addresses
// (`{{ GetAllInterfaces | include "name" "^eth" | join "address" " " }}`).
// Only IPv4 addresses are used.
func Discover(tmpl string, useOnly, ignore []netip.Prefix) ([]Network, error) {
	ifs, err := sockaddr.GetAllInterfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	return selectNetworks(ifs, tmpl, useOnly, ignore)
}

// selectNetworks is Discover on a given interface list, so that tests can
// feed it synthetic interfaces.
func selectNetworks(ifs sockaddr.IfAddrs, tmpl string, useOnly, ignore []netip.Prefix) ([]Network, error) {
	if len(useOnly) > 0 && len(ignore) > 0 {
		return nil, errors.New("networks to use only (-n) and networks to ignore (-i) cannot be combined")
	}
	if strings.TrimSpace(tmpl) == "" {
		// DefaultInterfaces, applied to the list we were given.
		tmpl = ". | " + defaultFilter
	}
	addrs, err := evalTemplate(tmpl, ifs)
	if err != nil {
		return nil, err
	}
	var nets []Network
	var found []string
	for _, a := range addrs {
		n, ok, err := networkFor(a, ifs)
		if err != nil {
			return nil, err
		}
		if !ok || containsPrefix(nets, n.Prefix) {
			continue // not IPv4, or a second address on a network we have
		}
		found = append(found, n.Prefix.String())
		if len(useOnly) > 0 && !anyContains(useOnly, n.Addr) || anyContains(ignore, n.Addr) {
			continue
		}
		nets = append(nets, n)
	}
	if len(nets) == 0 {
		if len(found) == 0 {
			return nil, fmt.Errorf("%w: interface selection %q matched no IPv4 interface", ErrNoNetwork, tmpl)
		}
		return nil, fmt.Errorf("%w: the -n/-i filters removed every network (%s)", ErrNoNetwork, strings.Join(found, ", "))
	}
	return nets, nil
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

// networkFor finds the interface holding address a and describes the
// network. ok is false for a non-IPv4 address, which TSP cannot use.
func networkFor(a netip.Addr, ifs sockaddr.IfAddrs) (n Network, ok bool, err error) {
	a = a.Unmap()
	if !a.Is4() {
		return Network{}, false, nil
	}
	for _, ifa := range ifs {
		v4 := sockaddr.ToIPv4Addr(ifa.SockAddr)
		if v4 == nil || uint32(v4.Address) != ipv4Uint(a) {
			continue
		}
		bits := v4.Maskbits()
		prefix := netip.PrefixFrom(a, bits).Masked()
		return Network{
			Interface: ifa.Name,
			Index:     ifa.Index,
			Addr:      a,
			Prefix:    prefix,
			Broadcast: uint32Addr(uint32(v4.BroadcastAddress())),
		}, true, nil
	}
	return Network{}, false, fmt.Errorf("interface selection chose %v, which is on no interface", a)
}

func ipv4Uint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func uint32Addr(u uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)})
}

func containsPrefix(nets []Network, p netip.Prefix) bool {
	for _, n := range nets {
		if n.Prefix == p {
			return true
		}
	}
	return false
}

func anyContains(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

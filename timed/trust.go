package timed

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// resolveTrusted turns the -F list into the addresses the election
// machine matches source addresses against: trust binds to addresses, so
// a forged name from elsewhere is not trusted. An entry is a host name or
// address, with an optional :port (peers mode, where daemons share an
// address); without a port every port of the address is trusted. A name
// is resolved once, here, at start-up and at SIGHUP.
func resolveTrusted(hosts []string) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for _, h := range hosts {
		host, port := h, uint16(0)
		if hp, ps, err := net.SplitHostPort(h); err == nil {
			p, err := strconv.ParseUint(ps, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("trusted: %q: port %q: accepted: 1-65535", h, ps)
			}
			host, port = hp, uint16(p)
		}
		addrs, err := lookupIPv4(host)
		if err != nil {
			return nil, fmt.Errorf("trusted: %q: %w", h, err)
		}
		for _, a := range addrs {
			out = append(out, netip.AddrPortFrom(a, port))
		}
	}
	return out, nil
}

// lookupIPv4 resolves host to its IPv4 addresses (TSP is IPv4 only).
func lookupIPv4(host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
	if err != nil {
		return nil, fmt.Errorf("resolve: %w", err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no IPv4 address", host)
	}
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	return addrs, nil
}

package timed

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// trustRetry is how often -F names that did not resolve are looked up
// again (at boot, DNS or the other hosts may not be up yet).
const trustRetry = 10 * time.Second

// resolveTrusted turns the -F list into the addresses the election
// machine matches source addresses against: trust binds to addresses, so
// a forged name from elsewhere is not trusted. An entry is a host name or
// address (IPv6 too, fe80::1%eth0 for a link-local one), with an optional
// :port (peers mode, where daemons share an address; [2001:db8::1]:525);
// without a port every port of the address is trusted. A name trusts
// every address it resolves to, of both families.
//
// A malformed entry is an error. A name that does not resolve is returned
// in unresolved and trusts nothing until it does; the list is never nil
// when entries were given, since nil would trust everyone.
func resolveTrusted(ctx context.Context, hosts []string) (trusted []netip.AddrPort, unresolved []string, err error) {
	if len(hosts) == 0 {
		return nil, nil, nil
	}
	trusted = []netip.AddrPort{}
	for _, h := range hosts {
		host, port := h, uint16(0)
		if hp, ps, err := net.SplitHostPort(h); err == nil {
			p, err := strconv.ParseUint(ps, 10, 16)
			if err != nil || p == 0 {
				return nil, nil, fmt.Errorf("invalid trusted %q: port %q, accepted: 1-65535", h, ps)
			}
			host, port = hp, uint16(p)
		}
		if host == "" || strings.ContainsAny(host, " /") {
			return nil, nil, fmt.Errorf("invalid trusted %q: accepted: host, address, host:port or address:port", h)
		}
		addrs, err := lookupHost(ctx, host)
		if err != nil {
			unresolved = append(unresolved, h)
			continue
		}
		for _, a := range addrs {
			trusted = append(trusted, netip.AddrPortFrom(a, port))
		}
	}
	return trusted, unresolved, nil
}

// lookupHost resolves host to its addresses, IPv4 and IPv6; an address is
// itself.
func lookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve: %w", err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no address", host)
	}
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	return addrs, nil
}

// retryTrusted looks the -F list up again off the loop while some of its
// names do not resolve, and hands each better answer to the machine. A
// reload that changes the list ends the retries of the old one (gen).
func (d *Daemon) retryTrusted(hosts []string, gen uint64) {
	d.after(trustRetry, func() {
		if gen != d.trustGen {
			return
		}
		go func() {
			addrs, unresolved, _ := resolveTrusted(d.roundCtx, hosts)
			select {
			case d.callCh <- func() { d.trustedResolved(hosts, gen, addrs, unresolved) }:
			case <-d.roundCtx.Done():
			}
		}()
	})
}

func (d *Daemon) trustedResolved(hosts []string, gen uint64, addrs []netip.AddrPort, unresolved []string) {
	if gen != d.trustGen {
		return
	}
	d.setTrusted(addrs)
	if len(unresolved) == 0 {
		d.log.WithField("trusted", strings.Join(hosts, ",")).Info("every trusted host resolved")
		return
	}
	d.retryTrusted(hosts, gen)
}

// applyTrusted resolves hosts and gives the machine the result; names that
// do not resolve are retried in the background. It fails only on a
// malformed entry, leaving the old list in force.
func (d *Daemon) applyTrusted(hosts []string) error {
	addrs, unresolved, err := resolveTrusted(d.roundCtx, hosts)
	if err != nil {
		return err
	}
	d.trustGen++
	d.setTrusted(addrs)
	if len(unresolved) > 0 {
		d.log.WithField("unresolved", strings.Join(unresolved, ",")).
			Warn("trusted hosts that do not resolve are trusted only once they do; retrying")
		d.retryTrusted(hosts, d.trustGen)
	}
	return nil
}

// setTrusted gives every network's machine the list: trust is the host's.
func (d *Daemon) setTrusted(addrs []netip.AddrPort) {
	for i := range d.host.Nets() {
		d.host.Machine(i).SetTrusted(addrs)
	}
}

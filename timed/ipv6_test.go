package timed

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp/udp"
)

// TestResolveTrustedIPv6: -F takes IPv6 addresses, bare, bracketed with
// a port, and link-local with a zone.
func TestResolveTrustedIPv6(t *testing.T) {
	got, unresolved, err := resolveTrusted(context.Background(), []string{"2001:db8::7", "[2001:db8::8]:15250", "fe80::9%eth0"})
	if err != nil || len(unresolved) != 0 {
		t.Fatal(err, unresolved)
	}
	want := []netip.AddrPort{
		netip.MustParseAddrPort("[2001:db8::7]:0"),
		netip.MustParseAddrPort("[2001:db8::8]:15250"),
		netip.AddrPortFrom(netip.MustParseAddr("fe80::9%eth0"), 0),
	}
	if !slices.Equal(got, want) {
		t.Errorf("resolved %v, want %v", got, want)
	}
}

// TestResolvePeersIPv6: peers entries with brackets and zones become
// addresses, a zone given as an index becomes the interface's name, and
// the malformed ones are errors saying what is wrong.
func TestResolvePeersIPv6(t *testing.T) {
	lo := loopbackInterface(t)
	got, err := resolvePeers([]string{"[::1]:15250", "127.0.0.1:15251", "[fe80::1%" + lo.Name + "]:525", "[fe80::2%" + itoa(lo.Index) + "]:525", "localhost:9"})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.AddrPort{
		netip.MustParseAddrPort("[::1]:15250"),
		netip.MustParseAddrPort("127.0.0.1:15251"),
		netip.AddrPortFrom(netip.MustParseAddr("fe80::1%"+lo.Name), 525),
		netip.AddrPortFrom(netip.MustParseAddr("fe80::2%"+lo.Name), 525),
	}
	if !slices.Equal(got[:4], want) || !got[4].Addr().IsLoopback() || got[4].Port() != 9 {
		t.Errorf("resolved %v, want %v and localhost:9", got, want)
	}
	for in, msg := range map[string]string{
		"::1:525":                "brackets",
		"[::1:525":               "missing ']'",
		"[fe80::1%nosuchif]:525": `unknown zone "nosuchif"`,
	} {
		if _, err := resolvePeers([]string{in}); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: err = %v, want %q", in, err, msg)
		}
	}
}

// TestIsLocalIPv6: loopback and this host's IPv6 addresses are local; a
// link-local address is ours only with its own interface as zone.
func TestIsLocalIPv6(t *testing.T) {
	var s localAddrs
	now := time.Now()
	if !s.isLocal(netip.IPv6Loopback(), now) {
		t.Error("::1 is not local")
	}
	if s.isLocal(netip.MustParseAddr("2001:db8::dead"), now) {
		t.Error("a documentation address is local")
	}
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifi := range ifs {
		addrs, _ := ifi.Addrs()
		for _, a := range addrs {
			ip, _ := netip.AddrFromSlice(a.(*net.IPNet).IP)
			if !ip.Is6() || !ip.IsLinkLocalUnicast() {
				continue
			}
			if !s.isLocal(ip.WithZone(ifi.Name), now) {
				t.Errorf("%v%%%s is not local", ip, ifi.Name)
			}
			if s.isLocal(ip, now) || s.isLocal(ip.WithZone("nosuchif"), now) {
				t.Errorf("%v without its own zone is local", ip)
			}
			return
		}
	}
	t.Log("no link-local address on this host: the zone rule checked with loopback and a foreign address only")
}

// TestFallbackMeasurerIPv6: an IPv6 host is measured by the probe only:
// ICMPv6 has no timestamps, and the error says so.
func TestFallbackMeasurerIPv6(t *testing.T) {
	v6 := netip.MustParseAddrPort("[fe80::2%eth0]:525")
	probe := &countingMeasurer{ok: map[netip.AddrPort]bool{}, calls: map[netip.AddrPort]int{}}
	icmp := &countingMeasurer{ok: map[netip.AddrPort]bool{v6: true}, calls: map[netip.AddrPort]int{}}
	f := newFallbackMeasurer(probe, icmp)
	_, err := f.Measure(context.Background(), v6)
	if err == nil || !strings.Contains(err.Error(), "no ICMP timestamps over IPv6") || icmp.calls[v6] != 0 {
		t.Fatalf("err %v, ICMP calls %d", err, icmp.calls[v6])
	}
	probe.ok[v6] = true
	if _, err := f.Measure(context.Background(), v6); err != nil || f.method(v6) != "probe" {
		t.Fatalf("err %v, method %q", err, f.method(v6))
	}
}

// TestNetworkLabelIPv6: a link-local-only link's label names its
// interface, since fe80::/64 is every link's.
func TestNetworkLabelIPv6(t *testing.T) {
	ll := udp.Network{Interface: "eth1", Addr: netip.MustParseAddr("fe80::1%eth1"), Prefix: netip.MustParsePrefix("fe80::/64"), Broadcast: udp.DefaultGroup}
	gl := udp.Network{Interface: "eth2", Addr: netip.MustParseAddr("fe80::1%eth2"), Prefix: netip.MustParsePrefix("2001:db8::/64"), Broadcast: udp.DefaultGroup}
	if a, b := networkLabel(ll), networkLabel(gl); a != "fe80::/64%eth1" || b != "2001:db8::/64" {
		t.Errorf("labels %q, %q", a, b)
	}
}

func loopbackInterface(t *testing.T) net.Interface {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			return i
		}
	}
	t.Fatal("no loopback interface")
	return net.Interface{}
}

func itoa(i int) string { return strconv.Itoa(i) }

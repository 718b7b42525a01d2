package udp

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	sockaddr "github.com/hashicorp/go-sockaddr"
	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/internal/limit"
	"github.com/timed-project/timed/tsp"
)

// synthetic6 is synthetic with two more links: eth3, IPv6 only, with a
// link-local and a global address, and eth4, IPv6 only, link-local only.
func synthetic6() sockaddr.IfAddrs {
	mc := net.FlagUp | net.FlagMulticast
	eth3 := net.Interface{Index: 6, Name: "eth3", Flags: mc, MTU: 1500}
	eth4 := net.Interface{Index: 7, Name: "eth4", Flags: mc, MTU: 1500}
	return append(synthetic(),
		sockaddr.IfAddr{SockAddr: sockaddr.MustIPv6Addr("fe80::7/64"), Interface: eth3},
		sockaddr.IfAddr{SockAddr: sockaddr.MustIPv6Addr("2001:db8:1::7/64"), Interface: eth3},
		sockaddr.IfAddr{SockAddr: sockaddr.MustIPv6Addr("fd00:2::7/64"), Interface: eth3},
		sockaddr.IfAddr{SockAddr: sockaddr.MustIPv6Addr("fe80::8/64"), Interface: eth4},
	)
}

// TestSelectNetworksIPv6 checks that an IPv6 link is one network, with
// our link-local address (zoned) and the group, and the family rule.
func TestSelectNetworksIPv6(t *testing.T) {
	f, err := selectNetworks(synthetic6(), Selection{})
	if err != nil {
		t.Fatal(err)
	}
	nets, links := f.nets, f.links
	if got, want := names(nets), []string{"eth0", "eth1", "eth3"}; !slices.Equal(got, want) {
		t.Fatalf("auto: networks %v, want %v (eth0 has both: IPv4; eth4 link-local only)", got, want)
	}
	eth3 := Network{Interface: "eth3", Index: 6, Addr: netip.MustParseAddr("fe80::7%eth3"),
		Prefix: netip.MustParsePrefix("2001:db8:1::/64"), Broadcast: DefaultGroup}
	if nets[2] != eth3 {
		t.Errorf("eth3 = %v, want %v", nets[2], eth3)
	}
	if !slices.Equal(links[6], pfx("2001:db8:1::/64", "fd00:2::/64")) {
		t.Errorf("eth3's on-link prefixes = %v", links[6])
	}
	ll, err := sel6(Selection{Template: `. | include "name" "^eth4$"`, Family: FamilyIPv6})
	if err != nil || len(ll) != 1 || ll[0].Prefix != netip.MustParsePrefix("fe80::/64") || ll[0].Addr != netip.MustParseAddr("fe80::8%eth4") {
		t.Errorf("link-local-only eth4, named, family ipv6: %v, %v", ll, err)
	}
	// Under auto, a template without a type filter does not take the
	// link-local-only links (a container host's veths).
	if nets, err := sel6(Selection{Template: `. | exclude "flags" "loopback"`}); err != nil || slices.Contains(names(nets), "eth4") {
		t.Errorf("auto took a link-local-only link: %v, %v", names(nets), err)
	}
	if !nets[2].IPv6() || nets[0].IPv6() || (Network{Peers: true}).IPv6() {
		t.Error("IPv6() wrong")
	}
	if s := nets[2].String(); !strings.Contains(s, "group ff02::20d") || !strings.Contains(s, "fe80::7%eth3") {
		t.Errorf("String() = %q", s)
	}

	for _, tc := range []struct {
		family Family
		want   []string
	}{
		{FamilyIPv4, []string{"eth0", "eth1"}},
		{FamilyIPv6, []string{"eth3"}}, // eth0: link-local only; eth1: no IPv6
	} {
		nets, err := sel6(Selection{Family: tc.family})
		if err != nil {
			t.Fatal(err)
		}
		if got := names(nets); !slices.Equal(got, tc.want) {
			t.Errorf("family %s: %v, want %v", tc.family, got, tc.want)
		}

	}

	group := netip.MustParseAddr("ff02::1:7")
	nets, err = sel6(Selection{Template: `. | include "name" "^eth3$"`, Group: group})
	if err != nil || len(nets) != 1 || nets[0].Broadcast != group {
		t.Errorf("configured group: %v, %v", nets, err)
	}
}

// TestSelectNetworksNoMatch: a -n prefix that matches nothing is named,
// whether another matches or not; under auto, a dual-stack interface's
// IPv6 prefix is not served, and the error says which family rules.
func TestSelectNetworksNoMatch(t *testing.T) {
	for _, useOnly := range [][]netip.Prefix{
		pfx("2001:db8:99::/48"),
		pfx("10.0.0.0/24", "2001:db8:99::/48"),
	} {
		_, err := sel(synthetic6(), "", useOnly, nil)
		if !errors.Is(err, ErrNoNetwork) || !strings.Contains(err.Error(), "2001:db8:99::/48 (-n) matches no address") {
			t.Errorf("-n %v: err = %v", useOnly, err)
		}
	}
	_, err := sel(synthetic6(), "", pfx("fe80::5/128"), nil)
	if err == nil || !strings.Contains(err.Error(), "family auto") {
		t.Errorf("-n eth0's link-local under auto: err = %v", err)
	}
	if _, err := sel6(Selection{Template: `. | include "name" "^eth1$"`, Family: FamilyIPv6}); !errors.Is(err, ErrNoNetwork) {
		t.Errorf("family ipv6 on an IPv4-only selection: err = %v", err)
	}
	for _, g := range []string{"ff05::20d", "fe80::1", "10.0.0.1", "ff02::20d%eth0"} {
		if _, err := sel6(Selection{Group: netip.MustParseAddr(g)}); err == nil {
			t.Errorf("group %s: no error", g)
		}
	}
}

// sel6 is selectNetworks on synthetic6, the networks only.
func sel6(s Selection) ([]Network, error) {
	f, err := selectNetworks(synthetic6(), s)
	return f.nets, err
}

// TestOtherFamily: under auto, a dual-stack interface served on IPv4 has
// its IPv6 link kept apart (the transport listens there only to warn),
// unless -n/-i left the interface out; IPv6 from there is dropped as on
// no network, with one warning per source.
func TestOtherFamily(t *testing.T) {
	all := `. | exclude "flags" "loopback"` // eth0's fe80::5 too
	f, err := selectNetworks(synthetic6(), Selection{Template: all})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.other) != 1 || f.other[0].Interface != "eth0" || f.other[0].Addr != netip.MustParseAddr("fe80::5%eth0") {
		t.Fatalf("other = %v, want eth0's IPv6 link", f.other)
	}
	if g, _ := selectNetworks(synthetic6(), Selection{Template: all, Ignore: pfx("10.0.0.0/24")}); len(g.other) != 0 {
		t.Errorf("eth0 ignored, yet its IPv6 link is listened to: %v", g.other)
	}
	if g, _ := selectNetworks(synthetic6(), Selection{Template: all, Family: FamilyIPv4}); len(g.other) != 0 {
		t.Errorf("family ipv4: other = %v", g.other)
	}

	var logged bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logged)
	tr, _ := socketlessTransport(10, limit.Config{})
	tr.networks, tr.other = f.nets, f.other
	tr.otherLog = limit.NewLogger(log, limit.LogConfig{Once: true})
	b, _ := (&tsp.Packet{Type: tsp.MasterUp, Version: tsp.Version, Name: "v6only"}).Marshal()
	for range 3 {
		tr.receive(b, nil, parse6, false, netip.MustParseAddrPort("[fe80::99%eth0]:525"), time.Now())
	}
	tr.receive(b, nil, parse6, false, netip.MustParseAddrPort("[fe80::99%eth1]:525"), time.Now()) // eth1: no IPv6 here
	if got := tr.stats.snapshot().Dropped[DropUnknownNetwork]; got != 4 {
		t.Errorf("dropped as on no network: %d, want 4", got)
	}
	if n := strings.Count(logged.String(), "elect a master of their own"); n != 1 {
		t.Errorf("%d warnings, want one for the source on eth0:\n%s", n, logged.String())
	}
}

func TestParseFamily(t *testing.T) {
	for in, want := range map[string]Family{"": FamilyAuto, "auto": FamilyAuto, "IPv6": FamilyIPv6, "ipv4": FamilyIPv4, "both": FamilyBoth} {
		if got, err := ParseFamily(in); err != nil || got != want {
			t.Errorf("ParseFamily(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseFamily("inet6"); err == nil || !strings.Contains(err.Error(), "auto, ipv4, ipv6") {
		t.Errorf("ParseFamily(inet6): %v", err)
	}
}

// TestNetworkOfIPv6: a link-local source is on the link its zone names, a
// global one on the link it came in by when in one of its prefixes; a
// routed source, or one that came in elsewhere, is on none.
func TestNetworkOfIPv6(t *testing.T) {
	f, err := selectNetworks(synthetic6(), Selection{Template: `. | include "type" "IPv6" | exclude "flags" "loopback"`, Family: FamilyIPv6})
	if err != nil {
		t.Fatal(err)
	}
	tr := &Transport{networks: f.nets, links: f.links}
	for _, tc := range []struct {
		from    string
		ifIndex int
		want    string
	}{
		{"[fe80::99%eth3]:525", 6, "eth3"},
		{"[fe80::99%eth4]:525", 7, "eth4"},
		{"[fe80::99%eth9]:525", 9, ""},
		{"[2001:db8:1::99]:525", 6, "eth3"},
		{"[fd00:2::99]:525", 6, "eth3"},
		{"[2001:db8:1::99]:525", 7, ""}, // eth3's prefix, in by eth4
		{"[2001:db8:2::99]:525", 6, ""}, // routed
		{"10.0.0.9:525", 2, ""},         // family ipv6: eth0 is served on IPv6
	} {
		n := tr.networkOf(netip.MustParseAddrPort(tc.from), tc.ifIndex)
		got := ""
		if n != nil {
			got = n.Interface
		}
		if got != tc.want {
			t.Errorf("networkOf(%s, if %d) = %q, want %q", tc.from, tc.ifIndex, got, tc.want)
		}
	}
}

// TestPeersIPv6Loopback runs two transports in peers mode on ::1: the
// peers network's broadcast reaches the other, unicast answers come back,
// transmit and receive stamps are the kernel's, and IPV6_PKTINFO gives
// the destination and interface.
func TestPeersIPv6Loopback(t *testing.T) {
	a := listen(t, Config{Hostname: "a", Peers: []netip.AddrPort{netip.MustParseAddrPort("[::1]:9")}})
	b := listen(t, Config{Hostname: "b", Peers: []netip.AddrPort{netip.AddrPortFrom(netip.IPv6Loopback(), a.LocalAddr().Port())}})
	a6 := netip.AddrPortFrom(netip.IPv6Loopback(), a.LocalAddr().Port())
	if err := b.BroadcastAll(&tsp.Packet{Type: tsp.MasterReq, Seq: 3}); err != nil {
		t.Fatal(err)
	}
	r := recv(t, a)
	if r.Packet == nil || r.Packet.Type != tsp.MasterReq || r.Network == nil || !r.Network.Peers {
		t.Fatalf("a received %+v", r)
	}
	if r.From.Addr() != netip.IPv6Loopback() || r.From.Port() != b.LocalAddr().Port() || r.Dst != netip.IPv6Loopback() || r.IfIndex == 0 {
		t.Fatalf("from %v dst %v if %d", r.From, r.Dst, r.IfIndex)
	}
	before := time.Now()
	at, ok, err := b.SendExtStamped(&tsp.ExtPacket{Kind: tsp.ExtProbe, Seq: 1, Payload: []byte{1}}, a6)
	if err != nil || !ok || at.Before(before) || at.After(time.Now()) {
		t.Fatalf("stamped send over IPv6: %v, %v, %v", at, ok, err)
	}
	r = recv(t, a)
	if r.Ext == nil || r.At.Before(at) {
		t.Fatalf("a received %+v (sent at %v)", r, at)
	}
	if err := a.Send(&tsp.Packet{Type: tsp.MasterAck, Seq: 3}, r.From); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, b); r.Packet == nil || r.Packet.Type != tsp.MasterAck || r.From != a6 {
		t.Fatalf("b received %+v", r)
	}
	if a.LocalAddr().Port() == 0 {
		t.Error("no port")
	}
}

// TestIPv4OnlySendIPv6: a transport that serves no IPv6 says so when
// asked to send there.
func TestIPv4OnlySendIPv6(t *testing.T) {
	a := listen(t, Config{Hostname: "a"})
	err := a.Send(&tsp.Packet{Type: tsp.MasterReq}, netip.MustParseAddrPort("[::1]:525"))
	if !errors.Is(err, errNoIPv6) {
		t.Errorf("err = %v", err)
	}
}

// TestRateLimitIPv6: a flood from one IPv6 source is cut to its burst
// before decoding, another source of the link is not; zoned sources are
// delivered on the link their zone names.
func TestRateLimitIPv6(t *testing.T) {
	tr, _ := socketlessTransport(100, limit.Config{Rate: 1, Burst: 2})
	link := Network{Interface: "eth0", Index: 2, Addr: netip.MustParseAddr("fe80::5%eth0"),
		Prefix: netip.MustParsePrefix("2001:db8::/64"), Broadcast: DefaultGroup}
	tr.networks = []Network{link}
	b, _ := (&tsp.Packet{Type: tsp.Ack, Version: tsp.Version, Name: "x"}).Marshal()
	now := time.Now()
	flooder, other := netip.MustParseAddrPort("[fe80::9%eth0]:525"), netip.MustParseAddrPort("[fe80::a%eth0]:525")
	for range 50 {
		tr.receive(b, nil, parse6, false, flooder, now)
	}
	tr.receive(b, nil, parse6, false, other, now)
	if got := tr.stats.snapshot().Dropped[DropRateLimited]; got != 48 {
		t.Fatalf("rate limited %d of 50 (burst 2), want 48", got)
	}
	if len(tr.packets) != 3 {
		t.Fatalf("%d delivered, want the flooder's burst of 2 and the other source's 1", len(tr.packets))
	}
	if r := <-tr.packets; r.From != flooder || *r.Network != link {
		t.Errorf("got %+v", r)
	}
}

// TestSelectNetworksBoth: --family both serves a dual-stack interface on
// both families, as two networks of one link (SameLink, LinkOf); the
// other interfaces as auto would; nothing is left to warn about.
func TestSelectNetworksBoth(t *testing.T) {
	eth5 := net.Interface{Index: 9, Name: "eth5", Flags: net.FlagUp | net.FlagBroadcast | net.FlagMulticast, MTU: 1500}
	ifs := append(synthetic6(),
		sockaddr.IfAddr{SockAddr: sockaddr.MustIPv4Addr("10.5.0.7/24"), Interface: eth5},
		sockaddr.IfAddr{SockAddr: sockaddr.MustIPv6Addr("fe80::9/64"), Interface: eth5},
		sockaddr.IfAddr{SockAddr: sockaddr.MustIPv6Addr("fd00:5::7/64"), Interface: eth5},
	)
	auto, err := selectNetworks(ifs, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	both, err := selectNetworks(ifs, Selection{Family: FamilyBoth})
	if err != nil {
		t.Fatal(err)
	}
	var on5 []Network
	for _, n := range both.nets {
		if n.Interface == "eth5" {
			on5 = append(on5, n)
		}
	}
	if len(on5) != 2 || !on5[0].SameLink(on5[1]) || on5[0].IPv6() == on5[1].IPv6() {
		t.Fatalf("both: eth5 served as %v, want its IPv4 and its IPv6 network", on5)
	}
	if len(both.nets) != len(auto.nets)+1 || len(both.other) != 0 || len(auto.other) == 0 {
		t.Errorf("both: %v (shadowed %v); auto: %v (shadowed %v)", names(both.nets), both.other, names(auto.nets), auto.other)
	}
	for i, n := range both.nets {
		want := 0
		if n.Interface == "eth5" {
			want = 9
		}
		if got := LinkOf(both.nets, i); got != want {
			t.Errorf("LinkOf(%v) = %d, want %d", n, got, want)
		}
	}
	for _, n := range auto.nets {
		if (Network{Interface: "x", Index: n.Index, Addr: netip.MustParseAddr("fe80::1")}).SameLink(Network{Peers: true}) {
			t.Error("a peers network is on a link")
		}
	}
}

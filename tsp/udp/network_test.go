package udp

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	sockaddr "github.com/hashicorp/go-sockaddr"
)

// synthetic is a host with two broadcast LANs, a second address on eth0's
// LAN, loopback, a point-to-point tunnel, an interface that is down and
// IPv6 addresses: the cases the default selection must sort out.
func synthetic() sockaddr.IfAddrs {
	bcast := net.FlagUp | net.FlagBroadcast | net.FlagMulticast
	ifc := func(idx int, name string, flags net.Flags) net.Interface {
		return net.Interface{Index: idx, Name: name, Flags: flags, MTU: 1500}
	}
	lo, eth0, eth1 := ifc(1, "lo", net.FlagUp|net.FlagLoopback), ifc(2, "eth0", bcast), ifc(3, "eth1", bcast)
	return sockaddr.IfAddrs{
		{SockAddr: sockaddr.MustIPv4Addr("127.0.0.1/8"), Interface: lo},
		{SockAddr: sockaddr.MustIPv6Addr("::1/128"), Interface: lo},
		{SockAddr: sockaddr.MustIPv4Addr("10.0.0.5/24"), Interface: eth0},
		{SockAddr: sockaddr.MustIPv4Addr("10.0.0.6/24"), Interface: eth0},
		{SockAddr: sockaddr.MustIPv6Addr("fe80::5/64"), Interface: eth0},
		{SockAddr: sockaddr.MustIPv4Addr("192.168.1.7/23"), Interface: eth1},
		{SockAddr: sockaddr.MustIPv4Addr("10.8.0.1/32"), Interface: ifc(4, "tun0", net.FlagUp|net.FlagPointToPoint)},
		{SockAddr: sockaddr.MustIPv4Addr("172.16.0.1/16"), Interface: ifc(5, "eth2", net.FlagBroadcast)},
	}
}

func names(nets []Network) []string {
	var s []string
	for _, n := range nets {
		s = append(s, n.Interface)
	}
	return s
}

func pfx(s ...string) []netip.Prefix {
	var p []netip.Prefix
	for _, x := range s {
		p = append(p, netip.MustParsePrefix(x))
	}
	return p
}

func TestSelectNetworksDefault(t *testing.T) {
	nets, err := sel(synthetic(), "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Network{
		{Interface: "eth0", Index: 2, Addr: netip.MustParseAddr("10.0.0.5"),
			Prefix: netip.MustParsePrefix("10.0.0.0/24"), Broadcast: netip.MustParseAddr("10.0.0.255")},
		{Interface: "eth1", Index: 3, Addr: netip.MustParseAddr("192.168.1.7"),
			Prefix: netip.MustParsePrefix("192.168.0.0/23"), Broadcast: netip.MustParseAddr("192.168.1.255")},
	}
	if !slices.Equal(nets, want) {
		t.Errorf("default selection:\n got %v\nwant %v", nets, want)
	}
}

func TestSelectNetworksFilters(t *testing.T) {
	for _, tc := range []struct {
		name            string
		useOnly, ignore []netip.Prefix
		want            []string
	}{
		{"none", nil, nil, []string{"eth0", "eth1", "eth3"}},
		{"use only 10/8", pfx("10.0.0.0/8"), nil, []string{"eth0"}},
		{"use only exact", pfx("192.168.0.0/23"), nil, []string{"eth1"}},
		{"use only both", pfx("10.0.0.0/24", "192.168.1.0/24"), nil, []string{"eth0", "eth1"}},
		{"ignore eth0 net", nil, pfx("10.0.0.0/24"), []string{"eth1", "eth3"}},
		{"ignore elsewhere", nil, pfx("172.16.0.0/12"), []string{"eth0", "eth1", "eth3"}},
		// IPv6: a link matches by any of its addresses.
		{"use only a global prefix", pfx("2001:db8::/32"), nil, []string{"eth3"}},
		{"use only a ULA", pfx("fd00::/8"), nil, []string{"eth3"}},
		{"use only by address", pfx("2001:db8:1::7/128"), nil, []string{"eth3"}},
		{"use only link-local", pfx("fe80::/10"), nil, []string{"eth3"}},
		{"ignore a link by its global prefix", nil, pfx("2001:db8:1::/48"), []string{"eth0", "eth1"}},
		{"mixed", pfx("10.0.0.0/8", "fd00::/8"), nil, []string{"eth0", "eth3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nets, err := sel(synthetic6(), "", tc.useOnly, tc.ignore)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(nets); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSelectNetworksErrors(t *testing.T) {
	_, err := sel(synthetic(), "", pfx("10.0.0.0/8"), pfx("10.0.0.0/24"))
	if err == nil || !strings.Contains(err.Error(), "cannot be combined") {
		t.Errorf("-n with -i: err = %v", err)
	}
	_, err = sel(synthetic(), "", nil, pfx("0.0.0.0/0"))
	if !errors.Is(err, ErrNoNetwork) || !strings.Contains(err.Error(), "filters removed") {
		t.Errorf("everything ignored: err = %v", err)
	}
	_, err = sel(synthetic(), "", pfx("172.31.0.0/16"), nil)
	if !errors.Is(err, ErrNoNetwork) {
		t.Errorf("use only a missing net: err = %v", err)
	}
	_, err = sel(synthetic()[:2], "", nil, nil)
	if !errors.Is(err, ErrNoNetwork) || !strings.Contains(err.Error(), "matched no interface") {
		t.Errorf("loopback only: err = %v", err)
	}
	for _, tmpl := range []string{
		`. | include "bogus" "x"`,   // unknown selector
		`{{ . | join "name" " " }}`, // prints names, not addresses
		`{{ "10.99.0.1" }}`,         // an address on no interface
		`{{ . `,                     // does not parse
	} {
		if _, err := sel(synthetic(), tmpl, nil, nil); err == nil {
			t.Errorf("template %q: no error", tmpl)
		}
	}
}

func TestSelectNetworksTemplate(t *testing.T) {
	for _, tc := range []struct {
		tmpl string
		want []string
	}{
		// Bare pipeline and full template forms.
		{`. | include "name" "^eth1$"`, []string{"eth1"}},
		{`{{ . | include "name" "^eth1$" | join "address" " " }}`, []string{"eth1"}},
		// Loopback and point-to-point only when asked for; IPv6 skipped.
		{`. | include "flags" "loopback"`, []string{"lo"}},
		{`. | include "flags" "point-to-point"`, []string{"tun0"}},
		{`. | include "network" "10.0.0.0/8"`, []string{"eth0", "tun0"}},
		{`. | include "type" "IPv4" | sort "-name" | limit 2`, []string{"tun0", "lo"}},
	} {
		nets, err := sel(synthetic(), tc.tmpl, nil, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.tmpl, err)
			continue
		}
		if got := names(nets); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.tmpl, got, tc.want)
		}
	}
	// A template narrows, then -i filters what it chose.
	nets, err := sel(synthetic(), `. | include "network" "10.0.0.0/8"`, nil, pfx("10.8.0.0/16"))
	if err != nil || !slices.Equal(names(nets), []string{"eth0"}) {
		t.Errorf("template then -i: %v, %v", names(nets), err)
	}
	lo, _ := sel(synthetic(), `. | include "flags" "loopback"`, nil, nil)
	if want := (Network{Interface: "lo", Index: 1, Addr: netip.MustParseAddr("127.0.0.1"),
		Prefix: netip.MustParsePrefix("127.0.0.0/8"), Broadcast: netip.MustParseAddr("127.255.255.255")}); len(lo) != 1 || lo[0] != want {
		t.Errorf("loopback network = %v, want %v", lo, want)
	}
}

// TestDiscoverLoopback runs the real discovery: loopback is on every host.
func TestDiscoverLoopback(t *testing.T) {
	nets, err := Discover(Selection{Template: loopbackTemplate})
	if err != nil {
		t.Fatal(err)
	}
	if len(nets) == 0 || !nets[0].Prefix.Contains(netip.MustParseAddr("127.0.0.1")) || nets[0].Index == 0 {
		t.Errorf("loopback networks = %v", nets)
	}
}

// sel is selectNetworks with a template and filters only.
func sel(ifs sockaddr.IfAddrs, tmpl string, useOnly, ignore []netip.Prefix) ([]Network, error) {
	f, err := selectNetworks(ifs, Selection{Template: tmpl, UseOnly: useOnly, Ignore: ignore})
	return f.nets, err
}

//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/deploy/compose"
)

// twoNetworks is the site of the smoke test: networks neta and netb, a1
// and a2 on neta, b1 and b2 on netb, all of them may be master, and g on
// both, without -M: a gateway that follows a master of one network (its
// slavenet) and ignores the other, since it may not be master there (with
// -M it would be a submaster: gateway_test.go). Clocks up to ±1 s apart,
// ±20 ppm.
func twoNetworks() compose.Spec {
	return compose.Spec{
		Networks: []compose.Network{{Name: "neta"}, {Name: "netb"}},
		Hosts: []compose.Host{
			siteHost("a1", -1000, 20, true, "neta"),
			siteHost("a2", -500, -20, true, "neta"),
			siteHost("g", 0, 10, false, "neta", "netb"),
			siteHost("b1", 500, -10, true, "netb"),
			siteHost("b2", 1000, 0, true, "netb"),
		},
	}
}

// TestSeveralNetworks is the smoke test of the multi-network plumbing
// (issue 13's e2e groundwork): each network elects one master, which every
// host with a role there follows; the gateway, without -M, is a slave on
// one network and ignores the other (BSD's IGNORE: a host slave on one
// network that may not be master leaves the others to their masters); the
// gateway lists both networks, at addresses on the subnets docker gave
// them, and the other hosts their own only. Then the gateway is taken off
// the network it ignores and put back (docker network disconnect/connect),
// then cut off it and mended (iptables), and each network keeps its one
// master. The scenarios of gateways that carry time across networks are in
// gateway_test.go.
func TestSeveralNetworks(t *testing.T) {
	c := newCluster(t, twoNetworks())
	report(t, "subnets docker assigned", "neta %v, netb %v", c.subnets["neta"], c.subnets["netb"])
	start := c.start()
	nets := []string{"neta", "netb"}
	ms, _ := c.awaitOneMasterOn(coldStartBound, nets)
	report(t, "time to one master on each network (from start)", "%v (bound %v): neta %s, netb %s",
		time.Since(start).Round(time.Millisecond), coldStartBound, ms["neta"], ms["netb"])

	s, err := c.siteView()
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range s {
		want := slices.Sorted(slices.Values(c.hostNetworks(name)))
		var got []string
		for n, ns := range h.nets {
			got = append(got, n)
			if !c.subnets[n].Contains(netip.MustParseAddr(ns.Address)) {
				t.Errorf("%s lists %s at %s, outside %v", name, n, ns.Address, c.subnets[n])
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s lists networks %v, want %v (docker attached it to %v)", name, got, want, c.attached(name))
		}
		if len(want) == 1 && !h.nets[want[0]].Served {
			t.Errorf("%s does not serve its one network: %s", name, s.describe())
		}
	}
	var gRoles []string
	for _, n := range nets {
		switch ns := s["g"].nets[n]; {
		case ns.Master != "":
			gRoles = append(gRoles, fmt.Sprintf("%s of %s on %s", ns.State, ns.Master, n))
		case ns.Served:
			gRoles = append(gRoles, ns.State+" on "+n)
		}
	}
	if len(gRoles) == 0 {
		t.Fatalf("the gateway has a role on neither network: %s", s.describe())
	}
	var gNets []string
	for _, n := range s["g"].st.Networks {
		gNets = append(gNets, n.Interface+" "+n.Address+" ("+c.networkOf(n.Address)+")")
	}
	report(t, "the gateway's networks (status) and its roles", "%s; %s", strings.Join(gNets, ", "), strings.Join(gRoles, ", "))

	// Each network's hosts converge on its master. The two networks are
	// two time sources: the gateway, without -M, carries no time across
	// (it follows its slavenet's master and leaves the other network be).
	for _, n := range nets {
		top, worst, took := c.awaitOneTimeSource(convergeBound, convergeTime, s.inUse(n)...)
		report(t, "clocks on "+n+": time source, largest offset from it", "%s, %v after %v (bound %v)", top, worst, took.Round(time.Millisecond), convergeBound)
	}
	if s, err = c.siteView(); err != nil {
		t.Fatal(err)
	}
	report(t, "offset between the networks' masters", "%v (a time source each)",
		time.Duration((s[ms["neta"]].st.OffsetSecs-s[ms["netb"]].st.OffsetSecs)*1e9))

	// Off a network and back: the one the gateway ignores (its slavenet
	// is the other). Each network keeps its master.
	off := ""
	for _, n := range nets {
		if ns := s["g"].nets[n]; ns.State == "ignore" {
			off = n
		} else if !ns.Slavenet {
			t.Errorf("the gateway on %s: %s, want its slavenet or ignored: %s", n, ns.State, s.describe())
		}
	}
	if off == "" {
		t.Fatalf("the gateway ignores neither network: %s", s.describe())
	}
	rest := slices.DeleteFunc(slices.Clone(nets), func(n string) bool { return n == off })
	t0 := time.Now()
	c.disconnect("g", off)
	if got := c.attached("g"); !slices.Equal(got, rest) || c.ipOn("g", off) != "" {
		t.Fatalf("g after docker network disconnect %s: on %v, want %v", off, got, rest)
	}
	disc := time.Since(t0)
	took := c.awaitSameMasters(ms, nets)
	report(t, "gateway off "+off+": disconnect, then one master on each network", "%v, %v", disc.Round(time.Millisecond), took.Round(time.Millisecond))
	t0 = time.Now()
	c.connect("g", off)
	ip := c.ipOn("g", off)
	if got := c.attached("g"); !slices.Equal(got, nets) || ip == "" || !c.subnets[off].Contains(netip.MustParseAddr(ip)) {
		t.Fatalf("g after docker network connect %s: on %v, address %q there, want both networks and an address on %v", off, got, ip, c.subnets[off])
	}
	conn := time.Since(t0)
	took = c.awaitSameMasters(ms, nets)
	report(t, "gateway back on "+off+": connect, then one master on each network", "%v, %v (address %s)", conn.Round(time.Millisecond), took.Round(time.Millisecond), ip)

	// The cable pulled instead: the interface stays, what arrives on it is
	// dropped. The other hosts of that network broadcast every round (a
	// master's LOOP at least), so the drops show within two rounds.
	c.cutLink("g", off)
	var drops uint64
	took = c.await("g drops what "+off+" sends it", 2*syncInterval+slack, func() (bool, string) {
		n, ok := c.cutDrops("g", off)
		drops = n
		return ok && n > 0, fmt.Sprintf("rule there %v, %d dropped", ok, n)
	})
	c.restoreLink("g", off)
	if _, ok := c.cutDrops("g", off); ok {
		t.Fatalf("g: the cut of %s is still there after restoreLink", off)
	}
	report(t, "gateway's link to "+off+" cut: packets dropped, time to the first", "%d, %v", drops, took.Round(time.Millisecond))
	took = c.awaitSameMasters(ms, nets)
	report(t, "link mended: one master on each network", "%v", took.Round(time.Millisecond))
	c.reportMessages(t)
}

// awaitSameMasters waits, as awaitOneMasterOn, for one master on each of
// networks, and fails unless they are those of was.
func (c *cluster) awaitSameMasters(was map[string]string, networks []string) time.Duration {
	c.t.Helper()
	ms, took := c.awaitOneMasterOn(electionBound, networks)
	if !maps.Equal(ms, was) {
		c.t.Fatalf("masters %v, were %v", ms, was)
	}
	return took
}

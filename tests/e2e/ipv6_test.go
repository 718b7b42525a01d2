//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/deploy/compose"
)

// TestIPv6OnlyNetwork: five hosts on a compose network with IPv6 on
// (enable_ipv6, a unique-local /64 of the run's own, random so that
// parallel runs never share one) and --family ipv6: docker still gives
// each container an IPv4 address, which the daemons keep off. They find
// each other through the link-local group, elect one master and
// converge; the master measures its slaves at their IPv6 addresses on the
// link with kernel stamps; and of the TSP packets on the bridge, none is IPv4.
func TestIPv6OnlyNetwork(t *testing.T) {
	spec := compose.Default(5)
	subnet := randomULA(t)
	spec.Networks = []compose.Network{{Name: compose.DefaultNetwork, IPv6Subnet: subnet.String()}}
	for i := range spec.Hosts {
		spec.Hosts[i].Extra = append(spec.Hosts[i].Extra, "--family", "ipv6")
	}
	c := newCluster(t, spec)
	cp := c.startCapture()
	start := c.start()

	master, _ := c.awaitOneMaster(coldStartBound)
	report(t, "time to one master (from start)", "%v (bound %v)", time.Since(start).Round(time.Millisecond), coldStartBound)
	sp, took := c.awaitConverged(convergeBound, convergeTime)
	report(t, "time to converge (after one master)", "%v (bound %v)", took.Round(time.Millisecond), convergeTime)
	report(t, "largest pairwise offset, converged", "%v (bound %v)", sp, convergeBound)

	c.await("every slave measured at its IPv6 address with kernel stamps", 5*syncInterval+10*time.Second, func() (bool, string) {
		st, err := c.status(master)
		if err != nil {
			return false, err.Error()
		}
		if len(st.Networks) != 1 || st.Networks[0].Group != "ff02::20d" || !strings.HasSuffix(st.Networks[0].Address, "%eth0") {
			return false, fmt.Sprintf("networks %+v", st.Networks)
		}
		if len(st.Slaves) != len(spec.Hosts)-1 {
			return false, fmt.Sprintf("%d slaves", len(st.Slaves))
		}
		for _, sl := range st.Slaves {
			a, err := netip.ParseAddrPort(sl.Address)
			// Link-local, or the subnet's own address where the sender's
			// link-local one was still tentative (DAD) when it spoke first.
			if err != nil || !(a.Addr().IsLinkLocalUnicast() && a.Addr().Zone() == "eth0" || subnet.Contains(a.Addr())) ||
				sl.Method != "probe" || sl.Stamps != "kernel" {
				return false, fmt.Sprintf("slave %s at %s, method %q, stamps %q", sl.Name, sl.Address, sl.Method, sl.Stamps)
			}
		}
		return true, ""
	})
	worst := c.watch(3*syncInterval, master)
	report(t, "largest pairwise offset over 3 more rounds (IPv6)", "%v", worst)

	cp.stop()
	v4, v6 := cp.count("ip"), cp.count("ip6")
	report(t, "TSP packets on the bridge, IPv6 / IPv4", "%d / %d", v6, v4)
	if v6 == 0 || v4 != 0 {
		t.Errorf("TSP on the bridge: %d IPv6 packets, %d IPv4 ones; want IPv6 only", v6, v4)
	}
}

// randomULA is a unique-local /64 (RFC 4193) drawn at random.
func randomULA(t *testing.T) netip.Prefix {
	var b [16]byte
	if _, err := rand.Read(b[1:8]); err != nil {
		t.Fatal(err)
	}
	b[0] = 0xfd
	for i := 8; i < 16; i++ {
		b[i] = 0
	}
	return netip.PrefixFrom(netip.AddrFrom16(b), 64)
}

// count is how many packets of the capture a tcpdump filter matches.
func (cp *capture) count(filter string) int {
	cp.c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "tcpdump", "-r", cp.file, "-n", filter).Output()
	if err != nil {
		cp.c.t.Fatalf("tcpdump -r %s %s: %v", cp.file, filter, err)
	}
	return strings.Count(string(out), "\n")
}

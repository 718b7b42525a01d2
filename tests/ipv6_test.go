package tests

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/election/ring"
	"github.com/timed-project/timed/election/ring/live"
	"github.com/timed-project/timed/tests/internal/ringcheck"
	"github.com/timed-project/timed/timed/control"
)

// TestIPv6PeersElectAndSync: four daemons in peers mode on ::1 elect one
// master and converge, as on 127.0.0.1: the master measures its slaves
// over IPv6 with the kernel's transmit stamps, lists them by their IPv6
// addresses, a daemon trusts the others by their bracketed addresses
// (-F), and timedc asks a daemon over IPv6.
func TestIPv6PeersElectAndSync(t *testing.T) {
	t.Parallel()
	lo := netip.IPv6Loopback()
	c := newClusterAt(t, timedBin, lo, fiveOffsets[:4], func(i int, peers string) []string {
		if i == 3 {
			return []string{"-F", peers} // [::1]:port,…; implies -M
		}
		return []string{"-M"}
	})
	m := c.awaitOneMaster()
	c.await("clocks within 20 ms", 10*syncInterval+10*time.Second, func() (bool, string) {
		return spreadBelow(c, 20*time.Millisecond)
	})
	c.awaitSlavesAt(m, 3, "::1", func(a netip.Addr) bool { return a == lo })
	out, err := timedc(t, "msite", netip.AddrPortFrom(lo, uint16(m.port)).String())
	if err != nil || !strings.Contains(out, m.name) {
		t.Fatalf("timedc msite over IPv6: %q, %v", out, err)
	}
	out, err = timedc(t, "msite", "--port", strconv.Itoa(m.port), "::1")
	if err != nil || !strings.Contains(out, m.name) {
		t.Fatalf("timedc msite ::1 --port: %q, %v", out, err)
	}
	out, err = timedc(t, "sources", "--control-socket", m.socket())
	if err != nil || !strings.Contains(out, "[::1]:") {
		t.Fatalf("timedc sources shows no IPv6 address: %q, %v", out, err)
	}
	// An admin packet from a reserved port (timedc binds one: the tests
	// run as root, as TestTimedcCommands's trace does) on ::1, one of the
	// host's own addresses, is obeyed.
	slave := c.nodes[0]
	if slave == m {
		slave = c.nodes[1]
	}
	if out, err = timedc(t, "trace", "on", netip.AddrPortFrom(lo, uint16(slave.port)).String()); err != nil || strings.TrimSpace(out) != "timed tracing enabled" {
		t.Fatalf("trace on over IPv6: %q %v", out, err)
	}
	if s, _ := c.status(slave); !s.Trace {
		t.Fatal("trace on over IPv6 did not turn tracing on")
	}
}

// TestIPv6AuthRequired: the auth trailer is the same on IPv6: daemons on
// ::1 that require signatures elect and converge, timedc's signed msite
// over IPv6 is answered, and an unsigned one is dropped and counted.
func TestIPv6AuthRequired(t *testing.T) {
	t.Parallel()
	keys := writeKeys(t)
	lo := netip.IPv6Loopback()
	c := newClusterAt(t, timedBin, lo, fiveOffsets[:3], func(int, string) []string {
		return []string{"-M", "--auth", "required", "--auth-keys", keys}
	})
	m := c.awaitOneMaster()
	c.await("clocks within 20 ms", 10*syncInterval+10*time.Second, func() (bool, string) {
		return spreadBelow(c, 20*time.Millisecond)
	})
	target := netip.AddrPortFrom(lo, uint16(m.port)).String()
	out, err := timedc(t, "--auth-keys", keys, "--json", "msite", target)
	if err != nil || !strings.Contains(out, `"master": "`+m.name+`"`) {
		t.Fatalf("signed msite over IPv6: %v: %s", err, out)
	}
	before, err := c.status(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := timedc(t, "--timeout", "1s", "msite", target); err == nil {
		t.Fatal("an unsigned msite over IPv6 was answered under required auth")
	}
	c.await("the unsigned msite counted", 10*time.Second, func() (bool, string) {
		st, err := c.status(m)
		if err != nil {
			return false, err.Error()
		}
		got := st.Drops["auth unsigned"] - before.Drops["auth unsigned"]
		return got >= 1, fmt.Sprintf("drops %v", st.Drops)
	})
}

// TestIPv6RingElect: the live ring runner over IPv6: a Chang–Roberts
// election among four daemons on ::1, asked of one of them over IPv6,
// elects the leader the algorithm must.
func TestIPv6RingElect(t *testing.T) {
	t.Parallel()
	lo := netip.IPv6Loopback()
	c := newClusterAt(t, timedBin, lo, make([]time.Duration, 4), func(int, string) []string { return []string{"-M"} })
	c.await("control sockets up", 10*time.Second, func() (bool, string) {
		_, err := c.statuses()
		return err == nil, "waiting"
	})
	i := slices.IndexFunc(ring.All(), func(a ring.Algorithm) bool { return a.Name == "chang-roberts" })
	if i < 0 {
		t.Fatal("no chang-roberts")
	}
	alg := ring.All()[i]
	out, err := timedc(t, "--json", "ring", "elect", netip.AddrPortFrom(lo, uint16(c.nodes[0].port)).String(), "--algorithm", alg.Name, "--timeout", "30s")
	if err != nil {
		t.Fatal(err)
	}
	var res live.Result
	if err := oneAnswer(out, &res); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	if err := ringcheck.Result(alg, res, 4); err != nil {
		t.Error(err)
	}
	for _, m := range res.Members[1:] { // the coordinator's own is left out
		if a, err := netip.ParseAddrPort(m.Addr); err != nil || a.Addr() != lo {
			t.Errorf("member %+v: not at ::1", m)
		}
	}
}

// awaitSlavesAt waits until master m lists n slaves, each at an address
// that where accepts (described by at), measured by the probe with the
// kernel's transmit stamps.
func (c *cluster) awaitSlavesAt(m *node, n int, at string, where func(netip.Addr) bool) *control.Status {
	c.t.Helper()
	var st *control.Status
	c.await("every slave measured at "+at+" with kernel stamps", 5*syncInterval+5*time.Second, func() (bool, string) {
		var err error
		if st, err = c.status(m); err != nil {
			return false, err.Error()
		}
		if len(st.Slaves) != n {
			return false, fmt.Sprintf("%d slaves", len(st.Slaves))
		}
		for _, sl := range st.Slaves {
			a, err := netip.ParseAddrPort(sl.Address)
			if err != nil || !where(a.Addr()) || sl.Method != "probe" || sl.Stamps != "kernel" {
				return false, fmt.Sprintf("slave %s at %s, method %q, stamps %q", sl.Name, sl.Address, sl.Method, sl.Stamps)
			}
		}
		return true, ""
	})
	return st
}

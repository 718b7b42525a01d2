package tests

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
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
	const bound = 20 * time.Millisecond
	c.await("clocks within 20 ms", 10*syncInterval+10*time.Second, func() (bool, string) {
		st, err := c.statuses()
		if err != nil {
			return false, err.Error()
		}
		lo, hi := 1e9, -1e9
		for _, s := range st {
			lo, hi = min(lo, s.OffsetSecs), max(hi, s.OffsetSecs)
		}
		spread := time.Duration((hi - lo) * 1e9)
		return spread < bound, fmt.Sprintf("largest pairwise offset %v", spread)
	})
	c.await("every slave measured over IPv6 with kernel stamps", 5*syncInterval+5*time.Second, func() (bool, string) {
		st, err := c.status(m)
		if err != nil {
			return false, err.Error()
		}
		if len(st.Slaves) != 3 {
			return false, fmt.Sprintf("%d slaves", len(st.Slaves))
		}
		for _, sl := range st.Slaves {
			a, err := netip.ParseAddrPort(sl.Address)
			if err != nil || a.Addr() != lo || sl.Method != "probe" || sl.Stamps != "kernel" {
				return false, fmt.Sprintf("slave %s at %s, method %q, stamps %q", sl.Name, sl.Address, sl.Method, sl.Stamps)
			}
		}
		return true, ""
	})
	out, err := timedc(t, "msite", netip.AddrPortFrom(lo, uint16(m.port)).String())
	if err != nil || !strings.Contains(out, m.name) {
		t.Fatalf("timedc msite over IPv6: %q, %v", out, err)
	}
	out, err = timedc(t, "msite", "--port", strconv.Itoa(m.port), "::1")
	if err != nil || !strings.Contains(out, m.name) {
		t.Fatalf("timedc msite ::1 --port: %q, %v", out, err)
	}
}

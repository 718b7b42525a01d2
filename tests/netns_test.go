package tests

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/bench/netbench"
	"github.com/timed-project/timed/timed/control"
)

// The namespace tests run daemons on a real (veth and bridge) link in
// network namespaces, with no network flags: what they serve is what
// their interfaces offer. They reuse `make bench-net`'s namespaces
// (bench/netbench), under run ids of their own ("v6" and 4 random
// hex digits: bridge tbnv6…, namespaces tbn-v6…), removed when the test
// ends, failed or not.

// Shorter names for what a namespace's eth0 holds.
const (
	only4 = netbench.IPv4
	only6 = netbench.IPv6
	dual  = netbench.Dual
)

type linkFamily = netbench.Family

// ula is the IPv6 prefix of the test links.
var ula = netbench.Subnet6

// needNetns skips where namespaces cannot be made: they need root and
// ip(8).
func needNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, veth and bridge (run the tests as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip(8) (iproute2) for network namespaces")
	}
}

// netnsLink makes a bridge and one namespace per entry of fams, each with
// eth0 on the bridge holding what its family says (IPv6 addresses nodad),
// and removes them all when the test ends.
func netnsLink(t *testing.T, fams []linkFamily) netbench.Names {
	t.Helper()
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	names := netbench.Names{Run: "v6" + hex.EncodeToString(b[:])}
	ctx := context.Background()
	nt, err := netbench.Setup(ctx, names, len(fams))
	t.Cleanup(func() {
		if err := nt.Close(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if left, _ := netbench.Left(names); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range fams {
		if err := nt.Readdress(ctx, i, f); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// netnsCluster starts a daemon in each namespace with no network flags:
// -M, the tests' timers, a simulated clock each, its control socket in
// the test's directory (the file system is shared).
func netnsCluster(t *testing.T, names netbench.Names, n int, offsets []time.Duration) *cluster {
	t.Helper()
	return netnsClusterWith(t, names, n, offsets, nil)
}

// netnsClusterWith is netnsCluster with extra flags for daemon i.
func netnsClusterWith(t *testing.T, names netbench.Names, n int, offsets []time.Duration, extra func(i int) []string) *cluster {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "empty.yaml") // not the host's /etc/timed/timed.yaml
	if err := os.WriteFile(conf, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, bin: "ip"}
	for i := range n {
		nd := &node{name: names.Host(i), dir: dir, port: 525}
		nd.args = []string{"netns", "exec", names.Netns(i), timedBin, "-M", "--config", conf, "--metrics-listen", nsMetrics,
			"--profile", "fast", "--hostname", nd.name,
			"--clock", fmt.Sprintf("sim:offset=%+dus,drift=%+dppm", offsets[i%len(offsets)].Microseconds(), 10*(i%5)-20),
			"--control-socket", nd.socket(), "--log-level", "debug",
			"--sync-interval", syncInterval.String(), "--election-timeout-min", electionMin.String(),
			"--election-timeout-max", electionMax.String()}
		if extra != nil {
			nd.args = append(nd.args, extra(i)...)
		}
		c.nodes = append(c.nodes, nd)
		c.start(nd)
	}
	t.Cleanup(c.stopAll) // before the namespaces go (cleanups run last first)
	return c
}

// TestIPv6OnlyLink: daemons on a link with IPv6 only (no IPv4 address
// anywhere) and no network flags find each other through the group,
// elect one master and converge; the master measures its slaves at their
// link-local addresses, zone kept, with kernel stamps, and status shows
// the link with its group.
func TestIPv6OnlyLink(t *testing.T) {
	needNetns(t)
	t.Parallel()
	const n = 4
	names := netnsLink(t, []linkFamily{only6, only6, only6, only6})
	c := netnsCluster(t, names, n, fiveOffsets)
	m := c.awaitOneMaster()
	c.await("clocks within 20 ms", 10*syncInterval+10*time.Second, func() (bool, string) {
		return spreadBelow(c, 20*time.Millisecond)
	})
	st := c.awaitSlavesAt(m, n-1, "link-local addresses on eth0", func(a netip.Addr) bool { return a.IsLinkLocalUnicast() && a.Zone() == "eth0" })
	if len(st.Networks) != 1 {
		t.Fatalf("networks %+v", st.Networks)
	}
	if nw := st.Networks[0]; nw.Group != "ff02::20d" || !strings.HasSuffix(nw.Address, "%eth0") || nw.Prefix != ula.String() || nw.Broadcast != "" {
		t.Fatalf("network %+v", nw)
	}
	// The metrics name the network by its IPv6 prefix.
	mi := slices.Index(c.nodes, m)
	body, err := metricsIn(names.Netns(mi))
	if err != nil {
		t.Fatal(err)
	}
	if want := `timed_state{network="` + ula.String() + `",state="master"} 1`; !strings.Contains(body, want) {
		t.Errorf("metrics lack %s:\n%s", want, grepLines(body, "timed_state"))
	}
}

// nsMetrics is where each namespace's daemon serves its metrics: its own
// loopback, reached from inside the namespace.
const nsMetrics = "[::1]:9525"

// metricsIn fetches the metrics of the daemon in namespace ns.
func metricsIn(ns string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return netbench.DialIn(ctx, ns, addr) }}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nsMetrics+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return string(b), err
}

// TestDualStackLink: on one bridge, IPv4-only, IPv6-only and dual-stack
// daemons. The dual-stack ones serve the link on IPv4 (family auto), so
// no daemon runs two elections on it: the IPv4 daemons (IPv4-only and
// dual-stack) end with one master among them, the IPv6-only ones, which
// no IPv4 datagram can reach, with one of their own, and then nothing
// changes for five sync rounds: no master changes, no election. The
// dual-stack daemons warn that the IPv6-only ones are on their own.
func TestDualStackLink(t *testing.T) {
	needNetns(t)
	t.Parallel()
	fams := []linkFamily{only4, only4, only6, only6, dual, dual}
	names := netnsLink(t, fams)
	c := netnsCluster(t, names, len(fams), fiveOffsets)
	group := func(nd int) linkFamily {
		if fams[nd] == only6 {
			return only6
		}
		return only4 // the dual-stack daemons are on IPv4
	}
	var masters map[linkFamily]string
	c.await("one master per family's network", electionBound, func() (bool, string) {
		var why string
		masters, why = mastersByFamily(c, group)
		return masters != nil, why
	})
	st, err := c.statuses()
	if err != nil {
		t.Fatal(err)
	}
	for i, nd := range c.nodes {
		s := st[nd]
		if len(s.Networks) != 1 {
			t.Fatalf("%s (%v) serves %d networks, want the link once: %+v", nd.name, fams[i], len(s.Networks), s.Networks)
		}
		if v6 := s.Networks[0].Group != ""; v6 != (group(i) == only6) {
			t.Errorf("%s (%v) serves %+v", nd.name, fams[i], s.Networks[0])
		}
	}
	before := elections(st)
	for range 5 {
		time.Sleep(syncInterval) // a window watched, not a wait for an event
		now, why := mastersByFamily(c, group)
		if now == nil || now[only4] != masters[only4] || now[only6] != masters[only6] {
			t.Fatalf("masters were %v, now %v: %s", masters, now, why)
		}
	}
	st, err = c.statuses()
	if err != nil {
		t.Fatal(err)
	}
	if after := elections(st); after != before {
		t.Errorf("elections seen went from %v to %v while settled", before, after)
	}
	// The dual-stack daemons hear the IPv6-only ones' group and say, once
	// per source, that they are a TSP network of their own.
	for i, nd := range c.nodes {
		nd.mu.Lock()
		warned := strings.Contains(nd.log.String(), "elect a master of their own")
		nd.mu.Unlock()
		if warned != (fams[i] == dual) {
			t.Errorf("%s (%v): warned of IPv6-only daemons: %v", nd.name, fams[i], warned)
		}
	}
}

// mastersByFamily: in each family's group of daemons exactly one master,
// every other daemon its slave and on its list. It returns the masters'
// names by group, or nil and why not.
func mastersByFamily(c *cluster, group func(int) linkFamily) (map[linkFamily]string, string) {
	st, err := c.statuses()
	if err != nil {
		return nil, err.Error()
	}
	masters := map[linkFamily]string{}
	for i, nd := range c.nodes {
		if st[nd].State == "master" {
			if m, ok := masters[group(i)]; ok {
				return nil, fmt.Sprintf("two masters among the %v daemons: %s and %s: %s", group(i), m, nd.name, describe(st))
			}
			masters[group(i)] = nd.name
		}
	}
	listed := map[string]bool{}
	for _, s := range st {
		for _, sl := range s.Slaves {
			listed[sl.Name] = true
		}
	}
	for i, nd := range c.nodes {
		m, ok := masters[group(i)]
		switch {
		case !ok:
			return nil, fmt.Sprintf("no master among the %v daemons: %s", group(i), describe(st))
		case nd.name == m:
		case st[nd].Master == nil || st[nd].Master.Name != m:
			return nil, fmt.Sprintf("%s is %s, not a slave of %s: %s", nd.name, st[nd].State, m, describe(st))
		case !listed[nd.name]:
			return nil, fmt.Sprintf("%s follows %s but is not on its list yet", nd.name, m)
		}
	}
	return masters, ""
}

func elections(st map[*node]*control.Status) string {
	var s []string
	for nd, x := range st {
		s = append(s, nd.name+"="+strconv.FormatUint(x.Elections, 10))
	}
	slices.Sort(s)
	return strings.Join(s, " ")
}

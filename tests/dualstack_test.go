package tests

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/timed-project/timed/bench/netbench"
	"github.com/timed-project/timed/timed/control"
)

// TestDualStackLinkBoth: on one bridge, 2 IPv4-only, 2 IPv6-only and 2
// dual-stack daemons, the dual-stack ones with --family both and no other
// network flag. (BSD's daemons, which never hear a span, are simnet's:
// TestDualStackLink there. A --bsd-compat daemon here would be measured
// by ICMP timestamps, which the kernel answers from the host's clock, not
// the daemon's simulated one, so its clock could not be judged.) One daemon is master on the link, a dual-stack one,
// master of both families; every other daemon follows it on one network
// (the other dual-stack one ignores its second family), the clocks
// converge, status says which side of the link each of the master's
// networks is, and nothing changes while the master runs five more sync
// rounds (counted by its timed_sync_rounds_total): no master change, no
// election; each daemon is then on one of the master's lists. The master killed, the other dual-stack daemon takes the
// link, alone master again.
func TestDualStackLinkBoth(t *testing.T) {
	needNetns(t)
	t.Parallel()
	fams := []linkFamily{only4, only4, only6, only6, dual, dual}
	names := netnsLink(t, fams)
	c := netnsClusterWith(t, names, len(fams), fiveOffsets, func(i int) []string {
		if fams[i] == dual {
			return []string{"--family", "both"}
		}
		return nil
	})
	// A spanning daemon takes the families over one after the other,
	// each at most an election period after it started.
	bound := electionBound + 2*electionMax
	var m *node
	c.await("one master on the link", bound, func() (bool, string) {
		var why string
		m, why = linkMaster(c, fams)
		return m != nil, why
	})
	c.await("clocks within 20 ms", 10*syncInterval+10*time.Second, func() (bool, string) {
		ok, why := spreadBelow(c, 20*time.Millisecond)
		if !ok {
			why += ": " + describeLinkSync(c)
		}
		return ok, why
	})
	st, err := c.statuses()
	if err != nil {
		t.Fatal(err)
	}
	var sides []string
	for _, nw := range st[m].Networks {
		sides = append(sides, nw.Link)
	}
	if len(sides) != 2 || !strings.HasPrefix(sides[0], "IPv4 side of dual-stack eth0") || !strings.HasPrefix(sides[1], "IPv6 side of dual-stack eth0") {
		t.Errorf("%s's networks say %q, want their sides of the link", m.name, sides)
	}
	mi := slices.Index(c.nodes, m)
	body, err := metricsIn(names.Netns(mi))
	if err != nil {
		t.Fatal(err)
	}
	if got := grepLines(body, "timed_link_info{"); strings.Count(got, `family="ipv4"`) != 1 || strings.Count(got, `family="ipv6"`) != 1 {
		t.Errorf("timed_link_info: %s", got)
	}

	// Five sync rounds of the master, watched: the roles stay.
	rounds := func() (float64, error) {
		body, err := metricsIn(names.Netns(mi))
		n, _ := netbench.CounterSum([]byte(body), "timed_sync_rounds_total")
		return n, err
	}
	before := elections(st)
	start, err := rounds()
	if err != nil {
		t.Fatal(err)
	}
	c.await("five more sync rounds of "+m.name, 5*2*syncInterval+10*time.Second, func() (bool, string) {
		if now, why := linkMaster(c, fams); now != m {
			t.Fatalf("the link's master was %s, now %v: %s\n%s", m.name, now, why, networkLogs(c))
		}
		// Two networks, a round on each per interval.
		n, err := rounds()
		if err != nil {
			return false, err.Error() // asked again at the next poll
		}
		return n >= start+10, fmt.Sprintf("%v rounds since", n-start)
	})
	st, err = c.statuses()
	if err != nil {
		t.Fatal(err)
	}
	if after := elections(st); after != before {
		t.Errorf("elections seen went from %v to %v while settled", before, after)
	}
	// The other dual-stack daemon answers on one family only: the master
	// drops it from the other's list (LostHost rounds), and measures and
	// corrects each daemon once a round.
	c.await("every daemon on one list of "+m.name, 10*syncInterval+10*time.Second, func() (bool, string) {
		s, err := c.status(m)
		if err != nil {
			return false, err.Error()
		}
		count := map[string]int{}
		for _, nw := range s.Networks {
			for _, sl := range nw.Slaves {
				count[sl.Name]++
			}
		}
		for _, nd := range c.nodes {
			if nd != m && count[nd.name] != 1 {
				return false, fmt.Sprintf("%s on %d of %s's lists: %v", nd.name, count[nd.name], m.name, count)
			}
		}
		return true, ""
	})

	c.kill(m, syscall.SIGTERM)
	var m2 *node
	c.await("one master on the link after "+m.name+" died", bound, func() (bool, string) {
		var why string
		m2, why = linkMaster(c, fams, m)
		return m2 != nil, why
	})
	if m2 == m {
		t.Fatalf("the dead master is master")
	}
	st, err = c.statuses(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("master %s, then %s: %s", m.name, m2.name, describeNets(st))
}

// linkMaster: exactly one daemon (of those not skipped) is master on any
// network, a dual-stack one, master on both its networks; every other
// daemon follows it on its slavenet and is on its list there, and serves
// no other network but as "ignore". It returns the master, or nil and
// why not.
func linkMaster(c *cluster, fams []linkFamily, skip ...*node) (*node, string) {
	st, err := c.statuses(skip...)
	if err != nil {
		return nil, err.Error()
	}
	var m *node
	for nd, s := range st {
		if slices.ContainsFunc(s.Networks, func(n control.Network) bool { return n.State == "master" }) {
			if m != nil {
				return nil, fmt.Sprintf("two masters on the link: %s and %s: %s", m.name, nd.name, describeNets(st))
			}
			m = nd
		}
	}
	if m == nil {
		return nil, "no master: " + describeNets(st)
	}
	if i := slices.Index(c.nodes, m); fams[i] != dual || len(st[m].Networks) != 2 ||
		st[m].Networks[0].State != "master" || st[m].Networks[1].State != "master" {
		return nil, fmt.Sprintf("master %s (%v) is not master of both families: %s", m.name, fams[i], describeNets(st))
	}
	listed := map[string]bool{}
	for _, nw := range st[m].Networks {
		for _, sl := range nw.Slaves {
			listed[sl.Name] = true
		}
	}
	for nd, s := range st {
		if nd == m {
			continue
		}
		follows := false
		for _, nw := range s.Networks {
			switch {
			case nw.State == "slave" && nw.Slavenet && nw.Master != nil && nw.Master.Name == m.name:
				follows = true
			case nw.State == "ignore":
			default:
				return nil, fmt.Sprintf("%s is %s on %s: %s", nd.name, nw.State, nw.Address, describeNets(st))
			}
		}
		if !follows || !listed[nd.name] {
			return nil, fmt.Sprintf("%s does not follow %s yet (listed %v): %s", nd.name, m.name, listed[nd.name], describeNets(st))
		}
	}
	return m, ""
}

// describeNets is every daemon's role on each of its networks.
func describeNets(st map[*node]*control.Status) string {
	var parts []string
	for nd, s := range st {
		var roles []string
		for _, nw := range s.Networks {
			r := nw.State
			if nw.Master != nil && nw.State != "master" {
				r += "(" + nw.Master.Name + ")"
			}
			roles = append(roles, r)
		}
		parts = append(parts, nd.name+"="+strings.Join(roles, "/"))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// describeLinkSync is, for a failure, every daemon's offset and roles,
// and each master's lists by network.
func describeLinkSync(c *cluster) string {
	st, err := c.statuses()
	if err != nil {
		return err.Error()
	}
	var parts []string
	for nd, s := range st {
		p := fmt.Sprintf("%s offset %.3fs", nd.name, s.OffsetSecs)
		for _, nw := range s.Networks {
			var sl []string
			for _, x := range nw.Slaves {
				sl = append(sl, x.Name)
			}
			p += fmt.Sprintf(" [%s %s slavenet=%v slaves=%v]", nw.Address, nw.State, nw.Slavenet, sl)
		}
		parts = append(parts, p)
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// networkLogs is what the daemons logged of networks ignored and back in
// use, for a failure.
func networkLogs(c *cluster) string {
	var out []string
	for _, nd := range c.nodes {
		nd.mu.Lock()
		for l := range strings.Lines(nd.log.String()) {
			if strings.Contains(l, "network ignored") || strings.Contains(l, "network back in use") || strings.Contains(l, "master") && strings.Contains(l, "state") {
				out = append(out, nd.name+": "+strings.TrimSpace(l))
			}
		}
		nd.mu.Unlock()
	}
	return strings.Join(out, "\n")
}

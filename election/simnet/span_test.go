package simnet

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/election"
)

var (
	lseedFlag  = flag.Uint64("lseed", 0, "TestRandomDualStackLink: replay only this seed, with a trace")
	lseedsFlag = flag.Int("lseeds", 150, "TestRandomDualStackLink: how many seeds to run")
)

// A dual-stack link is two simnet networks, "v4" (0) and "v6" (1), that
// stand for the two families of one wire: IPv4-only hosts are on v4,
// IPv6-only hosts on v6, and dual-stack hosts with --family both on both,
// with Config.Link set (they span the link). The invariant: once
// settled, while a spanning host that may be master is up, one host is
// master on the link (on both families); with none, the two families
// cannot hear each other and have a master each.

// dualLink builds the link: v4 hosts a1…, v6 hosts b1…, spanning hosts
// d1…; bsd makes the IPv4-only hosts drop version 2, as BSD's daemons.
func dualLink(seed uint64, v4, v6, dual int, bsd bool) *Net {
	n := New(seed)
	n.Networks[0].Name = "v4"
	v6net := n.AddNetwork("v6")
	for i := range v4 {
		nd := n.AddOn(election.FastConfig(fmt.Sprintf("a%d", i+1)), 0)
		nd.NoExt = bsd
	}
	for i := range v6 {
		n.AddOn(election.FastConfig(fmt.Sprintf("b%d", i+1)), v6net)
	}
	for i := range dual {
		c := election.FastConfig(fmt.Sprintf("d%d", i+1))
		c.Link = 1
		n.AddOn(c, 0, v6net)
	}
	n.SimClocks = true
	return n
}

// spanning reports whether nd serves both families of the link.
func spanning(nd *Node) bool { return len(nd.Nets) == 2 && nd.Cfg.Link != 0 }

// linkMasters is the up hosts that are master on either family.
func (n *Net) linkMasters() []*Node {
	var out []*Node
	for k := range n.Networks {
		for _, nd := range n.netMasters(k) {
			if !slices.Contains(out, nd) {
				out = append(out, nd)
			}
		}
	}
	return out
}

// spanUp reports whether a spanning host that may be master is up.
func (n *Net) spanUp() bool {
	return slices.ContainsFunc(n.Nodes, func(nd *Node) bool { return nd.Up && spanning(nd) && nd.Cfg.MayBeMaster })
}

// linkSettled is SiteSettled, and one master on the link while a
// spanning host is up (it, master on both families).
func (n *Net) linkSettled() (bool, string) {
	if ok, why := n.SiteSettled(); !ok {
		return false, why
	}
	if !n.spanUp() {
		return true, ""
	}
	ms := n.linkMasters()
	if len(ms) != 1 {
		return false, fmt.Sprintf("link masters %v while a spanning host is up", names(ms))
	}
	if m := ms[0]; !spanning(m) || !m.H.State(0).IsMaster() || !m.H.State(1).IsMaster() {
		return false, fmt.Sprintf("link master %s is not master on both families", m.Name)
	}
	return true, ""
}

// settleLink runs until linkSettled, or fails the test.
func settleLink(t *testing.T, n *Net, limit time.Duration, what string) {
	t.Helper()
	if !n.RunUntil(limit, func() bool { ok, _ := n.linkSettled(); return ok }) {
		_, why := n.linkSettled()
		t.Fatalf("%s: not settled within %v: %s\n%s", what, limit, why, joinLines(n.Status()))
	}
}

// countMasterChanges counts, from now on, every state change to master
// (an election or a takeover anywhere on the link).
func countMasterChanges(n *Net) *int {
	count := new(int)
	prev := n.OnNetAction
	n.OnNetAction = func(nd *Node, net int, a election.Action) {
		if prev != nil {
			prev(nd, net, a)
		}
		if sc, ok := a.(election.StateChange); ok && sc.To == election.Master {
			*count++
		}
	}
	return count
}

// TestDualStackLink: 2 IPv4-only, 2 IPv6-only and 2 dual-stack hosts on
// one link, started together. One master serves the link, a dual-stack
// one, master on both families; no role changes for 10 sync rounds.
// Its crash: the other dual-stack host takes the link within an election
// period and the takeovers it makes. Both gone: a master per family
// (they cannot hear each other). One back: one master again.
func TestDualStackLink(t *testing.T) {
	cfg := election.FastConfig("x")
	for seed := range uint64(20) {
		for _, bsd := range []bool{false, true} {
			n := dualLink(seed, 2, 2, 2, bsd)
			n.SetLink(Link{MinLatency: time.Millisecond, MaxLatency: time.Duration(1+seed%8) * time.Millisecond})
			c := CheckMulti(n, cfg)
			startAll(n, 2*time.Second)
			limit := multiBound(n, cfg)
			what := fmt.Sprintf("seed %d bsd=%v", seed, bsd)
			settleLink(t, n, limit, what+": start")
			if c.Err != nil {
				t.Fatalf("%s: %v", what, c.Err)
			}
			master := n.linkMasters()[0]
			changes := countMasterChanges(n)
			snap := n.Snapshot()
			n.Run(10 * cfg.SyncInterval)
			if *changes != 0 || n.Snapshot() != snap {
				t.Fatalf("%s: %d master changes in 10 rounds after settling: %s", what, *changes, lineDiff(snap, n.Snapshot()))
			}

			n.Crash(master)
			settleLink(t, n, limit, what+": after the master's crash")
			if m := n.linkMasters(); m[0] == master || !spanning(m[0]) {
				t.Fatalf("%s: link master %s after %s crashed", what, m[0].Name, master.Name)
			}

			for _, nd := range n.Nodes {
				if spanning(nd) {
					n.Crash(nd)
				}
			}
			settleLink(t, n, limit, what+": no spanning host")
			if ms := n.linkMasters(); len(ms) != 2 {
				t.Fatalf("%s: %d masters %v with no spanning host, want one per family", what, len(ms), names(ms))
			}
			n.Start(master)
			settleLink(t, n, limit, what+": a spanning host back")
			if ms := n.linkMasters(); ms[0] != master {
				t.Fatalf("%s: link master %s, want %s, the only spanning host", what, ms[0].Name, master.Name)
			}
			if c.Err != nil {
				t.Fatalf("%s: %v", what, c.Err)
			}
		}
	}
}

// TestRandomDualStackLink runs random fault schedules (crashes and
// restarts, spanning hosts among them, partitions of either family,
// loss, duplication, reordering, forced elections) on random dual-stack
// links: 0–3 IPv4-only hosts (BSD's in a third of the links), 0–3
// IPv6-only, 1–3 spanning, a tenth of them not eligible. MultiChecker's
// invariants hold throughout; after the calm the link settles within
// multiBound with one master while a spanning host is up (linkSettled),
// and then no role changes for 10 sync rounds (quiescent). Replay a
// failing seed with
//
//	go test ./election/simnet -run TestRandomDualStackLink -lseed N -v
func TestRandomDualStackLink(t *testing.T) {
	runSeeds(t, "TestRandomDualStackLink", "lseed", 5000, *lseedsFlag, *lseedFlag, func(seed uint64, trace func(string)) error {
		r := rand.New(rand.NewPCG(seed, 23))
		n := dualLink(seed, r.IntN(4), r.IntN(4), 1+r.IntN(3), r.IntN(3) == 0)
		for _, nd := range n.Nodes {
			nd.Cfg.MayBeMaster = r.IntN(10) != 0
			nd.Offset = time.Duration(r.IntN(2000)-1000) * time.Millisecond
		}
		cfg := election.FastConfig("x")
		base := Link{MinLatency: time.Duration(500+r.IntN(1500)) * time.Microsecond}
		base.MaxLatency = base.MinLatency + time.Duration(r.IntN(8000))*time.Microsecond
		n.SetLink(base)
		c := CheckMulti(n, cfg)
		if trace != nil {
			n.Trace(trace)
			var all []string
			for _, nd := range n.Nodes {
				all = append(all, fmt.Sprintf("%s%v-M=%v", nd.Name, nd.Nets, !nd.Cfg.MayBeMaster))
			}
			trace(strings.Join(all, " "))
		}
		if err := faultsThenCalm(n, r, base, c.err, trace); err != nil {
			return err
		}
		limit := multiBound(n, cfg)
		if !n.RunUntil(limit, func() bool { ok, _ := n.linkSettled(); return ok }) {
			_, why := n.linkSettled()
			return fmt.Errorf("not settled %v after the calm: %s\n%s", limit, why, joinLines(n.Status()))
		}
		var st multiStats
		if err := quiescent(n, c, limit, &st); err != nil {
			return err
		}
		if ok, why := n.linkSettled(); !ok {
			return fmt.Errorf("after the quiet rounds: %s\n%s", why, joinLines(n.Status()))
		}
		return nil
	})
}

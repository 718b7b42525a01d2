package simnet

import (
	"net/netip"
	"testing"
	"time"

	"github.com/timed-project/timed/election"
)

// fast is the timer profile of the simulations.
func fast(name string) election.Config { return election.FastConfig(name) }

// newNet builds a network of n eligible nodes with the fast profile and a
// checker.
func newNet(t testing.TB, seed uint64, count int, mk func(string) election.Config) (*Net, *Checker) {
	t.Helper()
	if mk == nil {
		mk = fast
	}
	n := New(seed)
	n.AddN(count, mk)
	c := Check(n, mk("x"))
	return n, c
}

func startAll(n *Net, jitter time.Duration) {
	for _, nd := range n.Nodes {
		at := n.S.Now()
		if jitter > 0 {
			at = at.Add(time.Duration(n.rng.Int64N(int64(jitter))))
		}
		n.StartAt(nd, at)
	}
	n.Run(jitter)
}

func checkOK(t testing.TB, c *Checker) {
	t.Helper()
	if c.Err != nil {
		t.Fatalf("invariant violated: %v\nstatus:\n%s", c.Err, joinLines(c.net.Status()))
	}
}

func joinLines(ls []string) string {
	s := ""
	for _, l := range ls {
		s += "  " + l + "\n"
	}
	return s
}

// settle runs until the network is settled or B has passed, and fails the
// test if it did not settle.
func settle(t testing.TB, n *Net, c *Checker) time.Duration {
	t.Helper()
	start := n.S.Now()
	if !n.RunUntil(c.Bound+time.Second, n.Settled) {
		t.Fatalf("not settled after %v\n%s", c.Bound, joinLines(n.Status()))
	}
	checkOK(t, c)
	return n.S.Now().Sub(start)
}

// stable builds a settled network: n1 starts first and becomes master, the
// others join it.
func stable(t testing.TB, seed uint64, count int, mk func(string) election.Config) (*Net, *Checker) {
	t.Helper()
	n, c := newNet(t, seed, count, mk)
	n.Start(n.Nodes[0])
	n.Run(time.Second)
	for _, nd := range n.Nodes[1:] {
		n.Start(nd)
	}
	settle(t, n, c)
	n.Run(n.Nodes[0].Cfg.SyncInterval) // quiet: no packet in flight
	return n, c
}

func master(t testing.TB, n *Net) *Node {
	t.Helper()
	ms := n.Masters()
	if len(ms) != 1 {
		t.Fatalf("want one master, have %v\n%s", names(ms), joinLines(n.Status()))
	}
	return ms[0]
}

// trustEligible gives every node BSD's -F list: the addresses of the nodes
// that may be master, on every network they are on.
func trustEligible(n *Net) {
	var trusted []netip.AddrPort
	for _, nd := range n.Nodes {
		if nd.Cfg.MayBeMaster {
			trusted = append(trusted, nd.Addrs...)
		}
	}
	for _, nd := range n.Nodes {
		nd.Cfg.Trusted = trusted
	}
}

package simnet

import (
	"testing"
	"time"

	"github.com/timed-project/timed/election"
)

// gatewaySite is A (a1 a2) and B (b1 b2) joined by gw, on the fast
// profile, a1 started first: a1 is the time source, gw its submaster on B.
// bsd: every host but gw drops version 2 (NoExt), as BSD's daemons.
func gatewaySite(t *testing.T, seed uint64, bsd bool) (*Net, *MultiChecker, *Node) {
	t.Helper()
	n := New(seed)
	n.Networks[0].Name = "A"
	b := n.AddNetwork("B")
	a1 := n.AddOn(election.FastConfig("a1"), 0)
	n.AddOn(election.FastConfig("a2"), 0)
	gw := n.AddOn(election.FastConfig("gw"), 0, b)
	n.AddOn(election.FastConfig("b1"), b)
	n.AddOn(election.FastConfig("b2"), b)
	for _, nd := range n.Nodes {
		nd.NoExt = bsd && nd != gw
	}
	n.SetLink(Link{MinLatency: time.Millisecond, MaxLatency: time.Duration(1+seed%8) * time.Millisecond})
	c := CheckMulti(n, election.FastConfig("x"))
	n.Start(a1)
	n.Run(time.Second)
	for _, nd := range n.Nodes[1:] {
		n.Start(nd)
	}
	if !n.RunUntil(time.Minute, func() bool { ok, _ := n.SiteSettled(); return ok }) {
		_, why := n.SiteSettled()
		t.Fatalf("seed %d: not settled: %s\n%s", seed, why, joinLines(n.Status()))
	}
	return n, c, gw
}

// The gateway of two networks dies: B elects a master of its own within
// the election timeout. It comes back: one time source again within one
// round. Its start-up poll finds a1 on A and b1 on B; it asks both which
// time source they serve, and their answers, a round trip later, have it
// take B over at once.
func TestGatewayLostAndRestored(t *testing.T) {
	cfg := election.FastConfig("x")
	gatewayLostAndRestored(t, false, cfg.SyncInterval)
}

// TestGatewayLostAndRestoredBSD: the same with masters that do not answer
// (BSD's): the LOOPs tell the time sources, within two rounds (up to a
// round before each master's first LOOP, then a round of its LOOPs to
// know its time source; then the takeover, at once).
func TestGatewayLostAndRestoredBSD(t *testing.T) {
	cfg := election.FastConfig("x")
	gatewayLostAndRestored(t, true, 2*cfg.SyncInterval+time.Second)
}

func gatewayLostAndRestored(t *testing.T, bsd bool, mergeBound time.Duration) {
	cfg := election.FastConfig("x")
	var worstElect, worstMerge time.Duration
	for seed := range uint64(30) {
		n, c, gw := gatewaySite(t, seed, bsd)
		n.Run(cfg.SyncInterval)
		n.Crash(gw)
		crashed := n.S.Now()
		bHasMaster := func() bool { return len(n.netMasters(1)) == 1 }
		limit := cfg.ElectionTimeoutMax() + cfg.StateTimeout(election.Candidate, n.MaxDelay())
		if !n.RunUntil(limit, bHasMaster) {
			t.Fatalf("seed %d: B has no master %v after the gateway died\n%s", seed, limit, joinLines(n.Status()))
		}
		worstElect = max(worstElect, n.S.Now().Sub(crashed))
		n.Run(cfg.SyncInterval)
		n.Start(gw)
		restored := n.S.Now()
		one := func() bool { ok, _ := n.SiteSettled(); return ok && len(n.Sources(n.Sites()[0])) == 1 }
		if !n.RunUntil(mergeBound, one) {
			_, why := n.SiteSettled()
			t.Fatalf("seed %d: not one time source %v after the gateway came back: %s\n%s", seed, mergeBound, why, joinLines(n.Status()))
		}
		worstMerge = max(worstMerge, n.S.Now().Sub(restored))
		if c.Err != nil {
			t.Fatalf("seed %d: %v", seed, c.Err)
		}
	}
	t.Logf("B elected its own master at most %v after the gateway died; one time source at most %v after it came back", worstElect, worstMerge)
}

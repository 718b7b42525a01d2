package simnet

import (
	"fmt"
	"testing"
	"time"

	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp"
)

// refCfg is a reference node's configuration (--reference kernel).
func refCfg(name string) election.Config {
	c := fast(name)
	c.Reference = true
	return c
}

func claim(maxErr time.Duration) election.SetReference {
	return election.SetReference{Claim: true, MaxError: maxErr}
}

// settleOn runs until the network is settled with want as its master,
// and fails the test if it does not within the checker's bound.
func settleOn(t *testing.T, n *Net, c *Checker, want *Node, what string) {
	t.Helper()
	ok := n.RunUntil(c.Bound+time.Second, func() bool {
		ms := n.Masters()
		return n.Settled() && len(ms) == 1 && ms[0] == want
	})
	checkOK(t, c)
	if !ok {
		t.Fatalf("%s: %s not the settled master after %v\n%s", what, want.Name, c.Bound, joinLines(n.Status()))
	}
}

// stays runs rounds more and fails if the master changes or any node
// changes state: two references do not fight, a settled network is quiet.
func stays(t *testing.T, n *Net, c *Checker, want *Node, rounds int) {
	t.Helper()
	changes := 0
	n.OnAction = func(nd *Node, a election.Action) {
		if sc, ok := a.(election.StateChange); ok && sc.From != sc.To {
			changes++
		}
	}
	defer func() { n.OnAction = nil }()
	n.Run(time.Duration(rounds) * want.Cfg.SyncInterval)
	checkOK(t, c)
	if m := master(t, n); m != want || changes != 0 {
		t.Fatalf("after %d rounds: master %s, %d state changes; want %s and none\n%s", rounds, m.Name, changes, want.Name, joinLines(n.Status()))
	}
}

// TestReferencePreferred: a claiming reference that joins a settled
// network of eligible hosts takes it over (its claim outranks the master,
// whatever the names), and one started with the others cold wins too.
func TestReferencePreferred(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("join/", seed), func(t *testing.T) {
			n, c := stable(t, seed, 4, nil)
			r := n.Add(refCfg("z-ref")) // the highest name: only the claim makes it win
			n.SetReference(r, claim(5*time.Millisecond))
			n.Start(r)
			settleOn(t, n, c, r, "reference joins")
			stays(t, n, c, r, 5)
			if n.Stats.DeliveredExt[tsp.ExtReference] == 0 {
				t.Error("no claim was delivered")
			}
		})
		t.Run(fmt.Sprint("cold/", seed), func(t *testing.T) {
			n, c := newNet(t, seed, 4, nil)
			r := n.Add(refCfg("z-ref"))
			n.SetReference(r, claim(5*time.Millisecond))
			startAll(n, 200*time.Millisecond)
			settleOn(t, n, c, r, "cold start")
			stays(t, n, c, r, 3)
		})
	}
}

// TestTwoReferences: of two claiming references the smaller maxerror
// wins whichever was master first, equal maxerrors (the same power of
// two of a millisecond) go by the name, and the loser stays a slave:
// they do not fight.
func TestTwoReferences(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("maxerror/", seed), func(t *testing.T) {
			n, c := stable(t, seed, 3, nil)
			worse := n.Add(refCfg("a-ref")) // the lower name, the larger maxerror
			better := n.Add(refCfg("b-ref"))
			n.SetReference(worse, claim(50*time.Millisecond))
			n.SetReference(better, claim(2*time.Millisecond))
			n.Start(worse)
			settleOn(t, n, c, worse, "first reference")
			n.Start(better)
			settleOn(t, n, c, better, "better reference")
			stays(t, n, c, better, 5)
		})
		t.Run(fmt.Sprint("names/", seed), func(t *testing.T) {
			n, c := stable(t, seed, 3, nil)
			b := n.Add(refCfg("b-ref"))
			a := n.Add(refCfg("a-ref"))
			n.SetReference(b, claim(9*time.Millisecond)) // 9 and 12 ms: both in [8, 16)
			n.SetReference(a, claim(12*time.Millisecond))
			n.Start(b)
			settleOn(t, n, c, b, "first reference")
			n.Start(a)
			settleOn(t, n, c, a, "lower name")
			stays(t, n, c, a, 5)
		})
	}
}

// TestReferenceStepDownAndReturn: a reference master that stops claiming
// gives its network up; the others elect one of themselves (ordinary
// TEMPO) or follow another reference, and the network settles with one
// master; when it claims again it takes the network back.
func TestReferenceStepDownAndReturn(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("tempo/", seed), func(t *testing.T) {
			n, c := stable(t, seed, 4, nil)
			r := n.Add(refCfg("z-ref"))
			n.SetReference(r, claim(5*time.Millisecond))
			n.Start(r)
			settleOn(t, n, c, r, "reference")
			n.SetReference(r, election.SetReference{MaxError: 200 * time.Millisecond})
			if !n.RunUntil(c.Bound+time.Second, func() bool { ms := n.Masters(); return n.Settled() && len(ms) == 1 && ms[0] != r }) {
				t.Fatalf("no other master after the step-down\n%s", joinLines(n.Status()))
			}
			checkOK(t, c)
			if st := r.M.State(); st != election.Slave {
				t.Errorf("stepped-down reference is %v, want slave", st)
			}
			n.SetReference(r, claim(5*time.Millisecond))
			settleOn(t, n, c, r, "reference back")
		})
		t.Run(fmt.Sprint("other/", seed), func(t *testing.T) {
			n, c := stable(t, seed, 3, nil)
			r1, r2 := n.Add(refCfg("r1")), n.Add(refCfg("r2"))
			n.SetReference(r1, claim(2*time.Millisecond))
			n.SetReference(r2, claim(20*time.Millisecond))
			n.Start(r1)
			n.Start(r2)
			settleOn(t, n, c, r1, "better reference")
			n.SetReference(r1, election.SetReference{})
			settleOn(t, n, c, r2, "the other reference")
			n.SetReference(r1, claim(2*time.Millisecond))
			settleOn(t, n, c, r1, "better reference back")
		})
	}
}

// TestReferenceBSDPeers: peers that drop version 2 (BSD's daemons, ours
// with --bsd-compat) never hear the claim and see an ordinary master: a
// reference takes a network of them over, and they follow it.
func TestReferenceBSDPeers(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		n, c := newNet(t, seed, 4, nil)
		for _, nd := range n.Nodes {
			nd.NoExt = true
		}
		n.Start(n.Nodes[0])
		n.Run(time.Second)
		for _, nd := range n.Nodes[1:] {
			n.Start(nd)
		}
		settle(t, n, c)
		r := n.Add(refCfg("z-ref"))
		n.SetReference(r, claim(5*time.Millisecond))
		n.Start(r)
		settleOn(t, n, c, r, fmt.Sprint("seed ", seed))
		stays(t, n, c, r, 3)
		if n.Stats.DeliveredExt[tsp.ExtReference] != 0 {
			t.Errorf("seed %d: %d claims delivered to peers that drop version 2", seed, n.Stats.DeliveredExt[tsp.ExtReference])
		}
	}
}

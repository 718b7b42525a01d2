package simnet

import (
	"flag"
	"fmt"
	"math/bits"
	"math/rand/v2"
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
	cases := []struct {
		kind          string
		first, second string        // started in this order
		firstErr      time.Duration // the claims' maxerrors
		secondErr     time.Duration
		why           string // why the second takes the network
	}{
		// The lower name, the larger maxerror, first.
		{"maxerror", "a-ref", "b-ref", 50 * time.Millisecond, 2 * time.Millisecond, "better reference"},
		// 9 and 12 ms: both in [8, 16), so the name decides.
		{"names", "b-ref", "a-ref", 9 * time.Millisecond, 12 * time.Millisecond, "lower name"},
	}
	for seed := uint64(1); seed <= 5; seed++ {
		for _, tc := range cases {
			t.Run(fmt.Sprint(tc.kind, "/", seed), func(t *testing.T) {
				n, c := stable(t, seed, 3, nil)
				first := n.Add(refCfg(tc.first))
				second := n.Add(refCfg(tc.second))
				n.SetReference(first, claim(tc.firstErr))
				n.SetReference(second, claim(tc.secondErr))
				n.Start(first)
				settleOn(t, n, c, first, "first reference")
				n.Start(second)
				settleOn(t, n, c, second, tc.why)
				stays(t, n, c, second, 5)
			})
		}
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

var rseedsFlag = flag.Int("rseeds", 200, "TestRandomReferences: how many seeds to run")

// TestRandomReferences: TestRandomFaults's schedules with one or two
// reference nodes whose claims (and maxerrors) change at random during
// the faults, every invariant checked after every step. After the calm
// the network must settle, and on the best claiming reference when one
// claims: the smaller maxerror's power of two, then the lower name.
func TestRandomReferences(t *testing.T) {
	runSeeds(t, "TestRandomReferences", "rseed", 5000, *rseedsFlag, 0, randomReferenceRun)
}

func randomReferenceRun(seed uint64, trace func(string)) error {
	r := rand.New(rand.NewPCG(seed, 43))
	n := New(seed)
	plain := 1 + r.IntN(4)
	n.AddN(plain, func(name string) election.Config {
		c := fast(name)
		c.MayBeMaster = r.Float64() < 0.7
		return c
	})
	var refs []*Node
	for i := range 1 + r.IntN(2) {
		refs = append(refs, n.Add(refCfg(fmt.Sprintf("r%d", i+1))))
	}
	errs := []time.Duration{500 * time.Microsecond, 3 * time.Millisecond, 5 * time.Millisecond, 40 * time.Millisecond}
	draw := func() election.SetReference {
		return election.SetReference{Claim: r.IntN(3) > 0, MaxError: errs[r.IntN(len(errs))]}
	}
	for _, nd := range refs {
		nd.Claim = draw()
		for range 1 + r.IntN(4) { // changes of claim during the faults
			n.S.After(time.Duration(r.Int64N(int64(58*time.Second))), func() { n.SetReference(nd, draw()) })
		}
	}
	if r.IntN(3) == 0 {
		trustEligible(n)
	}
	base := Link{MinLatency: time.Duration(500+r.IntN(1500)) * time.Microsecond}
	base.MaxLatency = base.MinLatency + time.Duration(r.IntN(8000))*time.Microsecond
	n.SetLink(base)
	c := Check(n, fast("x"))
	if trace != nil {
		n.Trace(trace)
		trace(fmt.Sprintf("seed %d: %d plain nodes, %d references, B=%v", seed, plain, len(refs), c.Bound))
	}
	if err := faultsThenCalm(n, r, base, c.err, trace); err != nil {
		return err
	}
	calm := n.S.Now()
	n.Run(c.Bound + 2*fast("x").SyncInterval)
	if c.Err != nil {
		return c.Err
	}
	if !n.Settled() {
		return fmt.Errorf("not settled %v after the calm began (B=%v)", n.S.Now().Sub(calm), c.Bound)
	}
	var best *Node
	for _, nd := range refs {
		if nd.Claim.Claim && (best == nil || refBucketOf(nd) < refBucketOf(best) || refBucketOf(nd) == refBucketOf(best) && nd.Name < best.Name) {
			best = nd
		}
	}
	if ms := n.Masters(); best != nil && (len(ms) != 1 || ms[0] != best) {
		return fmt.Errorf("master %v, want the best claiming reference %s", names(ms), best.Name)
	}
	return nil
}

// refBucketOf is a node's claim's power of two of a millisecond, as the
// election compares them (by value: 0.5, 3, 5 and 40 ms are 0, 2, 3, 6).
func refBucketOf(nd *Node) int {
	return bits.Len64(uint64(nd.Claim.MaxError / time.Millisecond))
}

// TestReferenceGateway: a reference on two networks, not claiming, is
// not eligible: a1 masters A, b1 B, and the gateway follows one of them.
// When it claims it masters both networks (its claim outranks their time
// sources), and the site settles on it; when it stops, each network goes
// back to a master of its own, or one takes the other's time.
func TestReferenceGateway(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		n := New(seed)
		n.Networks[0].Name = "A"
		b := n.AddNetwork("B")
		a1 := n.AddOn(fast("a1"), 0)
		n.AddOn(fast("a2"), 0)
		gw := n.AddOn(refCfg("gw"), 0, b)
		n.AddOn(fast("b1"), b)
		n.AddOn(fast("b2"), b)
		n.SetLink(Link{MinLatency: time.Millisecond, MaxLatency: time.Duration(1+seed%8) * time.Millisecond})
		c := CheckMulti(n, fast("x"))
		n.Start(a1)
		n.Run(time.Second)
		for _, nd := range n.Nodes[1:] {
			n.Start(nd)
		}
		settled := func() bool { ok, _ := n.SiteSettled(); return ok }
		if !n.RunUntil(time.Minute, settled) {
			t.Fatalf("seed %d: not settled before the claim\n%s", seed, joinLines(n.Status()))
		}
		n.SetReference(gw, claim(time.Millisecond))
		both := func() bool {
			return settled() && gw.H.State(0).IsMaster() && gw.H.State(1).IsMaster() &&
				len(n.netMasters(0)) == 1 && len(n.netMasters(b)) == 1
		}
		if !n.RunUntil(time.Minute, both) {
			_, why := n.SiteSettled()
			t.Fatalf("seed %d: the claiming gateway does not master both networks: %s\n%s", seed, why, joinLines(n.Status()))
		}
		n.SetReference(gw, election.SetReference{})
		if !n.RunUntil(2*time.Minute, func() bool { return settled() && !gw.H.State(0).IsMaster() && !gw.H.State(1).IsMaster() }) {
			_, why := n.SiteSettled()
			t.Fatalf("seed %d: not settled after the step-down: %s\n%s", seed, why, joinLines(n.Status()))
		}
		if c.Err != nil {
			t.Fatalf("seed %d: %v", seed, c.Err)
		}
	}
}

// TestReferenceResignPrompt: a reference master that stops claiming tells
// its network it resigns (tsp.ExtResign). Its former slaves drop its
// claim at once (nobody says it follows UTC via it any more), and one
// master, not the reference, is settled within a bound far below
// ElectionMin, at which the first election timer could run out, which
// was all that ended the slaves' wait before: 1 s against 6 s with the
// fast profile, 2 s against 6 min with BSD's timers. Then nobody changes
// state for five rounds: the draw made one master, and nobody flaps.
func TestReferenceResignPrompt(t *testing.T) {
	for _, c := range []struct {
		name   string
		mk     func(string) election.Config
		bound  time.Duration
		slaves int
		seeds  uint64
	}{
		{"fast", fast, time.Second, 6, 20},
		{"bsd-timers", election.DefaultConfig, 2 * time.Second, 12, 10},
	} {
		for seed := uint64(1); seed <= c.seeds; seed++ {
			t.Run(fmt.Sprint(c.name, "/", seed), func(t *testing.T) {
				n, ck := stable(t, seed, c.slaves, c.mk)
				rc := c.mk("z-ref")
				rc.Reference = true
				r := n.Add(rc)
				n.SetReference(r, claim(5*time.Millisecond))
				n.Start(r)
				settleOn(t, n, ck, r, "reference")
				n.Run(r.Cfg.SyncInterval)
				if min := n.Nodes[0].Cfg.ElectionMin; c.bound >= min/3 {
					t.Fatalf("bound %v not far below the election timer's %v", c.bound, min)
				}
				n.SetReference(r, election.SetReference{MaxError: 200 * time.Millisecond})
				const transit = 50 * time.Millisecond // the resignation's
				n.Run(transit)
				for _, nd := range n.Nodes {
					if nd == r || !nd.Up {
						continue
					}
					if _, ok := nd.H.ReferenceOf(0, r.Addr); ok {
						t.Fatalf("%s still holds the claim of the resigned reference", nd.Name)
					}
				}
				start := n.S.Now()
				if !n.RunUntil(c.bound-transit, func() bool { ms := n.Masters(); return n.Settled() && len(ms) == 1 && ms[0] != r }) {
					t.Fatalf("no other master settled %v after the step-down\n%s", c.bound, joinLines(n.Status()))
				}
				checkOK(t, ck)
				t.Logf("settled on %s %v after the resignation", master(t, n).Name, n.S.Now().Sub(start)+transit)
				stays(t, n, ck, master(t, n), 5)
				if n.Stats.DeliveredExt[tsp.ExtResign] == 0 {
					t.Error("no resignation was delivered")
				}
			})
		}
	}
}

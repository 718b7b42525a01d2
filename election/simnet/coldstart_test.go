package simnet

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/timed-project/timed/election"
)

// TestSimultaneousStart starts every node of a small network in the same
// tick (a power cut, a compose up) over lossy links, for 500 seeds: some
// nodes may not be master, some runs have a -F list, links lose up to 20%
// of packets and may duplicate them. Every invariant is checked after
// every step. It requires that a master exists before any election timer
// could have run out (the cold start or, for a node that heard nobody, the
// No Master wait made it, not an election), then lets the loss go on for
// a while, heals it, and requires exactly one master that every node
// follows within the bound B. A failure prints its seed; replay it with
//
//	go test ./election/simnet -run TestSimultaneousStart -cseed N -v
func TestSimultaneousStart(t *testing.T) {
	runSeeds(t, "TestSimultaneousStart", "cseed", 5000, *cseedsFlag, *cseedFlag, simultaneousRun)
}

func simultaneousRun(seed uint64, trace func(string)) error {
	r := rand.New(rand.NewPCG(seed, 15))
	count := 3 + r.IntN(10)
	n := New(seed)
	n.AddN(count, func(name string) election.Config {
		c := election.FastConfig(name)
		c.MayBeMaster = r.Float64() < 0.85
		return c
	})
	n.Nodes[0].Cfg.MayBeMaster = true
	if r.IntN(4) == 0 { // -F on every host: the eligible ones are trusted
		trustEligible(n)
	}
	link := Link{MinLatency: time.Duration(200+r.IntN(1800)) * time.Microsecond, Shape: Shape(r.IntN(2))}
	link.MaxLatency = link.MinLatency + time.Duration(r.IntN(8000))*time.Microsecond
	link.Loss = []float64{0, 0.02, 0.05, 0.1, 0.2}[r.IntN(5)]
	link.Dup = []float64{0, 0, 0.1}[r.IntN(3)]
	n.SetLink(link)
	cfg := n.Nodes[0].Cfg
	c := Check(n, cfg)
	if trace != nil {
		n.Trace(trace)
		trace(fmt.Sprintf("seed %d: %d nodes, link %+v, B=%v", seed, count, link, c.Bound))
	}
	var firstMaster time.Duration
	candidateFirst := false
	n.OnAction = func(nd *Node, a election.Action) {
		sc, ok := a.(election.StateChange)
		if !ok || firstMaster != 0 {
			return
		}
		switch {
		case sc.To == election.Master:
			firstMaster = n.Elapsed()
		case sc.To == election.Candidate:
			candidateFirst = true
		}
	}
	for _, nd := range n.Nodes {
		n.Start(nd)
	}
	// The latest a master can appear without an election: the cold start
	// of a node that saw everyone, or the No Master wait of one that saw
	// nobody.
	coldLimit := cfg.Retransmit[0] + min(cfg.ColdStartDelay*time.Duration(count), cfg.ElectionMin)
	limit := max(coldLimit, cfg.RetransmitSpan()+cfg.NoMasterWait)
	n.Run(limit)
	switch {
	case c.Err != nil:
		return c.Err
	case candidateFirst:
		return fmt.Errorf("an election came before any master")
	case firstMaster == 0:
		return fmt.Errorf("no master %v after a simultaneous start", limit)
	}
	// The loss goes on through the merges, the first rounds and the time
	// the first election timers may run out, then stops.
	n.Run(cfg.ElectionMax)
	if c.Err != nil {
		return c.Err
	}
	link.Loss = 0
	n.SetLink(link)
	if !n.RunUntil(c.Bound, n.Settled) {
		return fmt.Errorf("not settled %v after the loss stopped:\n%s", c.Bound, joinLines(n.Status()))
	}
	if c.Err != nil {
		return c.Err
	}
	if ms := n.Masters(); len(ms) != 1 {
		return fmt.Errorf("%d masters %v", len(ms), names(ms))
	}
	return nil
}

// TestSimultaneousStartNoLoss: without loss a simultaneous start settles
// (one master, every node on its list) before any election timer could
// run out, and no node is ever a candidate. The same holds when the cold
// start is squeezed to 3 ms a node, about a packet latency, so that
// several nodes become master together: the masters merge at once, and
// the slaves of those that quit follow the one that stays (the seeds are
// enough to meet a node in Consistency that heard a loser first, and a
// winner that was in Conflict when its rival quit).
func TestSimultaneousStartNoLoss(t *testing.T) {
	squeezed := func(name string) election.Config {
		c := fast(name)
		c.ColdStartDelay = 3 * time.Millisecond
		return c
	}
	for _, tc := range []struct {
		name         string
		mk           func(string) election.Config
		count, seeds int
	}{
		{"fast", fast, 2, 20}, {"fast", fast, 5, 20}, {"fast", fast, 12, 20}, {"fast", fast, 50, 5},
		{"collide", squeezed, 3, 200}, {"collide", squeezed, 5, 200}, {"collide", squeezed, 12, 200}, {"collide", squeezed, 50, 10},
	} {
		t.Run(fmt.Sprintf("%s/N=%d", tc.name, tc.count), func(t *testing.T) {
			for seed := uint64(1); seed <= uint64(tc.seeds); seed++ {
				simultaneousNoLoss(t, seed, tc.count, tc.mk)
			}
		})
	}
}

func simultaneousNoLoss(t *testing.T, seed uint64, count int, mk func(string) election.Config) {
	t.Helper()
	n, c := newNet(t, seed, count, mk)
	cands := 0
	n.OnAction = func(nd *Node, a election.Action) {
		if sc, ok := a.(election.StateChange); ok && sc.To == election.Candidate {
			cands++
		}
	}
	for _, nd := range n.Nodes {
		n.Start(nd)
	}
	cfg := mk("x")
	if !n.RunUntil(cfg.ElectionMin, n.Settled) {
		t.Fatalf("seed %d: not settled after %v:\n%s", seed, cfg.ElectionMin, joinLines(n.Status()))
	}
	checkOK(t, c)
	if cands != 0 {
		t.Fatalf("seed %d: %d candidacies", seed, cands)
	}
}

// TestSimultaneousStartJoinsMaster: daemons that start together while a
// master runs see each other's MASTERREQ, but the master answers before
// their cold start draws: none becomes master, none is ever a candidate.
func TestSimultaneousStartJoinsMaster(t *testing.T) {
	n, c := newNet(t, 4, 12, nil)
	n.Start(n.Nodes[0])
	n.Run(time.Second)
	m := master(t, n)
	became := 0
	n.OnAction = func(nd *Node, a election.Action) {
		if sc, ok := a.(election.StateChange); ok && sc.From != sc.To && (sc.To == election.Master || sc.To == election.Candidate) {
			became++
		}
	}
	for _, nd := range n.Nodes[1:] {
		n.Start(nd)
	}
	settle(t, n, c)
	if became != 0 || master(t, n) != m {
		t.Fatalf("%d nodes became master or candidate; master %s, want %s", became, master(t, n).Name, m.Name)
	}
}

// TestSimultaneousStartOff: with ColdStartDelay 0 the daemons behave as
// BSD's: each sees the others probing, leaves start-up a slave, and no
// master exists until the first election timer runs out.
func TestSimultaneousStartOff(t *testing.T) {
	mk := func(name string) election.Config {
		c := fast(name)
		c.ColdStartDelay = 0
		return c
	}
	n, c := newNet(t, 5, 5, mk)
	for _, nd := range n.Nodes {
		n.Start(nd)
	}
	cfg := mk("x")
	n.Run(cfg.RetransmitSpan() + cfg.ElectionMin - time.Millisecond)
	if ms := n.Masters(); len(ms) != 0 {
		t.Fatalf("masters %v before the first election timer could run out", names(ms))
	}
	settle(t, n, c)
}

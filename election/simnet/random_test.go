package simnet

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/timed-project/timed/election"
)

var (
	seedFlag   = flag.Uint64("seed", 0, "TestRandomFaults: replay only this seed, with a trace")
	seedsFlag  = flag.Int("seeds", 500, "TestRandomFaults: how many seeds to run")
	mseedFlag  = flag.Uint64("mseed", 0, "TestRandomMultiNet: replay only this seed, with a trace")
	mseedsFlag = flag.Int("mseeds", 200, "TestRandomMultiNet: how many seeds to run")
	cseedFlag  = flag.Uint64("cseed", 0, "TestSimultaneousStart: replay only this seed, with a trace")
	cseedsFlag = flag.Int("cseeds", 500, "TestSimultaneousStart: how many seeds to run")
)

// TestRandomFaults runs random fault schedules (crashes, restarts,
// partitions, heals, loss, duplication, reordering) on small networks with
// every invariant checked after every step, plus forced elections (timedc election), then heals everything and
// requires convergence within the bound B. A failure prints its seed;
// replay it with
//
//	go test ./election/simnet -run TestRandomFaults -seed N -v
//
// (or TIMED_SEED=N in the environment, e.g. through make test).
func TestRandomFaults(t *testing.T) {
	if env := os.Getenv("TIMED_SEED"); env != "" && *seedFlag == 0 {
		v, err := strconv.ParseUint(env, 10, 64)
		if err != nil {
			t.Fatalf("TIMED_SEED=%q: %v", env, err)
		}
		*seedFlag = v
	}
	runSeeds(t, "TestRandomFaults", "seed", 1000, *seedsFlag, *seedFlag, randomRun)
}

// runSeeds runs run for count seeds from first, or, with replay set, for
// that seed only with a trace; it stops after five failures, each printed
// with the command that replays it (flag names the replay flag).
func runSeeds(t *testing.T, test, flag string, first uint64, count int, replay uint64, run func(seed uint64, trace func(string)) error) {
	if replay != 0 {
		if err := run(replay, func(s string) { t.Log(s) }); err != nil {
			t.Fatalf("seed %d: %v", replay, err)
		}
		return
	}
	failures := 0
	for i := range count {
		seed := first + uint64(i)
		if err := run(seed, nil); err != nil {
			failures++
			t.Errorf("seed %d: %v\n  replay: go test ./election/simnet -run %s -%s %d -v", seed, err, test, flag, seed)
			if failures >= 5 {
				t.FailNow()
			}
		}
	}
}

// randomRun plays one random schedule; it returns the first invariant
// violation or a failure to converge.
func randomRun(seed uint64, trace func(string)) error {
	r := rand.New(rand.NewPCG(seed, 42))
	count := 2 + r.IntN(5)
	n := New(seed)
	eligible := 0
	n.AddN(count, func(name string) election.Config {
		c := election.FastConfig(name)
		c.MayBeMaster = r.Float64() < 0.85
		if c.MayBeMaster {
			eligible++
		}
		return c
	})
	if eligible == 0 {
		n.Nodes[0].Cfg.MayBeMaster = true
	}
	if r.IntN(3) == 0 { // BSD -F on every host: the eligible ones are trusted
		trustEligible(n)
	}
	base := Link{MinLatency: time.Duration(500+r.IntN(1500)) * time.Microsecond}
	base.MaxLatency = base.MinLatency + time.Duration(r.IntN(8000))*time.Microsecond
	base.Shape = Shape(r.IntN(2))
	n.SetLink(base)
	c := Check(n, n.Nodes[0].Cfg)
	if trace != nil {
		n.Trace(trace)
		trace(fmt.Sprintf("seed %d: %d nodes, link %+v, B=%v", seed, count, base, c.Bound))
	}
	if err := faultsThenCalm(n, r, base, c.err, trace); err != nil {
		return err
	}
	// Calm: wait B.
	calm := n.S.Now()
	n.Run(c.Bound + 2*n.Nodes[0].Cfg.SyncInterval)
	if c.Err != nil {
		return c.Err
	}
	if !n.Settled() {
		return fmt.Errorf("not settled %v after the calm began (B=%v)", n.S.Now().Sub(calm), c.Bound)
	}
	return nil
}

// faultsThenCalm starts every node within 2 s, plays 60 s of random faults
// on n, checking err after each pause (crashes, restarts, a partition of a
// random network, heals, forced elections on a random network of a node,
// and links with loss, duplication and reordering, sometimes one slow
// lossless pair), then calms it: heals, stops losing packets (duplication
// and reordering may stay) and restarts every crashed node. The draws from
// r for a Net with one network are those of the first TestRandomFaults, so
// that its seeds replay as they did.
func faultsThenCalm(n *Net, r *rand.Rand, base Link, err func() error, trace func(string)) error {
	for _, nd := range n.Nodes {
		n.StartAt(nd, n.S.Now().Add(time.Duration(r.Int64N(int64(2*time.Second)))))
	}
	count := len(n.Nodes)
	end := n.S.Now().Add(60 * time.Second)
	for n.S.Now().Before(end) {
		n.Run(time.Duration(r.Int64N(int64(8*time.Second))) + 100*time.Millisecond)
		if e := err(); e != nil {
			return e
		}
		switch k := r.IntN(8); k {
		case 7: // timedc election on a random node
			nd, net := n.Nodes[r.IntN(count)], 0
			if len(nd.Nets) > 1 {
				net = r.IntN(len(nd.Nets))
			}
			n.StepNet(nd, net, election.ForceElection{})
		case 0: // crash
			n.Crash(n.Nodes[r.IntN(count)])
		case 1: // restart
			for _, nd := range n.Nodes {
				if !nd.Up {
					n.Start(nd)
					break
				}
			}
		case 2: // partition
			w := 0
			if len(n.Networks) > 1 {
				w = r.IntN(len(n.Networks))
			}
			var a, b []int
			for _, nd := range n.Networks[w].Members {
				if r.IntN(2) == 0 {
					a = append(a, nd.ID)
				} else {
					b = append(b, nd.ID)
				}
			}
			n.PartitionNet(w, a, b)
		case 3:
			n.Heal()
		default: // change the link
			l := base
			l.Loss = []float64{0, 0, 0.05, 0.2, 0.4}[r.IntN(5)]
			l.Dup = []float64{0, 0, 0.1, 0.5}[r.IntN(4)]
			if r.IntN(2) == 0 {
				l.Reorder, l.ReorderDelay = 0.2, time.Duration(r.IntN(20))*time.Millisecond
			}
			n.SetLink(l)
			if trace != nil {
				trace(fmt.Sprintf("link %+v", l))
			}
			if r.IntN(3) == 0 { // and one slow, lossless link
				a, b := r.IntN(count), r.IntN(count)
				slow := Link{MinLatency: 2 * time.Millisecond, MaxLatency: time.Duration(2+r.IntN(15)) * time.Millisecond, Shape: Exponential}
				n.SetPairLink(a, b, slow)
			}
		}
	}
	n.Heal()
	l := n.Link(0, 0)
	l.Loss = 0
	n.SetLink(l)
	for _, nd := range n.Nodes {
		n.Start(nd)
	}
	return nil
}

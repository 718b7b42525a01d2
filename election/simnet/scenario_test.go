package simnet

import (
	"strings"

	"fmt"
	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp"
	"testing"
	"time"
)

func TestColdStart(t *testing.T) {
	for _, count := range []int{1, 2, 3, 10, 100} {
		t.Run(fmt.Sprint("N=", count), func(t *testing.T) {
			n, c := newNet(t, 1, count, nil)
			startAll(n, 50*time.Millisecond)
			took := settle(t, n, c)
			// Then it stays settled for a while (several sync rounds).
			n.Run(3 * fast("x").SyncInterval)
			checkOK(t, c)
			if !n.Settled() {
				t.Fatalf("unsettled again:\n%s", joinLines(n.Status()))
			}
			t.Logf("N=%d settled in %v; master %s; %d datagrams", count, took, n.Masters()[0].Name, n.Stats.Total())
		})
	}
}

func TestMasterCrash(t *testing.T) {
	n, c := stable(t, 2, 5, nil)
	old := master(t, n)
	n.Crash(old)
	took := settle(t, n, c)
	nm := master(t, n)
	if nm == old {
		t.Fatal("crashed master still master")
	}
	// The election starts when the first election timer expires: at most
	// ElectionTimeoutMax after the last ADJTIME.
	if lim := fast("x").ElectionTimeoutMax() + time.Second; took > lim {
		t.Fatalf("took %v, more than %v", took, lim)
	}
	// The old master comes back and joins as a slave.
	n.Start(old)
	settle(t, n, c)
	if master(t, n) != nm {
		t.Fatalf("restarted %s took over", old.Name)
	}
}

// Two slaves whose election timers expire together: both withdraw, both
// back off, and one master results.
func TestSimultaneousCandidates(t *testing.T) {
	n, c := stable(t, 3, 5, nil)
	old := master(t, n)
	n.Crash(old)
	var cands []*Node
	for _, nd := range n.Nodes {
		if nd.Up && len(cands) < 2 {
			cands = append(cands, nd)
		}
	}
	for _, nd := range cands {
		n.Step(nd, election.ForceElection{})
	}
	n.Run(200 * time.Millisecond)
	for _, nd := range cands {
		if st := nd.M.State(); st != election.Slave {
			t.Fatalf("%s is %v after the collision, want slave", nd.Name, st)
		}
		if b := nd.M.Backoff(); b != 2 {
			t.Fatalf("%s backoff %d, want 2", nd.Name, b)
		}
	}
	settle(t, n, c)
	m := master(t, n)
	n.Run(fast("x").SyncInterval)
	for _, nd := range n.Nodes {
		if nd.Up && nd != m && nd.M.Backoff() != 1 {
			t.Fatalf("%s backoff %d after a master was seen, want 1", nd.Name, nd.M.Backoff())
		}
	}
}

func TestPartitionHeal(t *testing.T) {
	n, c := stable(t, 4, 6, nil)
	n.Partition([]int{0, 1, 2}, []int{3, 4, 5})
	settle(t, n, c)
	if got := len(n.Masters()); got != 2 {
		t.Fatalf("%d masters during the partition, want one per side\n%s", got, joinLines(n.Status()))
	}
	n.Heal()
	healed := n.S.Now()
	if !n.RunUntil(c.Merge, func() bool { return len(n.Masters()) == 1 }) {
		t.Fatalf("two masters %v after the heal\n%s", c.Merge, joinLines(n.Status()))
	}
	t.Logf("one master %v after the heal", n.S.Now().Sub(healed))
	settle(t, n, c)
}

// The paper's §5.3: a new daemon sees two MASTERACKs → CONFLICT → RESOLVE
// → QUIT → MASTERUP.
func TestConflictSequence(t *testing.T) {
	n, c := newNet(t, 5, 5, nil)
	n.Partition([]int{0, 1}, []int{2, 3})
	for _, i := range []int{0, 2} {
		n.Start(n.Nodes[i])
	}
	n.Run(time.Second)
	for _, i := range []int{1, 3} {
		n.Start(n.Nodes[i])
	}
	settle(t, n, c)
	n.Heal()
	var seq []string
	n.OnAction = func(nd *Node, a election.Action) {
		if s, ok := a.(election.Send); ok {
			switch s.Packet.Type {
			case tsp.MasterAck, tsp.Conflict, tsp.Resolve, tsp.Quit, tsp.MasterUp:
				if len(seq) == 0 || seq[len(seq)-1] != nd.Name+":"+s.Packet.Type.String() {
					seq = append(seq, nd.Name+":"+s.Packet.Type.String())
				}
			}
		}
	}
	n.Start(n.Nodes[4])
	n.Run(3 * time.Second)
	n.OnAction = nil
	got := strings.Join(seq, " ")
	// Both masters answer; n5 tells the first; it RESOLVEs, the other
	// answers MASTERACK, gets QUIT; the survivor broadcasts MASTERUP.
	want := []string{"n5:CONFLICT", ":RESOLVE", ":MASTERACK", ":QUIT", ":MASTERUP"}
	rest := got
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("sequence %q lacks %q in order", got, w)
		}
		rest = rest[i+len(w):]
	}
	settle(t, n, c)
}

func runFaulty(t *testing.T, seed uint64, link Link, count int) {
	t.Helper()
	n, c := stable(t, seed, count, nil)
	n.SetLink(link)
	// Faults for a while: the master crashes in the middle.
	n.Run(20 * time.Second)
	old := master(t, n)
	n.Crash(old)
	n.Run(60 * time.Second)
	n.Start(old)
	n.Run(20 * time.Second)
	checkOK(t, c)
	// Then the faults stop (duplication and reordering are not faults:
	// they stay).
	link.Loss = 0
	n.SetLink(link)
	settle(t, n, c)
}

func TestLoss20(t *testing.T) {
	runFaulty(t, 6, Link{MinLatency: time.Millisecond, MaxLatency: 5 * time.Millisecond, Loss: 0.2}, 6)
}

func TestDuplication(t *testing.T) {
	runFaulty(t, 7, Link{MinLatency: time.Millisecond, MaxLatency: 5 * time.Millisecond, Dup: 0.5}, 6)
}

func TestReordering(t *testing.T) {
	runFaulty(t, 8, Link{MinLatency: time.Millisecond, MaxLatency: 5 * time.Millisecond, Reorder: 0.3, ReorderDelay: 15 * time.Millisecond}, 6)
}

// The master crashes while an election is under way (the candidate QUIT
// by it falls back to Slave; the next election finds no master).
func TestMasterCrashDuringElection(t *testing.T) {
	n, c := stable(t, 9, 5, nil)
	m := master(t, n)
	var cand *Node
	for _, nd := range n.Nodes {
		if nd != m {
			cand = nd
			break
		}
	}
	n.Step(cand, election.ForceElection{})
	n.Crash(m)
	settle(t, n, c)
}

// A candidate crashes after its ELECTION: the slaves that accepted it stay
// in Accept until the window ends, and a later election succeeds.
func TestCandidateCrash(t *testing.T) {
	n, c := stable(t, 10, 5, nil)
	m := master(t, n)
	n.Crash(m)
	var cand *Node
	for _, nd := range n.Nodes {
		if nd.Up {
			cand = nd
			break
		}
	}
	n.Step(cand, election.ForceElection{})
	n.Run(5 * time.Millisecond)
	accepting := 0
	for _, nd := range n.Nodes {
		if nd.Up && nd.M.State() == election.Accept {
			accepting++
		}
	}
	if accepting == 0 {
		t.Fatal("no slave accepted the candidate")
	}
	n.Crash(cand)
	settle(t, n, c)
	if master(t, n) == cand {
		t.Fatal("crashed candidate is master")
	}
}

// Slaves that stop answering are dropped from the master's list after
// LostHost failed rounds.
func TestLostHostDropped(t *testing.T) {
	n, c := stable(t, 11, 4, nil)
	m := master(t, n)
	var victim *Node
	for _, nd := range n.Nodes {
		if nd != m {
			victim = nd
			break
		}
	}
	n.Crash(victim)
	cfg := fast("x")
	// Three rounds, each failing after the full retransmit schedule.
	n.Run(time.Duration(cfg.LostHost)*cfg.SyncInterval + cfg.RetransmitSpan() + 100*time.Millisecond)
	if m.M.IsSlave(victim.Name) {
		t.Fatalf("%s still listed after %d failed rounds", victim.Name, cfg.LostHost)
	}
	checkOK(t, c)
}

// Two slaves whose election timers really expire together (not forced):
// the election range R is made 10 ms against a 5 ms link, so a collision
// is likely, and the first seed that produces one is used (the scan is
// deterministic). Both withdraw with the range doubled; the backoff (cap
// 64) spreads them out until one master results.
func TestTimersExpireTogether(t *testing.T) {
	mk := func(name string) election.Config {
		c := election.FastConfig(name)
		c.ElectionMax = c.ElectionMin + 10*time.Millisecond
		c.BackoffCap = 64
		return c
	}
	for seed := uint64(1); seed <= 50; seed++ {
		n := New(seed)
		n.AddN(3, mk)
		n.SetLink(Link{MinLatency: 5 * time.Millisecond, MaxLatency: 5 * time.Millisecond})
		c := Check(n, mk("x"))
		n.Start(n.Nodes[0])
		n.Run(time.Second)
		n.Start(n.Nodes[1])
		n.Start(n.Nodes[2])
		n.Run(2 * mk("x").SyncInterval)
		if !n.Settled() {
			t.Fatalf("seed %d: not settled\n%s", seed, joinLines(n.Status()))
		}
		n.Crash(master(t, n))
		var cands []*Node
		n.OnAction = func(nd *Node, a election.Action) {
			if sc, ok := a.(election.StateChange); ok && sc.To == election.Candidate && sc.Reason == "election timer expired" {
				cands = append(cands, nd)
			}
		}
		n.RunUntil(time.Minute, func() bool { return len(cands) > 0 })
		n.Run(5 * time.Millisecond) // within δ: the other timer may expire too
		if len(cands) < 2 {
			continue
		}
		n.OnAction = nil
		n.Run(50 * time.Millisecond)
		for _, nd := range cands {
			if st := nd.M.State(); st != election.Slave || nd.M.Backoff() != 2 {
				t.Fatalf("seed %d: %s is %v with backoff %d, want slave with 2", seed, nd.Name, st, nd.M.Backoff())
			}
		}
		settle(t, n, c)
		t.Logf("seed %d: %s and %s collided; %s is master", seed, cands[0].Name, cands[1].Name, master(t, n).Name)
		return
	}
	t.Fatal("no seed in 1..50 gave a collision")
}

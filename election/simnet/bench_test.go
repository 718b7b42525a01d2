package simnet

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp"
)

// benchNet builds a settled network of count nodes without a checker (the
// invariants cost O(N) per step): n1 becomes master alone, the others join.
func benchNet(b *testing.B, seed uint64, count int, mk func(string) election.Config) *Net {
	b.Helper()
	n := New(seed)
	n.AddN(count, mk)
	n.Start(n.Nodes[0])
	cfg := n.Nodes[0].Cfg
	n.Run(cfg.RetransmitSpan() + cfg.NoMasterWait + time.Second) // n1 is master
	for _, nd := range n.Nodes[1:] {
		n.Start(nd)
	}
	restore(b, n)
	return n
}

// restore restarts crashed nodes, waits until the network is settled and
// lets one more sync round pass so every slave's election timer is fresh.
func restore(b *testing.B, n *Net) {
	b.Helper()
	for _, nd := range n.Nodes {
		n.Start(nd)
	}
	cfg := n.Nodes[0].Cfg
	deadline := n.S.Now().Add(cfg.ConvergenceBound(n.MaxDelay(), FailedElections))
	for !n.Settled() {
		if n.S.Now().After(deadline) {
			b.Fatalf("network of %d did not settle", len(n.Nodes))
		}
		n.Run(100 * time.Millisecond)
	}
	n.Run(cfg.SyncInterval + cfg.FirstSync)
}

// allFollow reports whether every up node but m follows m (Slave or
// Accept, with m as master).
func allFollow(n *Net, m *Node) bool {
	for _, nd := range n.Nodes {
		if !nd.Up || nd == m {
			continue
		}
		st := nd.M.State()
		mp, ok := nd.M.Master()
		if (st != election.Slave && st != election.Accept) || !ok || mp.Name != m.Name {
			return false
		}
	}
	return true
}

type electionFigures struct {
	n               int
	elections       int
	sent, received  int
	virtual, cpu    time.Duration
	failedElections int // candidacies that ended without a master
	candidacies     int
}

var crashTable []electionFigures

// BenchmarkElectionAfterCrash: the master of N daemons (BSD's timers,
// DefaultConfig; links of 1–5 ms) crashes. Measured per election:
// datagrams sent and received from the crash to the new master's first
// sync round (the election proper, to compare with 3N'−1 for the N' = N−1
// daemons left), the virtual time from the first election-timer expiry
// until every daemon follows the new master (sampled every millisecond),
// and the real CPU time the simulation of one election took (ns/op;
// restarting the old master and settling again is not timed).
func BenchmarkElectionAfterCrash(b *testing.B) {
	crashTable = nil
	for _, count := range []int{10, 100, 1000} {
		b.Run(fmt.Sprint("N=", count), func(b *testing.B) {
			n := benchNet(b, 77, count, election.DefaultConfig)
			f := electionFigures{n: count}
			var firstExpiry time.Time
			var atRound *Stats
			counting := false
			n.OnAction = func(nd *Node, a election.Action) {
				if !counting {
					return
				}
				switch a := a.(type) {
				case election.StateChange:
					if a.To == election.Candidate {
						f.candidacies++
						if firstExpiry.IsZero() {
							firstExpiry = n.S.Now()
						}
					}
				case election.Send:
					if a.Packet.Type == tsp.Loop && atRound == nil {
						s := cloneStats(n.Stats)
						atRound = &s
					}
				}
			}
			for b.Loop() {
				ms := n.Masters()
				if len(ms) != 1 {
					b.Fatalf("%d masters", len(ms))
				}
				before := cloneStats(n.Stats)
				firstExpiry, atRound, counting = time.Time{}, nil, true
				n.Crash(ms[0])
				n.RunUntil(time.Hour, func() bool { return !firstExpiry.IsZero() })
				for {
					if ms := n.Masters(); len(ms) == 1 && allFollow(n, ms[0]) {
						break
					}
					n.Run(time.Millisecond)
				}
				f.virtual += n.S.Now().Sub(firstExpiry)
				n.RunUntil(time.Hour, func() bool { return atRound != nil })
				counting = false
				f.sent += atRound.Total() - before.Total()
				f.received += atRound.TotalDelivered() - before.TotalDelivered()
				f.elections++
				b.StopTimer()
				restore(b, n)
				b.StartTimer()
			}
			f.cpu = b.Elapsed()
			f.failedElections = f.candidacies - f.elections
			b.ReportMetric(float64(f.sent)/float64(f.elections), "sent/election")
			b.ReportMetric(float64(f.received)/float64(f.elections), "recv/election")
			b.ReportMetric((f.virtual / time.Duration(f.elections)).Seconds(), "vsec/election")
			crashTable = append(crashTable, f)
		})
	}
	var t strings.Builder
	fmt.Fprintf(&t, "\nelection after a master crash (BSD timers: R = 540 s, candidate wait 3 s, answer delay ≤ 100 ms; links 1–5 ms)\n")
	fmt.Fprintf(&t, "%6s %9s %10s %10s %8s %18s %14s %13s\n", "N", "elections", "sent", "received", "3N'−1", "first expiry→all", "CPU/election", "failed cand.")
	for _, f := range crashTable {
		e := float64(f.elections)
		fmt.Fprintf(&t, "%6d %9d %10.1f %10.1f %8d %18v %14v %13d\n", f.n, f.elections,
			float64(f.sent)/e, float64(f.received)/e, 3*(f.n-1)-1,
			(f.virtual / time.Duration(f.elections)).Round(time.Millisecond),
			(f.cpu / time.Duration(f.elections)).Round(time.Microsecond), f.failedElections)
	}
	fmt.Fprintf(&t, "(N' = N−1 daemons are left after the crash; sent counts a broadcast once; a failed\n")
	fmt.Fprintf(&t, " candidacy (collision) adds its ELECTION, REFUSEs and ACKs to the election's count)\n")
	fmt.Print(t.String())
}

// BenchmarkCollisionRate measures how often an election attempt has two
// candidates at once, against the appendix's 1−(1−δ/R)^N. The slaves'
// timers are drawn from [r, r+R] at the same instant (the master's last
// ADJTIME, sent to all at once over links of a fixed latency δ), and a
// slave stops its timer when the first ELECTION reaches it δ later: a
// collision is a second expiry within δ of the first, the appendix's event.
// R = 1 s and δ = 10 ms make collisions frequent enough to count.
func BenchmarkCollisionRate(b *testing.B) {
	const (
		delta  = 10 * time.Millisecond
		width  = time.Second
		trials = 400
	)
	mk := func(name string) election.Config {
		c := election.FastConfig(name)
		c.ElectionMax = c.ElectionMin + width
		c.AnswerDelay = 0
		return c
	}
	type row struct {
		n, trials, collisions int
	}
	var rows []row
	for _, slaves := range []int{2, 5, 10, 20} {
		b.Run(fmt.Sprint("N=", slaves), func(b *testing.B) {
			n := New(99)
			n.AddN(slaves+1, mk)
			n.SetLink(Link{MinLatency: delta, MaxLatency: delta})
			n.Start(n.Nodes[0])
			n.Run(time.Second)
			for _, nd := range n.Nodes[1:] {
				n.Start(nd)
			}
			restore(b, n)
			r := row{n: slaves}
			collided := false
			n.OnAction = func(nd *Node, a election.Action) {
				if sc, ok := a.(election.StateChange); ok && sc.To == election.Candidate {
					for _, o := range n.Nodes {
						if o != nd && o.Up && o.M.State() == election.Candidate {
							collided = true
						}
					}
				}
			}
			for b.Loop() {
				for range trials {
					collided = false
					n.Crash(n.Masters()[0])
					n.RunUntil(time.Hour, func() bool { return len(n.Masters()) == 1 })
					if collided {
						r.collisions++
					}
					r.trials++
					restore(b, n)
				}
			}
			rows = append(rows, r)
			b.ReportMetric(float64(r.collisions)/float64(r.trials), "collisions/election")
		})
	}
	var t strings.Builder
	fmt.Fprintf(&t, "\ncollision rate of simultaneous candidates, δ = %v, R = %v\n", delta, width)
	fmt.Fprintf(&t, "%4s %7s %10s %9s %12s %8s\n", "N", "trials", "observed", "±95%", "1−(1−δ/R)^N", "Nδ/R")
	for _, r := range rows {
		p := float64(r.collisions) / float64(r.trials)
		ci := 1.96 * math.Sqrt(p*(1-p)/float64(r.trials))
		x := float64(delta) / float64(width)
		fmt.Fprintf(&t, "%4d %7d %10.4f %9.4f %12.4f %8.4f\n", r.n, r.trials, p, ci, 1-math.Pow(1-x, float64(r.n)), float64(r.n)*x)
	}
	fmt.Print(t.String())
}

// coldFigures are the simultaneous starts of one network size under one
// timer profile.
type coldFigures struct {
	one         []time.Duration // start → one master that every node follows
	extra, sent int             // masters beyond the first; datagrams until settled
}

func (f *coldFigures) mean() time.Duration {
	var s time.Duration
	for _, d := range f.one {
		s += d
	}
	return s / time.Duration(max(1, len(f.one)))
}

func (f *coldFigures) p95() time.Duration {
	s := slices.Clone(f.one)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[(len(s)*95+99)/100-1]
}

func (f *coldFigures) perStart(x int) float64 { return float64(x) / float64(max(1, len(f.one))) }

// simultaneousStart starts count nodes of profile mk in one tick (links
// 1–5 ms, no loss) and adds to f the virtual time until one master exists
// and every node follows it, and the datagrams sent until the network is
// settled (the master lists every node, its SLAVEUP in).
func simultaneousStart(b *testing.B, seed uint64, count int, mk func(string) election.Config, f *coldFigures) {
	n := New(seed)
	n.AddN(count, mk)
	masters, became := 0, 0 // masters now; daemons that became master
	n.OnAction = func(nd *Node, a election.Action) {
		if sc, ok := a.(election.StateChange); ok && sc.To.IsMaster() != sc.From.IsMaster() {
			if sc.To.IsMaster() {
				masters++
				became++
			} else {
				masters--
			}
		}
	}
	for _, nd := range n.Nodes {
		n.Start(nd)
	}
	limit := 2 * mk("x").ConvergenceBound(n.MaxDelay(), FailedElections)
	// allFollow only once there is one master: it is O(N) per event.
	if !n.RunUntil(limit, func() bool { return masters == 1 && allFollow(n, n.Masters()[0]) }) {
		b.Fatalf("N=%d seed %d: no single master after %v", count, seed, limit)
	}
	f.one = append(f.one, n.Elapsed())
	f.extra += became - 1
	if !n.RunUntil(limit, n.Settled) {
		b.Fatalf("N=%d seed %d: not settled after %v", count, seed, limit)
	}
	f.sent += n.Stats.Total()
}

// BenchmarkSimultaneousStart: N daemons start in the same tick (a power
// cut, a compose up) on links of 1–5 ms. Measured in virtual time: from
// the start until one master exists and every daemon follows it, with the
// cold start (DefaultConfig: BSD's timers, ColdStartDelay 100 ms a node)
// and without it (ColdStartDelay 0: BSD's behaviour, every daemon leaves
// start-up a slave and waits for its election timer), under BSD's timers
// and the fast profile (ColdStartDelay 50 ms). The anchor is BSD's own
// figure, worked out: its 6.2 s probe, then the first of N election
// timers drawn from 360–900 s, then the 3 s candidate wait. ns/op is the
// CPU time of simulating one start of each of the four kinds.
func BenchmarkSimultaneousStart(b *testing.B) {
	off := func(mk func(string) election.Config) func(string) election.Config {
		return func(name string) election.Config {
			c := mk(name)
			c.ColdStartDelay = 0
			return c
		}
	}
	type row struct {
		n                     int
		ours, bsd, fast, foff coldFigures
	}
	var rows []row
	for _, count := range []int{5, 10, 20, 50, 100, 200} {
		b.Run(fmt.Sprint("N=", count), func(b *testing.B) {
			r := row{n: count}
			seed := uint64(0)
			for b.Loop() {
				seed++
				simultaneousStart(b, seed, count, election.DefaultConfig, &r.ours)
				simultaneousStart(b, seed, count, off(election.DefaultConfig), &r.bsd)
				simultaneousStart(b, seed, count, election.FastConfig, &r.fast)
				simultaneousStart(b, seed, count, off(election.FastConfig), &r.foff)
			}
			b.ReportMetric(r.ours.mean().Seconds(), "vsec/start")
			b.ReportMetric(r.ours.p95().Seconds(), "p95-vsec/start")
			b.ReportMetric(r.ours.perStart(r.ours.extra), "extra-masters/start")
			b.ReportMetric(r.ours.perStart(r.ours.sent), "sent/start")
			b.ReportMetric(r.bsd.mean().Seconds(), "bsd-vsec/start")
			b.ReportMetric(r.fast.mean().Seconds(), "fast-vsec/start")
			b.ReportMetric(r.foff.mean().Seconds(), "fast-off-vsec/start")
			rows = append(rows, r)
		})
	}
	d := election.DefaultConfig("x")
	ms := func(x time.Duration) string { return x.Round(time.Millisecond).String() }
	var t strings.Builder
	fmt.Fprintf(&t, "\none master after a simultaneous start: virtual time from the start until one master that every daemon follows (links 1–5 ms, no loss)\n")
	fmt.Fprintf(&t, "%4s %6s | %-44s | %-30s | %-20s\n", "", "", "BSD timers, cold start (100 ms a node)", "BSD timers, BSD rule", "fast profile")
	fmt.Fprintf(&t, "%4s %6s | %8s %8s %8s %8s %8s | %9s %8s %11s | %8s %11s\n", "N", "starts",
		"mean", "p95", "max", "masters", "sent", "simulated", "sent", "BSD anchor", "cold", "cold off")
	for _, r := range rows {
		// BSD: the probe fails after RetransmitSpan, then the first of N
		// uniform election timers (mean r + R/(N+1)), then the candidate wait.
		anchor := d.RetransmitSpan() + d.ElectionMin + (d.ElectionMax-d.ElectionMin)/time.Duration(r.n+1) + d.CandidateWait
		fmt.Fprintf(&t, "%4d %6d | %8s %8s %8s %8.2f %8.0f | %9v %8.0f %11v | %8s %11v\n", r.n, len(r.ours.one),
			ms(r.ours.mean()), ms(r.ours.p95()), ms(slices.Max(r.ours.one)),
			1+r.ours.perStart(r.ours.extra), r.ours.perStart(r.ours.sent),
			r.bsd.mean().Round(time.Second), r.bsd.perStart(r.bsd.sent), anchor.Round(time.Second),
			ms(r.fast.mean()), r.foff.mean().Round(10*time.Millisecond))
	}
	fmt.Fprintf(&t, "(masters: daemons that became master per start, 1 = no collision, extra ones merge at once. sent: datagrams\n")
	fmt.Fprintf(&t, " until the master lists every daemon: 2N MASTERREQ copies + MASTERUP + N−1 SLAVEUPs = 3N with the cold\n")
	fmt.Fprintf(&t, " start; without it 5N MASTERREQ copies + ELECTION + N−1 ACCEPTs + N−1 ACKs + MASTERUP = 7N, the SLAVEUPs\n")
	fmt.Fprintf(&t, " after. Goal: one master within 1 s for N ≤ 50 with BSD's timers.)\n")
	fmt.Print(t.String())
}

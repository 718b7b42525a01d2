package election

import (
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

// Issue 20, N = 150 under load: slaves that follow a master which no
// longer corrects them (it quit, or its MASTERUP reached them after it
// had quit) are orphans. These tests pin how they find the live master
// without an election.

// stale brings a slave of "m" (addr(9)) to follow "x" (addr(7)) through
// x's MASTERUP, after hearing "m" act as master (its LOOP): x's MASTERUP
// was the late one, m is the live master.
func staleSlave(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, FastConfig("a"))
	h.toSlave()
	h.step(Recv{Packet: tsp.Packet{Type: tsp.Loop, Version: 1, Seq: 1, Name: "m", HopCount: LoopHops}, From: addr(9)})
	h.recv(tsp.MasterUp, 2, "x", addr(7))
	if mp, _ := h.m.Master(); mp.Addr != addr(7) {
		t.Fatalf("following %v, want x at %v", mp, addr(7))
	}
	h.fireSends() // the SLAVEUPs to m and to x
	return h
}

// TestAdoptedByLiveMaster: a correction from a known master other than
// the one followed is refused while the followed one has been heard
// within a sync interval, and taken (acknowledged, applied, its sender
// followed) once the followed one has been silent longer than that.
func TestAdoptedByLiveMaster(t *testing.T) {
	h := staleSlave(t)
	adj := func(seq uint16) []Action {
		return h.step(Recv{Packet: tsp.Packet{Type: tsp.AdjTime, Version: 1, Seq: seq, Name: "m", Time: tsp.Timeval{Usec: 700}}, From: addr(9)})
	}
	h.now = h.now.Add(h.m.Config().SyncInterval / 2)
	acts := adj(10)
	if appliesClock(acts) || len(sends(acts)) != 0 {
		t.Fatalf("followed master heard %v ago: correction from another taken: %v", h.m.Config().SyncInterval/2, acts)
	}
	if got := refusedReasons(acts); len(got) != 1 || got[0] != RefusedNotFollowed {
		t.Fatalf("refused %v", got)
	}
	h.now = h.now.Add(h.m.Config().SyncInterval)
	acts = adj(11)
	if !appliesClock(acts) || sendTypes(acts) != "ACK>10.0.0.9:525" {
		t.Fatalf("followed master silent for a round: live master's ADJTIME not taken: %v", acts)
	}
	if mp, _ := h.m.Master(); mp.Addr != addr(9) || h.m.State() != Slave {
		t.Fatalf("now %v following %v, want slave of m", h.m.State(), mp)
	}
}

// TestAdoptionNeedsKnownMaster: a correction from an address never heard
// acting as a master is refused however long the followed master has
// been silent (TestForgedCorrectionRefused's forger stays refused).
func TestAdoptionNeedsKnownMaster(t *testing.T) {
	h := newHarness(t, FastConfig("a"))
	h.toSlave()
	h.now = h.now.Add(3 * h.m.Config().SyncInterval)
	acts := h.step(Recv{Packet: tsp.Packet{Type: tsp.SetTime, Version: 1, Seq: 5, Name: "m", Time: tsp.Timeval{Sec: 4995}}, From: addr(6)})
	if appliesClock(acts) || len(sends(acts)) != 0 {
		t.Fatalf("correction from an unknown address taken: %v", acts)
	}
}

// TestSlaveFollowsLiveLoop: a slave whose master has been silent a
// whole round follows the master whose own LOOP it hears (SLAVEUP to
// it), and does not while its master is heard; a LOOP passed on by a
// gateway (hop count below LoopHops) never moves it.
func TestSlaveFollowsLiveLoop(t *testing.T) {
	h := staleSlave(t)
	loop := func(seq uint16, hops uint8) []Action {
		return h.step(Recv{Packet: tsp.Packet{Type: tsp.Loop, Version: 1, Seq: seq, Name: "m", HopCount: hops}, From: addr(9)})
	}
	h.now = h.now.Add(h.m.Config().SyncInterval / 2)
	loop(20, LoopHops)
	if mp, _ := h.m.Master(); mp.Addr != addr(7) {
		t.Fatalf("followed master heard recently, yet now following %v", mp)
	}
	h.now = h.now.Add(h.m.Config().SyncInterval)
	loop(21, LoopHops-1)
	if mp, _ := h.m.Master(); mp.Addr != addr(7) {
		t.Fatalf("a passed-on LOOP moved the slave to %v", mp)
	}
	loop(22, LoopHops)
	if mp, _ := h.m.Master(); mp.Addr != addr(9) || h.m.State() != Slave {
		t.Fatalf("followed master silent a round: %v following %v, want slave of m", h.m.State(), mp)
	}
	var as []Action
	for _, s := range h.fireSends() {
		as = append(as, s)
	}
	if got := sendTypes(as); got != "SLAVEUP>10.0.0.9:525" {
		t.Fatalf("sent %q, want one SLAVEUP to m", got)
	}
}

// TestUnlistedCandidateCollectsOrphans: a master that gets an ELECTION
// from a trusted slave it did not list QUITs it and broadcasts MASTERUP,
// which takes the candidate's fellow orphans on at once; at most once an
// ElectionMin, and never for a candidate it lists.
func TestUnlistedCandidateCollectsOrphans(t *testing.T) {
	h := newHarness(t, FastConfig("a"))
	h.toMaster()
	h.recv(tsp.SlaveUp, 1, "s1", addr(11))
	h.now = h.now.Add(h.m.Config().ElectionMin)
	masterUps := func(acts []Action) (n int) {
		for _, s := range sends(acts) {
			if s.Packet.Type == tsp.MasterUp && s.Broadcast {
				n++
			}
		}
		return n
	}
	if n := masterUps(h.recv(tsp.Election, 2, "s1", addr(11))); n != 0 {
		t.Fatalf("listed candidate: %d MASTERUPs", n)
	}
	acts := h.recv(tsp.Election, 3, "o1", addr(12))
	if n := masterUps(acts); n != 1 || !h.m.IsSlave("o1") {
		t.Fatalf("unlisted candidate: %d MASTERUPs, listed %v: %v", n, h.m.IsSlave("o1"), acts)
	}
	h.now = h.now.Add(h.m.Config().ElectionMin - time.Millisecond)
	if n := masterUps(h.recv(tsp.Election, 4, "o2", addr(13))); n != 0 {
		t.Fatalf("second unlisted candidate within ElectionMin: %d MASTERUPs", n)
	}
}

// TestUnackedRivalQuitStillCollects: a master that QUITs a rival
// broadcasts MASTERUP when the rival acknowledges, and also when the
// QUIT's retransmissions run out unacknowledged (the rival may have quit
// already, its ACKs lost): its slaves must not be left to their
// election timers.
func TestUnackedRivalQuitStillCollects(t *testing.T) {
	h := newHarness(t, FastConfig("a"))
	h.toMaster()
	// A LOOP from a rival master with a higher name: we QUIT it.
	acts := h.step(Recv{Packet: tsp.Packet{Type: tsp.Loop, Version: 1, Seq: 9, Name: "z", HopCount: LoopHops}, From: addr(8)})
	if got := sendTypes(acts); got != "QUIT>10.0.0.8:525" {
		t.Fatalf("rival's LOOP: sent %q, want a QUIT", got)
	}
	var ups int
	for _, s := range h.fireSends() {
		if s.Packet.Type == tsp.MasterUp && s.Broadcast {
			ups++
		}
	}
	if ups != 1 {
		t.Fatalf("QUIT unacknowledged to the end: %d MASTERUPs, want 1", ups)
	}
}

// TestSlaveFollowsTwoLoops: with adaptive rounds far shorter than
// SyncInterval, a slave whose master is silent follows another master
// after two of that master's own LOOPs in a row, before SyncInterval.
func TestSlaveFollowsTwoLoops(t *testing.T) {
	h := staleSlave(t)
	loop := func(seq uint16, name string, from int) {
		h.step(Recv{Packet: tsp.Packet{Type: tsp.Loop, Version: 1, Seq: seq, Name: name, HopCount: LoopHops}, From: addr(from)})
	}
	h.now = h.now.Add(time.Second)
	loop(30, "m", 9)
	loop(31, "k", 5) // another master between: the count starts again
	loop(32, "m", 9)
	if mp, _ := h.m.Master(); mp.Addr != addr(7) {
		t.Fatalf("LOOPs of two masters in turn moved the slave to %v", mp)
	}
	loop(33, "m", 9)
	if mp, _ := h.m.Master(); mp.Addr != addr(9) || h.m.Config().SyncInterval <= time.Second {
		t.Fatalf("two LOOPs in a row of m: following %v, want m", mp)
	}
}

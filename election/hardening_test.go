package election

import (
	"fmt"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

// Issue 11's flood, on the machine alone: what an outsider's packets must
// not buy, found by tests/flood_test.go.

// TestForgedConflictChangesNothing: a CONFLICT naming no real master
// (nobody answers the RESOLVEs) leaves the master a master with its
// slaves, and without the MASTERUP that would make every slave announce
// itself again and be set anew at the next round.
func TestForgedConflictChangesNothing(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toMaster()
	h.recv(tsp.SlaveUp, 1, "s", addr(2))
	h.recv(tsp.Conflict, 2, "forger", addr(66))
	if h.m.State() != Conflict {
		t.Fatalf("state %v after CONFLICT, want conflict (it looks for the other master)", h.m.State())
	}
	var sent []string
	for h.m.State() == Conflict {
		next := TimerID(0)
		for id := range h.timers {
			if id >= firstSendTimer && (next == 0 || h.timers[id].Before(h.timers[next])) {
				next = id
			}
		}
		if next == 0 {
			t.Fatal("still in conflict with no RESOLVE pending")
		}
		for _, s := range sends(h.fire(next)) {
			sent = append(sent, s.Packet.Type.String())
		}
	}
	if h.m.State() != Master || !h.m.IsSlaveAt("s", addr(2)) {
		t.Fatalf("state %v, slave s listed %v: want master, still listing s", h.m.State(), h.m.IsSlave("s"))
	}
	for _, s := range sent {
		if s == "MASTERUP" {
			t.Fatalf("sent %v: a MASTERUP after a conflict nobody answered", sent)
		}
	}
}

// TestSetTimeCopiesCarryTheirTime: each retransmitted copy of a SETTIME
// carries the first copy's time moved on by the delays since, so a slave
// whose first copies were lost is not stepped back by them.
func TestSetTimeCopiesCarryTheirTime(t *testing.T) {
	cfg := DefaultConfig("a")
	h := newHarness(t, cfg)
	h.toMaster()
	h.recv(tsp.SlaveUp, 1, "s", addr(2))
	var sr SyncRound
	for _, a := range h.fire(TimerSync) {
		if r, ok := a.(SyncRound); ok {
			sr = r
		}
	}
	var copies []tsp.Packet
	collect := func(as []Action) {
		for _, s := range sends(as) {
			if s.Packet.Type == tsp.SetTime && s.To == addr(2) {
				copies = append(copies, s.Packet)
			}
		}
	}
	collect(h.step(SyncResult{Round: sr.Round, Corrections: []Correction{{Name: "s"}}}))
	for id := range h.timers {
		if id >= firstSendTimer {
			for range cfg.Retransmit {
				if _, ok := h.timers[id]; ok {
					collect(h.fire(id))
				}
			}
		}
	}
	if len(copies) != len(cfg.Retransmit) {
		t.Fatalf("%d copies of SETTIME, want %d", len(copies), len(cfg.Retransmit))
	}
	first, waited := copies[0].Time.Time(), time.Duration(0)
	for i, p := range copies {
		if p.Seq != copies[0].Seq {
			t.Fatalf("copy %d has seq %d, the first %d: a slave would take both", i, p.Seq, copies[0].Seq)
		}
		if got := p.Time.Time().Sub(first); got != waited {
			t.Errorf("copy %d carries the first's time %+v, want %+v", i, got, waited)
		}
		waited += cfg.Retransmit[i]
	}
}

// TestSlaveListOncePerStep: a round that drops a thousand silent slaves
// sends the slave list once, not once per slave dropped.
func TestSlaveListOncePerStep(t *testing.T) {
	cfg := DefaultConfig("a")
	h := newHarness(t, cfg)
	h.toMaster()
	for i := range 1000 {
		h.recv(tsp.SlaveUp, uint16(i), fmt.Sprintf("x%d", i), addr(100+i))
	}
	for round := range cfg.LostHost {
		var sr SyncRound
		for _, a := range h.fire(TimerSync) {
			if r, ok := a.(SyncRound); ok {
				sr = r
			}
		}
		lists := 0
		var last SlaveList
		for _, a := range h.step(SyncResult{Round: sr.Round}) {
			if l, ok := a.(SlaveList); ok {
				lists++
				last = l
			}
		}
		if round < cfg.LostHost-1 && lists != 0 || round == cfg.LostHost-1 && (lists != 1 || len(last.Slaves) != 0) {
			t.Fatalf("round %d: %d slave lists, the last of %d slaves", round+1, lists, len(last.Slaves))
		}
	}
}

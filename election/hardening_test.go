package election

import (
	"testing"

	"github.com/timed-project/timed/tsp"
)

// Issue 11's flood, on the machine alone: what an outsider's packets must
// not buy, found by tests/flood_test.go.

// TestForgedConflictChangesNothing: a CONFLICT naming no real master
// (nobody answers the RESOLVEs) leaves the master a master with its
// slaves, and without the MASTERUP that would make every slave announce
// itself again and be stepped with SETTIME at the next round.
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

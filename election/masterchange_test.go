package election

import (
	"slices"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

// toNewMaster brings a slave of "m" to Master by an election in which
// "s" at addr(2) accepted: the master change of a network whose master
// died. It returns the MASTERUP's time.
func (h *harness) toNewMaster() time.Time {
	h.t.Helper()
	h.toSlave()
	el := sends(h.step(ForceElection{}))
	if len(el) != 1 || el[0].Packet.Type != tsp.Election {
		h.t.Fatalf("sent %v, want ELECTION", el)
	}
	h.now = h.now.Add(10 * time.Millisecond)
	h.recv(tsp.Accept, 7, "s", addr(2))
	h.fire(TimerCandidate)
	if h.m.State() != Master || !h.m.IsSlave("s") {
		h.t.Fatalf("state %v, s listed %v: want master listing s", h.m.State(), h.m.IsSlave("s"))
	}
	return h.now
}

// sentTo is the types of the packets among acts sent to to.
func sentTo(acts []Action, to int) []tsp.Type {
	var out []tsp.Type
	for _, s := range sends(acts) {
		if s.To == addr(to) {
			out = append(out, s.Packet.Type)
		}
	}
	return out
}

// TestNearNewSlaveAdjusted: after a master change every slave is new to
// the new master (not set yet). One measured near the network time is
// sent the measured ADJTIME, not SETTIME (which carries no transit-delay
// correction and would step it by that delay); one further off, or at or
// beyond the step threshold (Set), still gets SETTIME, and so does one
// not measured (ZeroResult), as BSD's need_set. The ACKed correction sets
// the slave.
func TestNearNewSlaveAdjusted(t *testing.T) {
	for _, c := range []struct {
		name string
		corr Correction
		want tsp.Type
	}{
		{"near", Correction{Name: "s", Delta: 300 * time.Microsecond, Near: true}, tsp.AdjTime},
		{"far off", Correction{Name: "s", Delta: 30 * time.Second, Set: true}, tsp.SetTime},
		{"not near", Correction{Name: "s", Delta: 500 * time.Millisecond}, tsp.SetTime},
		{"unmeasured", Correction{Name: "s"}, tsp.SetTime},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, DefaultConfig("a"))
			h.toNewMaster()
			h.recv(tsp.SlaveUp, 1, "s", addr(2)) // its answer to MASTERUP
			sr := syncRoundOf(t, h.fire(TimerSync))
			acts := h.step(SyncResult{Round: sr.Round, Corrections: []Correction{c.corr}})
			got := sentTo(acts, 2)
			if !slices.Equal(got, []tsp.Type{c.want}) {
				t.Fatalf("sent %v to the slave, want %v", got, c.want)
			}
			if c.want == tsp.AdjTime {
				adj := sends(acts)[0].Packet
				if adj.Time.Duration() != c.corr.Delta {
					t.Fatalf("ADJTIME carries %v, want %v", adj.Time.Duration(), c.corr.Delta)
				}
			}
			h.recv(tsp.Ack, sends(acts)[0].Packet.Seq, "s", addr(2))
			if h.m.slaves["s"].needSet {
				t.Fatal("the acknowledged correction left the slave still to be set")
			}
			// The next round, unmeasured, is an ADJTIME: the slave is set.
			sr = syncRoundOf(t, h.fire(TimerSync))
			if got := sentTo(h.step(ZeroResult(sr)), 2); !slices.Equal(got, []tsp.Type{tsp.AdjTime}) {
				t.Fatalf("next round sent %v, want ADJTIME", got)
			}
		})
	}
}

// TestLateSlaveUpOfAccepter: a slave that accepted the candidacy answers
// the new master's MASTERUP after the settime guard (a loaded host, a
// slow VM). It is not stepped by a SETTIME at once: an early round,
// within FirstSync (or JoinSync), measures it. A daemon the master never
// listed before its MASTERUP is new and is still set at once, as by BSD's
// newslave, and so is a slave set since that announces itself anew (it
// restarted).
func TestLateSlaveUpOfAccepter(t *testing.T) {
	for _, join := range []time.Duration{0, time.Second} {
		cfg := DefaultConfig("a")
		cfg.JoinSync = join
		h := newHarness(t, cfg)
		up := h.toNewMaster()
		// The first round measured nobody: it answered nothing yet.
		sr := syncRoundOf(t, h.fire(TimerSync))
		h.step(SyncResult{Round: sr.Round})
		h.now = up.Add(cfg.SyncInterval / 2)
		acts := h.recv(tsp.SlaveUp, 1, "s", addr(2))
		if got := sentTo(acts, 2); len(got) != 0 {
			t.Fatalf("JoinSync %v: late SLAVEUP of an accepter answered with %v, want nothing", join, got)
		}
		want := cfg.FirstSync
		if join > 0 {
			want = join
		}
		if got := h.timers[TimerSync].Sub(h.now); got != want {
			t.Fatalf("JoinSync %v: next round %v after the late SLAVEUP, want %v", join, got, want)
		}
		sr = syncRoundOf(t, h.fire(TimerSync))
		acts = h.step(SyncResult{Round: sr.Round, Corrections: []Correction{{Name: "s", Delta: -200 * time.Microsecond, Near: true}}})
		if got := sentTo(acts, 2); !slices.Equal(got, []tsp.Type{tsp.AdjTime}) {
			t.Fatalf("JoinSync %v: its round sent %v, want ADJTIME", join, got)
		}
		h.recv(tsp.Ack, sends(acts)[0].Packet.Seq, "s", addr(2)) // s is set now

		// A new daemon, after the guard: SETTIME at once (BSD).
		acts = h.recv(tsp.SlaveUp, 1, "new", addr(3))
		if got := sentTo(acts, 3); !slices.Equal(got, []tsp.Type{tsp.SetTime}) {
			t.Fatalf("JoinSync %v: new daemon's SLAVEUP answered with %v, want SETTIME", join, got)
		}
		// The accepter, set since, restarts: SETTIME at once (BSD), as
		// to any daemon that announces itself anew.
		acts = h.recv(tsp.SlaveUp, 2, "s", addr(2))
		if got := sentTo(acts, 2); !slices.Equal(got, []tsp.Type{tsp.SetTime}) {
			t.Fatalf("JoinSync %v: restarted slave's SLAVEUP answered with %v, want SETTIME", join, got)
		}
	}
}

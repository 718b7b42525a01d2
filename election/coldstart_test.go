package election

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

// coldCfg has a cold start long enough to outlast the probe when asked.
func coldCfg(delay time.Duration) Config {
	c := FastConfig("a")
	c.ColdStartDelay = delay
	return c
}

func lastState(as []Action) (StateChange, bool) {
	var sc StateChange
	ok := false
	for _, a := range as {
		if x, is := a.(StateChange); is {
			sc, ok = x, true
		}
	}
	return sc, ok
}

func TestColdStartBecomesMaster(t *testing.T) {
	cfg := coldCfg(50 * time.Millisecond)
	h := newHarness(t, cfg)
	h.step(Start{})
	if _, ok := h.timers[TimerColdStart]; ok {
		t.Fatal("cold start armed before any other daemon was seen")
	}
	h.recv(tsp.MasterReq, 7, "b", addr(2))
	h.recv(tsp.MasterReq, 8, "c", addr(3))
	h.recv(tsp.MasterReq, 9, "b", addr(2)) // a copy: b counts once
	if at := h.timers[TimerColdStart]; at.Sub(t0) != cfg.Retransmit[0] {
		t.Fatalf("first step of the cold start at %v, want Retransmit[0] = %v", at.Sub(t0), cfg.Retransmit[0])
	}
	h.fire(TimerColdStart)
	if h.m.State() != StartUp {
		t.Fatalf("state %v after the first step, want startup", h.m.State())
	}
	// Three daemons seen starting (b, c and this one): the draw is from
	// [0, 3·ColdStartDelay].
	if d := h.timers[TimerColdStart].Sub(h.now); d < 0 || d > 3*cfg.ColdStartDelay {
		t.Fatalf("drawn delay %v, want in [0, %v]", d, 3*cfg.ColdStartDelay)
	}
	acts := h.fire(TimerColdStart)
	if h.m.State() != Master || !strings.Contains(sendTypes(acts), "MASTERUP>*") {
		t.Fatalf("state %v, sends %s: want master with MASTERUP", h.m.State(), sendTypes(acts))
	}
	for id := range h.timers {
		if id >= firstSendTimer {
			t.Fatalf("a probe copy is still pending after the cold start: %v", id)
		}
	}
}

// A master that shows itself before the cold start fires is followed and
// the cold start cancelled, at either step.
func TestColdStartYieldsToMaster(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drawn bool
		via   tsp.Type
		want  State
	}{
		{"MASTERACK", false, tsp.MasterAck, Consistency},
		{"MASTERACK after the draw", true, tsp.MasterAck, Consistency},
		{"MASTERUP", false, tsp.MasterUp, Slave},
		{"MASTERUP after the draw", true, tsp.MasterUp, Slave},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, coldCfg(50*time.Millisecond))
			req := sends(h.step(Start{}))[0].Packet
			h.recv(tsp.MasterReq, 7, "b", addr(2))
			if tc.drawn {
				h.fire(TimerColdStart)
			}
			seq := req.Seq
			if tc.via == tsp.MasterUp {
				seq = 99
			}
			h.recv(tc.via, seq, "m", addr(9))
			if h.m.State() != tc.want {
				t.Fatalf("state %v, want %v", h.m.State(), tc.want)
			}
			if _, ok := h.timers[TimerColdStart]; ok {
				t.Fatal("cold start still armed with a master known")
			}
		})
	}
}

// With a delay longer than the probe the daemon leaves start-up a slave
// with no master and the cold start still makes it master; an ELECTION
// in between, accepted, cancels it.
func TestColdStartAfterProbe(t *testing.T) {
	for _, accept := range []bool{false, true} {
		t.Run(fmt.Sprint("accept=", accept), func(t *testing.T) {
			cfg := coldCfg(5 * time.Second)
			cfg.Retransmit = []time.Duration{time.Millisecond, time.Millisecond}
			h := newHarness(t, cfg)
			h.step(Start{})
			h.recv(tsp.MasterReq, 7, "b", addr(2))
			h.fire(TimerColdStart)
			h.fireSends()
			if h.m.State() != Slave {
				t.Fatalf("state %v after the probe, want slave", h.m.State())
			}
			if _, ok := h.timers[TimerColdStart]; !ok {
				t.Fatal("the failed probe cancelled the cold start")
			}
			if accept {
				h.recv(tsp.Election, 8, "b", addr(2))
				if _, ok := h.timers[TimerColdStart]; ok || h.m.State() != Accept {
					t.Fatalf("state %v, cold start armed %v: want accept, cancelled", h.m.State(), ok)
				}
				return
			}
			h.fire(TimerColdStart)
			if h.m.State() != Master {
				t.Fatalf("state %v, want master", h.m.State())
			}
		})
	}
}

// The rule is off with ColdStartDelay 0 (BSD) and for a host that may not
// be master.
func TestColdStartOff(t *testing.T) {
	ineligible := coldCfg(50 * time.Millisecond)
	ineligible.MayBeMaster = false
	for name, cfg := range map[string]Config{"delay 0": coldCfg(0), "not eligible": ineligible} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, cfg)
			h.step(Start{})
			h.recv(tsp.MasterReq, 7, "b", addr(2))
			h.recv(tsp.Election, 8, "c", addr(3))
			if _, ok := h.timers[TimerColdStart]; ok {
				t.Fatal("cold start armed")
			}
		})
	}
}

// MASTERREQs from ever new addresses neither grow the count beyond its
// bound nor stretch the draw beyond ElectionMin.
func TestColdStartBounded(t *testing.T) {
	cfg := coldCfg(50 * time.Millisecond)
	h := newHarness(t, cfg)
	h.step(Start{})
	for i := range 3 * maxStarting {
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 525)
		h.recv(tsp.MasterReq, uint16(i), fmt.Sprintf("x%d", i), from)
	}
	if len(h.m.starting) > maxStarting {
		t.Fatalf("%d addresses kept, bound %d", len(h.m.starting), maxStarting)
	}
	h.fire(TimerColdStart)
	if d := h.timers[TimerColdStart].Sub(h.now); d > cfg.ElectionMin {
		t.Fatalf("drawn delay %v beyond ElectionMin %v", d, cfg.ElectionMin)
	}
}

// In Consistency a MASTERUP is followed: the master that answered the
// probe may have quit to its sender.
func TestConsistencyFollowsMasterUp(t *testing.T) {
	h := newHarness(t, FastConfig("a"))
	req := sends(h.step(Start{}))[0].Packet
	h.recv(tsp.MasterAck, req.Seq, "m1", addr(8))
	if h.m.State() != Consistency {
		t.Fatalf("state %v, want consistency", h.m.State())
	}
	acts := h.recv(tsp.MasterUp, 5, "m2", addr(9))
	if mp, ok := h.m.Master(); h.m.State() != Slave || !ok || mp.Name != "m2" {
		t.Fatalf("state %v master %v: want slave of m2", h.m.State(), mp)
	}
	if sc, ok := lastState(acts); !ok || sc.From != Consistency {
		t.Fatalf("state change %v", sc)
	}
	if _, ok := h.timers[TimerConsistency]; ok {
		t.Fatal("consistency timer left running")
	}
}

func TestColdStartDelayRangeNamed(t *testing.T) {
	c := DefaultConfig("a")
	c.ColdStartDelay = c.ElectionMin + time.Second
	err := c.Validate()
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "ColdStartDelay is 6m1s, must be in [0, ElectionMin=6m0s]") {
		t.Fatalf("got %v", err)
	}
}

// The daemons seen starting are counted by address: one sender under a
// thousand names (an outsider's MASTERREQs) counts once, and the draw
// stays within [0, 2·ColdStartDelay] instead of reaching ElectionMin.
func TestColdStartCountsAddresses(t *testing.T) {
	cfg := coldCfg(50 * time.Millisecond)
	h := newHarness(t, cfg)
	h.step(Start{})
	for i := range 1000 {
		h.recv(tsp.MasterReq, uint16(i), fmt.Sprintf("x%d", i), addr(2))
	}
	if len(h.m.starting) != 1 {
		t.Fatalf("%d senders counted, want 1", len(h.m.starting))
	}
	h.fire(TimerColdStart)
	if d := h.timers[TimerColdStart].Sub(h.now); d < 0 || d > 2*cfg.ColdStartDelay {
		t.Fatalf("drawn delay %v, want in [0, %v]", d, 2*cfg.ColdStartDelay)
	}
}

package election

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

// TestMasterResignedSlave: a slave whose master resigns (TellResign
// heard from the master's address) drops it at once and, eligible, draws
// a delay from the cold start's range scaled by the master's slave count;
// when it runs out with no master it becomes master. A resignation from
// any other address changes nothing; a MASTERUP heard during the draw is
// followed and cancels it; a slave that may not be master only drops the
// master.
func TestMasterResignedSlave(t *testing.T) {
	cfg := FastConfig("a")
	resign := ResignHeard{From: addr(9), Name: "m", Slaves: 4}

	h := newHarness(t, cfg)
	h.toSlave()
	h.step(ResignHeard{From: addr(7), Name: "m", Slaves: 4})
	if _, ok := h.m.Master(); !ok {
		t.Fatal("a resignation from another address dropped the master")
	}
	if _, ok := h.timers[TimerColdStart]; ok {
		t.Fatal("a resignation from another address started a draw")
	}
	h.step(resign)
	if _, ok := h.m.Master(); ok {
		t.Fatal("the master's resignation left it followed")
	}
	at, ok := h.timers[TimerColdStart]
	if !ok {
		t.Fatal("no draw after the master resigned")
	}
	if d := at.Sub(h.now); d < 0 || d > 4*cfg.ColdStartDelay {
		t.Fatalf("drew %v, want within [0, %v]", d, 4*cfg.ColdStartDelay)
	}
	acts := h.fire(TimerColdStart)
	if h.m.State() != Master || sendTypes(acts) != "MASTERUP>*" {
		t.Fatalf("after the draw: state %v, sent %q; want master and MASTERUP", h.m.State(), sendTypes(acts))
	}

	// Another took over first: its MASTERUP is followed, the draw cancelled.
	h = newHarness(t, cfg)
	h.toSlave()
	h.step(resign)
	h.recv(tsp.MasterUp, 3, "b", addr(3))
	if q, ok := h.m.Master(); !ok || q.Addr != addr(3) {
		t.Fatalf("master %v %v after b's MASTERUP, want b", q, ok)
	}
	if _, ok := h.timers[TimerColdStart]; ok {
		t.Fatal("the draw still runs once b took over")
	}

	// Not eligible: no master, no draw; the next MASTERUP is followed.
	cfg.MayBeMaster = false
	h = newHarness(t, cfg)
	h.toSlave()
	h.step(resign)
	if _, ok := h.m.Master(); ok {
		t.Fatal("the master's resignation left it followed")
	}
	if _, ok := h.timers[TimerColdStart]; ok {
		t.Fatal("a host that may not be master drew a delay")
	}
}

// newReference is a Host "ref" with Config.Reference on one network,
// started.
func newReference(t *testing.T) *hostHarness {
	t.Helper()
	c := FastConfig("ref")
	c.Reference = true
	c.Addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, 100}), 525)
	h, err := NewHost([]Config{c}, rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		t.Fatal(err)
	}
	hh := &hostHarness{t: t, h: h, now: t0, timers: map[netTimer]time.Time{}}
	hh.record(h.Start(hh.now))
	return hh
}

// TestReferenceResignTold: a reference master that stops claiming tells
// its network it resigns, with its slave count, before it becomes a slave;
// one that stops claiming as a slave has nothing to resign.
func TestReferenceResignTold(t *testing.T) {
	hh := newReference(t)
	hh.record(hh.h.SetReference(hh.now, SetReference{Claim: true, MaxError: time.Millisecond}))
	hh.fireUntil(func() bool { return hh.h.State(0) == Master })
	hh.recv(0, tsp.Packet{Type: tsp.SlaveUp, Name: "s1"}, peerAddr(1))
	hh.recv(0, tsp.Packet{Type: tsp.SlaveUp, Name: "s2"}, peerAddr(2))
	as := hh.record(hh.h.SetReference(hh.now, SetReference{MaxError: time.Second}))
	tell, i, ok := lastOf[TellResign](as)
	if !ok || tell.Slaves != 2 {
		t.Fatalf("stepping down sent %v (found %v): want TellResign with 2 slaves", as, ok)
	}
	sc, j, ok := lastOf[StateChange](as)
	if !ok || sc.To != Slave || j < i {
		t.Fatalf("stepping down: %v; want the resignation, then Slave", as)
	}

	// A slave of a better reference.
	hh = newReference(t)
	hh.recv(0, tsp.Packet{Type: tsp.MasterUp, Name: "m"}, peerAddr(1))
	hh.step(0, ReferenceHeard{From: peerAddr(1), Name: "m", MaxError: 500 * time.Microsecond})
	hh.record(hh.h.SetReference(hh.now, SetReference{Claim: true, MaxError: 20 * time.Millisecond}))
	if hh.h.State(0) != Slave {
		t.Fatalf("state %v under a better reference, want slave", hh.h.State(0))
	}
	hh.record(hh.h.SetReference(hh.now, SetReference{MaxError: time.Second}))
	if _, _, ok := lastOf[TellResign](hh.last); ok {
		t.Fatalf("a slave stepping down told a resignation: %v", hh.last)
	}
}

// TestResignEndsClaim: the resignation heard from a reference ends its
// claim at once (ReferenceOf: the slaves stop saying they follow UTC),
// where it would otherwise stand for its window of a round and a half.
func TestResignEndsClaim(t *testing.T) {
	h, err := NewHost([]Config{FastConfig("s")}, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	hh := &hostHarness{t: t, h: h, now: t0, timers: map[netTimer]time.Time{}}
	hh.record(h.Start(hh.now))
	ref := peerAddr(5)
	hh.recv(0, tsp.Packet{Type: tsp.MasterUp, Name: "ref"}, ref)
	hh.step(0, ReferenceHeard{From: ref, Name: "ref", MaxError: time.Millisecond})
	if _, ok := h.ReferenceOf(0, ref); !ok {
		t.Fatal("the claim was not recorded")
	}
	hh.now = hh.now.Add(time.Second)
	hh.step(0, ResignHeard{From: peerAddr(6), Name: "ref", Slaves: 1})
	if _, ok := h.ReferenceOf(0, ref); !ok {
		t.Fatal("a resignation from another address ended the claim")
	}
	hh.step(0, ResignHeard{From: ref, Name: "ref", Slaves: 1})
	if _, ok := h.ReferenceOf(0, ref); ok {
		t.Fatal("the claim still stands after its reference resigned")
	}
	if _, ok := h.Master(0); ok {
		t.Fatal("the resigned master is still followed")
	}
}

package election

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

// newSpanning is host "gw" on the two families of one link: A (0, IPv4)
// and B (1, IPv6), Config.Link 7 on both, started.
func newSpanning(t *testing.T) *hostHarness {
	t.Helper()
	return newGateway(t, func(c *Config) { c.Link = 7 })
}

// TestHostSpans: networks with the same non-zero Link span; a Link of its
// own, or 0, does not.
func TestHostSpans(t *testing.T) {
	hh := newSpanning(t)
	if !hh.h.Spans(0) || !hh.h.Spans(1) || fmt.Sprint(hh.h.Siblings(0)) != "[1]" || fmt.Sprint(hh.h.Siblings(1)) != "[0]" {
		t.Errorf("Link 7 on both: spans %v %v, siblings %v %v", hh.h.Spans(0), hh.h.Spans(1), hh.h.Siblings(0), hh.h.Siblings(1))
	}
	if hh.h.Spans(2) || hh.h.Spans(-1) {
		t.Error("an out-of-range network spans")
	}
	for _, links := range [][2]int{{0, 0}, {1, 2}} {
		var cfgs []Config
		for i := range 2 {
			c := FastConfig("gw")
			c.Link = links[i]
			cfgs = append(cfgs, c)
		}
		h, err := NewHost(cfgs, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		if h.Spans(0) || h.Spans(1) || h.Siblings(0) != nil {
			t.Errorf("links %v: the host spans", links)
		}
	}
}

// TestHostSpanTakesOver: a spanning host whose start-up finds a master on
// one family that has not said it spans takes that family over at once:
// it becomes master, announces that it spans before its MASTERUP and
// QUIT, and tells the master to QUIT.
func TestHostSpanTakesOver(t *testing.T) {
	hh := newSpanning(t)
	probe := hh.h.Machine(0).probeSeq
	hh.recv(0, tsp.Packet{Type: tsp.MasterAck, Seq: probe, Name: "a1"}, a1Addr)
	hh.fireUntil(func() bool { return hh.h.State(0) == Master })
	sc, _, ok := lastOf[StateChange](hh.last)
	if !ok || !strings.Contains(sc.Reason, "both families") {
		t.Fatalf("A: %v, reason %q; want master by taking over a1", hh.h.State(0), sc.Reason)
	}
	var seq []string
	for _, a := range hh.last {
		switch x := a.Action.(type) {
		case TellSpan:
			seq = append(seq, fmt.Sprintf("net%d span", a.Net))
		case Send:
			if x.Packet.Type == tsp.MasterUp || x.Packet.Type == tsp.Quit {
				seq = append(seq, fmt.Sprintf("net%d %v", a.Net, x.Packet.Type))
			}
		}
	}
	if got := strings.Join(seq, ", "); !strings.Contains(got, "net0 span, net0 MASTERUP") || !strings.Contains(got, "net0 span, net0 QUIT") {
		t.Errorf("takeover sends %q: want a span announcement before MASTERUP and before QUIT", got)
	}
	if _, ok := hh.h.SlaveNet(); ok {
		t.Error("the host still has a slavenet after taking A over")
	}
}

// TestHostSpanningMastersDontTakeOver: a master that said it spans is not
// taken over by another spanning host that follows it: the two rank
// alike, and the follower keeps its slavenet.
func TestHostSpanningMastersDontTakeOver(t *testing.T) {
	hh := newSpanning(t)
	hh.step(0, SpanHeard{From: a1Addr, Name: "a1"})
	probe := hh.h.Machine(0).probeSeq
	hh.recv(0, tsp.Packet{Type: tsp.MasterAck, Seq: probe, Name: "a1"}, a1Addr)
	hh.fireUntil(func() bool { return hh.h.IsSlaveNet(0) })
	if hh.h.State(0) != Slave {
		t.Fatalf("A: %v, want a slave of a1, which spans too", hh.h.State(0))
	}
	if name, ok := hh.h.SpansFrom(0, a1Addr); !ok || name != "a1" {
		t.Errorf("SpansFrom(a1) = %q, %v", name, ok)
	}
}

// TestSpanRank: a host on one family ranks below a master that said it
// spans, so it obeys its QUIT at once; one it has not heard rank by the
// names as before.
func TestSpanRank(t *testing.T) {
	one := func() *Host {
		h, err := NewHost([]Config{FastConfig("a")}, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		h.Start(t0)
		return h
	}
	d := netip.MustParseAddrPort("10.0.0.9:525")
	h := one()
	if r := h.rivalRank(0, d, "d"); r != 0 {
		t.Errorf("unheard: rank %d, want 0", r)
	}
	h.Step(t0, 0, SpanHeard{From: d, Name: "d"})
	if r := h.rivalRank(0, d, "d"); r != 1 {
		t.Errorf("heard: rank %d, want 1 (it outranks us)", r)
	}
	if r := h.rivalRank(0, d, "e"); r != 0 {
		t.Errorf("heard under another name: rank %d, want 0", r)
	}
	late := t0.Add(FastConfig("a").loopWindow() + time.Second)
	h.Step(late, 0, TimerFired{ID: TimerID(250)})
	if _, ok := h.SpansFrom(0, d); ok {
		t.Error("an announcement still stands after two and a half rounds")
	}
	h = one()
	h.Step(t0, 0, SpanHeard{From: d, Name: "a"})
	if _, ok := h.SpansFrom(0, d); ok {
		t.Error("an announcement under our own name was kept")
	}
}

// TestSpanHeardBounded: announcements from ever new addresses do not grow
// the table past maxRefs; an untrusted source's is not kept at all.
func TestSpanHeardBounded(t *testing.T) {
	c := FastConfig("a")
	c.Trusted = []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:525")}
	h, err := NewHost([]Config{FastConfig("a"), c}, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	h.Start(t0)
	for i := range 5 * maxRefs {
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 525)
		h.Step(t0, 0, SpanHeard{From: from, Name: fmt.Sprintf("h%d", i)})
		h.Step(t0, 1, SpanHeard{From: from, Name: fmt.Sprintf("h%d", i)})
	}
	if n := len(h.nets[0].spans); n != maxRefs {
		t.Errorf("%d announcements kept, want the bound %d", n, maxRefs)
	}
	if n := len(h.nets[1].spans); n != 0 {
		t.Errorf("%d announcements kept from untrusted sources", n)
	}
	h.Step(t0, 0, SpanHeard{From: a1Addr, Name: "bad\x00name"})
	if _, ok := h.SpansFrom(0, a1Addr); ok {
		t.Error("an announcement with a bad name was kept")
	}
}

// TestQuitRefusedByRankIsAcked: a master that outranks the sender of a
// QUIT (here by spanning) refuses it, acknowledges it, and tells the
// sender to QUIT; a master that ignores a QUIT because both told each
// other to quit and its name is lower does not acknowledge it.
func TestQuitRefusedByRankIsAcked(t *testing.T) {
	hh := newSpanning(t)
	hh.fireUntil(func() bool { return hh.h.State(0) == Master })
	hh.recv(0, tsp.Packet{Type: tsp.MasterUp, Seq: 1, Name: "a1"}, a1Addr)
	hh.recv(0, tsp.Packet{Type: tsp.Quit, Seq: 77, Name: "a1"}, a1Addr)
	var acked, refused bool
	for _, a := range hh.last {
		switch x := a.Action.(type) {
		case Send:
			acked = acked || x.Packet.Type == tsp.Ack && x.Packet.Seq == 77 && x.To == a1Addr
		case Refused:
			refused = refused || x.Reason == RefusedOutranked
		}
	}
	if !acked || !refused || hh.h.State(0) != Master {
		t.Errorf("QUIT from a master that does not span: acked %v, refused %v, state %v", acked, refused, hh.h.State(0))
	}

	h := newHarness(t, DefaultConfig("a"))
	h.toMaster()
	h.recv(tsp.MasterUp, 1, "b", addr(5)) // a QUITs b: the lower name
	acts := h.recv(tsp.Quit, 88, "b", addr(5))
	for _, s := range sends(acts) {
		if s.Packet.Type == tsp.Ack && s.Packet.Seq == 88 {
			t.Errorf("a crossed QUIT ignored by the lower name was acknowledged: %s", sendTypes(acts))
		}
	}
	if h.m.State() != Master {
		t.Errorf("a: %v after b's crossed QUIT, want master (the lower name stays)", h.m.State())
	}
}

// TestHostSpanningSlaveKeepsIgnoring: a spanning host that follows a
// spanning master on A and ignores B (the same master's other family)
// does not take B back when its look hears no LOOP there (a quiet spell:
// its master holds B), but does when a master that does not span shows
// up on B, and takes it over.
func TestHostSpanningSlaveKeepsIgnoring(t *testing.T) {
	hh := newSpanning(t)
	a1B := netip.AddrPortFrom(netip.AddrFrom4([4]byte{11, 0, 0, 1}), 525)
	hh.step(0, SpanHeard{From: a1Addr, Name: "a1"})
	hh.step(1, SpanHeard{From: a1B, Name: "a1"})
	hh.recv(0, tsp.Packet{Type: tsp.MasterAck, Seq: hh.h.Machine(0).probeSeq, Name: "a1"}, a1Addr)
	hh.recv(1, tsp.Packet{Type: tsp.MasterAck, Seq: hh.h.Machine(1).probeSeq, Name: "a1"}, a1B)
	hh.fireUntil(func() bool { return hh.h.IsSlaveNet(0) && hh.h.Ignored(1) })

	// Three looks at B, a1 heard on A only (its span and LOOP each round).
	for range 3 {
		hh.now = hh.now.Add(FastConfig("gw").ElectionMax)
		hh.step(0, SpanHeard{From: a1Addr, Name: "a1"})
		hh.recv(0, tsp.Packet{Type: tsp.Loop, Seq: 9, Name: "a1", HopCount: LoopHops}, a1Addr)
		hh.step(1, TimerFired{ID: TimerLook})
		if !hh.h.Ignored(1) {
			ig, _, _ := lastOf[Ignored](hh.last)
			t.Fatalf("B taken back with a1, which spans, master on A: %v", ig)
		}
	}

	b1 := netip.AddrPortFrom(netip.AddrFrom4([4]byte{11, 0, 0, 2}), 525)
	hh.recv(1, tsp.Packet{Type: tsp.Loop, Seq: 1, Name: "b1", HopCount: LoopHops}, b1)
	hh.step(1, TimerFired{ID: TimerLook})
	ig, _, ok := lastOf[Ignored](hh.last)
	if hh.h.Ignored(1) || !ok || ig.On || !strings.Contains(ig.Reason, "both families") {
		t.Fatalf("B with b1 master, which does not span: ignored %v (%v)", hh.h.Ignored(1), ig)
	}
}

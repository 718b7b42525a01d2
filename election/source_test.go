package election

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

// waitingForSources has the gateway find a1 on A and b1 on B at start-up:
// it follows a1, leaves B out of use and asks both masters for their time
// sources. It returns the questions, by network.
func waitingForSources(t *testing.T) (*hostHarness, map[int]AskSource) {
	t.Helper()
	hh := newGateway(t, nil)
	h := hh.h
	hh.recv(0, tsp.Packet{Type: tsp.MasterAck, Seq: h.Machine(0).probeSeq, Name: "a1"}, a1Addr)
	hh.recv(1, tsp.Packet{Type: tsp.MasterAck, Seq: h.Machine(1).probeSeq, Name: "b1"}, b1Addr)
	hh.fireUntil(func() bool { return h.IsSlaveNet(0) && h.Ignored(1) })
	asks := map[int]AskSource{}
	for _, a := range hh.last {
		if q, ok := a.Action.(AskSource); ok {
			if _, dup := asks[a.Net]; dup {
				t.Fatalf("two questions on network %d: %v", a.Net, hh.last)
			}
			asks[a.Net] = q
		}
	}
	if asks[0].To != (Peer{Name: "a1", Addr: a1Addr}) || asks[1].To != (Peer{Name: "b1", Addr: b1Addr}) {
		t.Fatalf("questions %v, want a1 on A and b1 on B; actions %v", asks, hh.last)
	}
	return hh, asks
}

func (hh *hostHarness) answer(net int, q AskSource, from netip.AddrPort, source string, hops int) []NetAction {
	return hh.step(net, SourceAnswer{From: from, Seq: q.Seq, Source: source, Hops: hops})
}

func sent(as []NetAction, net int) []string {
	var out []string
	for _, a := range as {
		if s, ok := a.Action.(Send); ok && a.Net == net {
			out = append(out, fmt.Sprintf("%v:%s:%d", s.Packet.Type, s.Packet.Name, s.Packet.HopCount))
		}
	}
	return out
}

// The answers decide at once, in the step of the last one, with no time
// passing: a1 outranks b1, so the gateway takes B over. It passes on
// first the LOOP of a1 that a1's answer told of (one hop down), so that
// b1 learns whose time it serves before the MASTERUP and QUIT.
func TestHostSourceAnswersDecideAtOnce(t *testing.T) {
	hh, asks := waitingForSources(t)
	if as := hh.answer(1, asks[1], b1Addr, "b1", 0); !hh.h.Ignored(1) || len(sent(as, 1)) != 0 {
		t.Fatalf("decided on b1's answer alone, before knowing its own source: %v", as)
	}
	as := hh.answer(0, asks[0], a1Addr, "a1", 0)
	if hh.h.State(1) != Master || !hh.h.IsSlaveNet(0) || !hh.h.Dictates(1) {
		t.Fatalf("B %v, slavenet A %v; actions %v", hh.h.State(1), hh.h.IsSlaveNet(0), as)
	}
	want := []string{fmt.Sprintf("LOOP:a1:%d", LoopHops-1), "MASTERUP:gw:0", "QUIT:gw:0"}
	if got := sent(as, 1); !slices.Equal(got, want) {
		t.Fatalf("sent on B %v, want %v", got, want)
	}
	if _, ok := hh.timers[netTimer{1, TimerLook}]; ok {
		t.Fatal("B taken over with its look timer still set")
	}
}

// b1 serves a source that outranks a1: B is taken back into use (its
// machine probes again), and once it finds b1 there B becomes the
// slavenet and A, a1's, is taken over, with the answers still standing
// for the LOOPs.
func TestHostSourceAnswerSwitchesSlavenet(t *testing.T) {
	hh, asks := waitingForSources(t)
	hh.answer(0, asks[0], a1Addr, "a1", 0)
	as := hh.answer(1, asks[1], b1Addr, "a0", 2)
	if ig, net, ok := lastOf[Ignored](as); !ok || ig.On || net != 1 || hh.h.State(1) != StartUp || !hh.h.Running(1) {
		t.Fatalf("B not taken back into use: %v", as)
	}
	hh.recv(1, tsp.Packet{Type: tsp.MasterAck, Seq: hh.h.Machine(1).probeSeq, Name: "b1"}, b1Addr)
	hh.fireUntil(func() bool { return hh.h.IsSlaveNet(1) })
	if hh.h.State(0) != Master || hh.h.Source() != "a0" {
		t.Fatalf("A %v, source %q; want A taken over, source a0", hh.h.State(0), hh.h.Source())
	}
}

// b1 serves a1's time already: B stays ignored, without a packet.
func TestHostSourceAnswerSameSource(t *testing.T) {
	hh, asks := waitingForSources(t)
	hh.answer(0, asks[0], a1Addr, "a1", 0)
	as := hh.answer(1, asks[1], b1Addr, "a1", 1)
	if !hh.h.Ignored(1) || hh.h.nets[1].waiting || len(sent(as, 1)) != 0 {
		t.Fatalf("B ignored %v, waiting %v; actions %v", hh.h.Ignored(1), hh.h.nets[1].waiting, as)
	}
}

// An answer counts only from the address asked, with the sequence number
// asked, within a round of asking, and only with a name and hop count a
// LOOP could carry. Anything else leaves the host waiting.
func TestHostSourceAnswerRefused(t *testing.T) {
	for name, bad := range map[string]func(hh *hostHarness, q AskSource) []NetAction{
		"other address": func(hh *hostHarness, q AskSource) []NetAction { return hh.answer(1, q, peerAddr(9), "b1", 0) },
		"other network": func(hh *hostHarness, q AskSource) []NetAction { return hh.answer(0, q, b1Addr, "b1", 0) },
		"other seq": func(hh *hostHarness, q AskSource) []NetAction {
			q.Seq++
			return hh.answer(1, q, b1Addr, "b1", 0)
		},
		"late": func(hh *hostHarness, q AskSource) []NetAction {
			hh.now = hh.now.Add(FastConfig("x").SyncInterval + time.Millisecond)
			return hh.answer(1, q, b1Addr, "b1", 0)
		},
		"bad name":   func(hh *hostHarness, q AskSource) []NetAction { return hh.answer(1, q, b1Addr, "b 1", 0) },
		"empty name": func(hh *hostHarness, q AskSource) []NetAction { return hh.answer(1, q, b1Addr, "", 0) },
		"long name": func(hh *hostHarness, q AskSource) []NetAction {
			return hh.answer(1, q, b1Addr, strings.Repeat("b", 300), 0)
		},
		"out of range": func(hh *hostHarness, q AskSource) []NetAction { return hh.answer(1, q, b1Addr, "b1", LoopHops) },
		"negative":     func(hh *hostHarness, q AskSource) []NetAction { return hh.answer(1, q, b1Addr, "b1", -1) },
	} {
		t.Run(name, func(t *testing.T) {
			hh, asks := waitingForSources(t)
			hh.answer(0, asks[0], a1Addr, "a1", 0)
			if as := bad(hh, asks[1]); len(as) != 0 || !hh.h.Ignored(1) || len(hh.h.nets[1].told) != 0 {
				t.Fatalf("answer taken: actions %v, B ignored %v, told %v", as, hh.h.Ignored(1), hh.h.nets[1].told)
			}
		})
	}
}

// An answer nobody asked for is dropped, however well formed: the host
// learns nothing from it.
func TestHostSourceAnswerUnasked(t *testing.T) {
	hh := submaster(t)
	if as := hh.step(1, SourceAnswer{From: peerAddr(7), Seq: 1, Source: "a0", Hops: 0}); len(as) != 0 {
		t.Fatalf("actions %v", as)
	}
	if as := hh.step(0, SourceAnswer{From: a1Addr, Seq: 1, Source: "a0", Hops: 0}); len(as) != 0 {
		t.Fatalf("actions %v", as)
	}
	if len(hh.h.nets[0].told)+len(hh.h.nets[1].told) != 0 || hh.h.Source() != "a1" {
		t.Fatalf("told %v %v, source %q", hh.h.nets[0].told, hh.h.nets[1].told, hh.h.Source())
	}
}

// Questions are bounded: one outstanding per master, at most maxAsked per
// network; the answers kept, likewise.
func TestHostSourceTablesBounded(t *testing.T) {
	hh := submaster(t)
	h := hh.h
	for i := range 3 * maxAsked {
		h.ask(1, Peer{Name: fmt.Sprintf("m%d", i), Addr: peerAddr(20 + i)})
		h.ask(1, Peer{Name: fmt.Sprintf("m%d", i), Addr: peerAddr(20 + i)})
	}
	asks := h.finish()
	if len(asks) != maxAsked || len(h.nets[1].asked) != maxAsked {
		t.Fatalf("%d questions sent, %d outstanding; at most %d", len(asks), len(h.nets[1].asked), maxAsked)
	}
	// Every one answered, round after round: the answers kept stay bounded.
	for round := range 4 {
		for _, a := range asks {
			q := a.Action.(AskSource)
			hh.step(1, SourceAnswer{From: q.To.Addr, Seq: q.Seq, Source: "z", Hops: 1})
		}
		if len(h.nets[1].told) > maxAsked {
			t.Fatalf("round %d: %d answers kept", round, len(h.nets[1].told))
		}
		hh.now = hh.now.Add(2 * FastConfig("x").SyncInterval)
		h.now = hh.now
		for i := range 2 * maxAsked {
			h.ask(1, Peer{Name: "n", Addr: peerAddr(60 + 10*round + i)})
		}
		asks = h.finish()
	}
}

// A master answers with the source it serves: its own name where it
// follows nobody; its master's source one hop further where it is a
// submaster and knows it (a1's LOOPs heard for a round); nothing while it
// does not, nor on a network where it is not master, nor to an untrusted
// peer.
func TestHostTellsSource(t *testing.T) {
	hh := submaster(t)
	q := SourceQuery{From: peerAddr(7), Seq: 42}
	if as := hh.step(1, q); len(as) != 0 {
		t.Fatalf("answered before knowing its master's source: %v", as)
	}
	for round := range 2 {
		hh.recv(0, tsp.Packet{Type: tsp.Loop, Seq: uint16(round), HopCount: LoopHops, Name: "a1"}, a1Addr)
		hh.now = hh.now.Add(FastConfig("x").SyncInterval)
	}
	hh.recv(0, tsp.Packet{Type: tsp.Loop, Seq: 2, HopCount: LoopHops, Name: "a1"}, a1Addr)
	as := hh.step(1, q)
	if tell, net, ok := lastOf[TellSource](as); !ok || net != 1 || tell != (TellSource{To: q.From, Seq: 42, Source: "a1", Hops: 1}) {
		t.Fatalf("answer %v, want a1 one hop away, to the asker with its seq", as)
	}
	if as := hh.step(0, q); len(as) != 0 {
		t.Fatalf("answered on A, where it is a slave: %v", as)
	}

	alone := newGateway(t, func(c *Config) { c.Trusted = []netip.AddrPort{peerAddr(7)} })
	alone.fireUntil(func() bool { return alone.h.State(0) == Master && alone.h.State(1) == Master })
	if tell, _, ok := lastOf[TellSource](alone.step(0, q)); !ok || tell.Source != "gw" || tell.Hops != 0 {
		t.Fatalf("a host alone: %v", alone.last)
	}
	if as := alone.step(0, SourceQuery{From: peerAddr(8), Seq: 1}); len(as) != 0 {
		t.Fatalf("answered an untrusted peer: %v", as)
	}
}

// A submaster that learned its master's source from an answer tells it on,
// one hop further, before any LOOP: questions chain down a tree.
func TestHostTellsToldSource(t *testing.T) {
	hh := submaster(t)
	hh.h.ask(0, Peer{Name: "a1", Addr: a1Addr})
	q, _, _ := lastOf[AskSource](hh.h.finish())
	hh.step(0, SourceAnswer{From: a1Addr, Seq: q.Seq, Source: "r", Hops: 2})
	if tell, _, ok := lastOf[TellSource](hh.step(1, SourceQuery{From: peerAddr(7), Seq: 5})); !ok || tell.Source != "r" || tell.Hops != 3 {
		t.Fatalf("answer %v, want r three hops away", hh.last)
	}
}

// Random source events from a few peers, well formed or not, on a host
// that is waiting, following or mastering: no panic, tables within their
// bounds, and every answer it sends goes to the asker with a valid name.
func TestHostSourceEventsHostile(t *testing.T) {
	names := []string{"a1", "b1", "", "x y", strings.Repeat("n", 300), "gw", "a0"}
	for seed := range uint64(20) {
		hh, _ := waitingForSources(t)
		r := rand.New(rand.NewPCG(seed, 9))
		for range 500 {
			hh.now = hh.now.Add(time.Duration(r.IntN(400)) * time.Millisecond)
			net, from := r.IntN(2), []netip.AddrPort{a1Addr, b1Addr, peerAddr(r.IntN(8))}[r.IntN(3)]
			var ev Event
			switch r.IntN(4) {
			case 0:
				ev = SourceQuery{From: from, Seq: uint16(r.IntN(4))}
			case 1:
				ev = Recv{Packet: tsp.Packet{Type: tsp.Loop, Version: tsp.Version, HopCount: uint8(r.IntN(LoopHops + 3)), Name: names[r.IntN(2)]}, From: from}
			default:
				// Half the answers carry the seq asked of their sender, if
				// any: the numbers are the machine's, not small ones.
				seq := uint16(r.IntN(4))
				if a, ok := hh.h.nets[net].asked[from]; ok && r.IntN(2) == 0 {
					seq = a.seq
				}
				ev = SourceAnswer{From: from, Seq: seq, Source: names[r.IntN(len(names))], Hops: r.IntN(LoopHops+4) - 2}
			}
			for _, a := range hh.step(net, ev) {
				if tell, ok := a.Action.(TellSource); ok && (tell.To != from || !tsp.ValidName(tell.Source) || tell.Source == "" || tell.Hops < 0 || tell.Hops >= LoopHops) {
					t.Fatalf("seed %d: %v after %v", seed, tell, ev)
				}
			}
			if r.IntN(20) == 0 { // the earliest timer, once
				once := false
				hh.fireUntil(func() bool { done := once; once = true; return done })
			}
			for i, n := range hh.h.nets {
				if len(n.asked) > maxAsked || len(n.told) > maxAsked {
					t.Fatalf("seed %d: network %d: %d asked, %d told", seed, i, len(n.asked), len(n.told))
				}
			}
		}
	}
}

// A question's sequence number is drawn from the network machine's
// sequence, which starts at random (BSD): hosts seeded differently ask
// with different numbers, so that a blind forger of the answer, even from
// the master's address, has to guess one. It was a counter from 1.
func TestHostAskSeqUnpredictable(t *testing.T) {
	first := map[uint16]bool{}
	for seed := range uint64(8) {
		c := FastConfig("gw")
		c.Network, c.Addr = "A", netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, 100}), 525)
		h, err := NewHost([]Config{c}, rand.New(rand.NewPCG(seed, seed)))
		if err != nil {
			t.Fatal(err)
		}
		h.ask(0, Peer{Name: "a1", Addr: a1Addr})
		q, _, ok := lastOf[AskSource](h.finish())
		if !ok {
			t.Fatalf("seed %d: no question", seed)
		}
		first[q.Seq] = true
	}
	if len(first) < 8 || first[1] {
		t.Fatalf("first questions' seqs %v: want eight different ones, not a counter from 1", first)
	}
}

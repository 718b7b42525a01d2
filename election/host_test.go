package election

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

// A Host with one network is its Machine: for any sequence of events (here
// random packets of every election type from a few peers, timer expiries,
// sync results and resignations) it returns the same actions, tagged with
// network 0. The only packets that can make them differ are LOOPs
// forwarded by a gateway (hop count below LoopHops), which a one-network
// site never carries; the random packets leave them out.
func TestHostOneNetworkIsMachine(t *testing.T) {
	types := []tsp.Type{
		tsp.AdjTime, tsp.Ack, tsp.MasterReq, tsp.MasterAck, tsp.SetTime, tsp.MasterUp, tsp.SlaveUp,
		tsp.Election, tsp.Accept, tsp.Refuse, tsp.Conflict, tsp.Resolve, tsp.Quit, tsp.Loop, tsp.Test,
	}
	for seed := range uint64(40) {
		cfg := FastConfig("me")
		if seed%3 == 0 {
			cfg.Trusted = []netip.AddrPort{peerAddr(1), peerAddr(2)}
		}
		cfg.MayBeMaster = seed%5 != 4
		m, err := New(cfg, rand.New(rand.NewPCG(seed, 1)))
		if err != nil {
			t.Fatal(err)
		}
		h, err := NewHost([]Config{cfg}, rand.New(rand.NewPCG(seed, 1)))
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(seed, 2))
		now := t0
		timers := map[TimerID]bool{}
		var rounds []SyncRound
		compare := func(ev Event) {
			t.Helper()
			want := m.Step(now, ev).Actions
			var got []Action
			for _, a := range h.Step(now, 0, ev) {
				if a.Net != 0 {
					t.Fatalf("seed %d: action on network %d", seed, a.Net)
				}
				got = append(got, a.Action)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("seed %d, %v:\nmachine %v\nhost    %v", seed, ev, want, got)
			}
			for _, a := range want {
				switch a := a.(type) {
				case SetTimer:
					timers[a.ID] = true
				case CancelTimer:
					delete(timers, a.ID)
				case SyncRound:
					rounds = append(rounds, a)
				}
			}
		}
		compare(Start{})
		for range 2000 {
			now = now.Add(time.Duration(r.IntN(300)) * time.Millisecond)
			switch k := r.IntN(10); {
			case k < 5:
				p := tsp.Packet{Type: types[r.IntN(len(types))], Version: tsp.Version,
					Seq: uint16(r.IntN(8)), Name: fmt.Sprintf("p%d", r.IntN(3)), HopCount: LoopHops}
				if r.IntN(20) == 0 {
					p.Name = "me"
				}
				compare(Recv{Packet: p, From: peerAddr(r.IntN(3))})
			case k < 9 && len(timers) > 0:
				ids := make([]TimerID, 0, len(timers))
				for id := range timers {
					ids = append(ids, id)
				}
				slices.Sort(ids)
				id := ids[r.IntN(len(ids))]
				delete(timers, id)
				compare(TimerFired{ID: id})
			case len(rounds) > 0:
				compare(ZeroResult(rounds[0]))
				rounds = rounds[1:]
			case r.IntN(50) == 0:
				compare(ForceElection{})
			case r.IntN(20) == 0:
				// A resignation: the Host's trust check and the machine's
				// (the master followed, by address) agree.
				compare(ResignHeard{From: peerAddr(r.IntN(3)), Name: fmt.Sprintf("p%d", r.IntN(3)), Slaves: r.IntN(5)})
			}
		}
	}
}

func peerAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 525)
}

// hostHarness drives a Host by hand, keeping its timers per network.
type hostHarness struct {
	t      *testing.T
	h      *Host
	now    time.Time
	timers map[netTimer]time.Time
	last   []NetAction
}

type netTimer struct {
	net int
	id  TimerID
}

// newGateway is host "gw" on networks A (0) and B (1), started.
func newGateway(t *testing.T, mod func(c *Config)) *hostHarness {
	t.Helper()
	var cfgs []Config
	for i, name := range []string{"A", "B"} {
		c := FastConfig("gw")
		c.Network = name
		c.Addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{byte(10 + i), 0, 0, 100}), 525)
		if mod != nil {
			mod(&c)
		}
		cfgs = append(cfgs, c)
	}
	h, err := NewHost(cfgs, rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		t.Fatal(err)
	}
	hh := &hostHarness{t: t, h: h, now: t0, timers: map[netTimer]time.Time{}}
	hh.record(h.Start(hh.now))
	return hh
}

func (hh *hostHarness) record(as []NetAction) []NetAction {
	for _, a := range as {
		switch x := a.Action.(type) {
		case SetTimer:
			hh.timers[netTimer{a.Net, x.ID}] = hh.now.Add(x.After)
		case CancelTimer:
			delete(hh.timers, netTimer{a.Net, x.ID})
		}
	}
	hh.last = as
	return as
}

func (hh *hostHarness) step(net int, ev Event) []NetAction {
	return hh.record(hh.h.Step(hh.now, net, ev))
}

// recv delivers a packet from a peer on network net.
func (hh *hostHarness) recv(net int, p tsp.Packet, from netip.AddrPort) []NetAction {
	p.Version = tsp.Version
	return hh.step(net, Recv{Packet: p, From: from})
}

// fireUntil fires the earliest timer, again and again, until cond holds.
func (hh *hostHarness) fireUntil(cond func() bool) {
	hh.t.Helper()
	for range 200 {
		if cond() {
			return
		}
		var next netTimer
		var at time.Time
		for k, d := range hh.timers {
			if at.IsZero() || d.Before(at) || (d.Equal(at) && (k.net < next.net || k.net == next.net && k.id < next.id)) {
				next, at = k, d
			}
		}
		if at.IsZero() {
			break
		}
		delete(hh.timers, next)
		hh.now = at
		hh.step(next.net, TimerFired{ID: next.id})
	}
	if !cond() {
		hh.t.Fatalf("condition never held; A %v, B %v", hh.h.State(0), hh.h.State(1))
	}
}

// sends returns the packets sent on network net by the last step.
func (hh *hostHarness) sends(net int) []Send {
	var out []Send
	for _, a := range hh.last {
		if s, ok := a.Action.(Send); ok && a.Net == net {
			out = append(out, s)
		}
	}
	return out
}

func lastOf[T Action](as []NetAction) (T, int, bool) {
	var zero T
	for i := len(as) - 1; i >= 0; i-- {
		if x, ok := as[i].Action.(T); ok {
			return x, as[i].Net, true
		}
	}
	return zero, -1, false
}

var a1Addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, 1}), 525)

// submaster makes the gateway follow a1 on A (a1 answers its probe) and,
// nobody answering on B, master of B.
func submaster(t *testing.T) *hostHarness {
	hh := newGateway(t, nil)
	probe := hh.h.Machine(0).probeSeq
	hh.recv(0, tsp.Packet{Type: tsp.MasterAck, Seq: probe, Name: "a1"}, a1Addr)
	hh.fireUntil(func() bool { return hh.h.IsSlaveNet(0) && hh.h.State(1) == Master })
	return hh
}

// A gateway that follows a master on A and found nobody on B is a
// submaster: A is its slavenet, its rounds on B dictate, and the LOOPs of
// A's master go on to B one hop further, under their originator's name.
func TestHostSubmaster(t *testing.T) {
	hh := submaster(t)
	h := hh.h
	if !h.Dictates(1) || h.Dictates(0) {
		t.Fatalf("dictates: A %v, B %v; want B only", h.Dictates(0), h.Dictates(1))
	}
	if h.Source() != "a1" {
		t.Fatalf("source %q, want a1", h.Source())
	}
	hh.recv(0, tsp.Packet{Type: tsp.Loop, Seq: 77, HopCount: LoopHops, Name: "a1"}, a1Addr)
	got := hh.sends(1)
	if len(got) != 1 || !got[0].Broadcast || got[0].Packet.Type != tsp.Loop ||
		got[0].Packet.Name != "a1" || got[0].Packet.Seq != 77 || got[0].Packet.HopCount != LoopHops-1 {
		t.Fatalf("forwarded %v, want LOOP a1 seq 77 hop %d broadcast on B", got, LoopHops-1)
	}
	// A LOOP at the end of its hops, or from another host than the master
	// followed, goes no further.
	hh.recv(0, tsp.Packet{Type: tsp.Loop, Seq: 78, HopCount: 1, Name: "r"}, a1Addr)
	hh.recv(0, tsp.Packet{Type: tsp.Loop, Seq: 79, HopCount: LoopHops, Name: "x"}, peerAddr(5))
	if s := hh.sends(1); len(s) != 0 {
		t.Fatalf("forwarded %v", s)
	}
	// The rounds on B dictate.
	hh.recv(1, tsp.Packet{Type: tsp.SlaveUp, Seq: 3, Name: "b2"}, peerAddr(7))
	hh.fireUntil(func() bool {
		_, net, ok := lastOf[SyncRound](hh.last)
		return ok && net == 1
	})
	if r, _, _ := lastOf[SyncRound](hh.last); !r.Dictate {
		t.Fatalf("round on B %v, want dictate", r)
	}
}

// Our own LOOP coming back from the master followed on the slavenet: the
// gateways form a cycle. The host stops following it (the network is
// ignored, looked at again later) and is then the top master of B, whose
// rounds vote.
func TestHostCycle(t *testing.T) {
	hh := submaster(t)
	h := hh.h
	as := hh.recv(0, tsp.Packet{Type: tsp.Loop, Seq: 5, HopCount: LoopHops - 3, Name: "gw"}, a1Addr)
	c, net, ok := lastOf[CycleDetected](as)
	if !ok || net != 0 || c.Master.Name != "a1" || c.Hops != 3 {
		t.Fatalf("actions %v, want a cycle through a1 after 3 hops on A", as)
	}
	if ig, _, ok := lastOf[Ignored](as); !ok || !ig.On {
		t.Fatalf("actions %v, want A ignored", as)
	}
	if _, ok := hh.timers[netTimer{0, TimerLook}]; !ok {
		t.Fatal("no look timer on A")
	}
	if _, ok := h.SlaveNet(); ok || !h.Ignored(0) || h.Dictates(1) || h.Source() != "gw" {
		t.Fatalf("slavenet %v, A ignored %v, B dictates %v, source %q", h.IsSlaveNet(0), h.Ignored(0), h.Dictates(1), h.Source())
	}
	// Ignored, A answers nothing.
	if as := hh.recv(0, tsp.Packet{Type: tsp.MasterReq, Seq: 9, Name: "a2"}, peerAddr(2)); len(as) != 0 {
		t.Fatalf("ignored network answered %v", as)
	}
}

// The runtime's own broadcasts come back to it: a LOOP from the host's own
// address (Config.Addr) is dropped, even under another host's name (one it
// forwarded).
func TestHostDropsOwnLoops(t *testing.T) {
	hh := submaster(t)
	own := hh.h.nets[0].cfg.Addr
	as := hh.recv(0, tsp.Packet{Type: tsp.Loop, Seq: 1, HopCount: LoopHops, Name: "z"}, own)
	if len(as) != 0 || len(hh.h.nets[0].loops) != 0 {
		t.Fatalf("own LOOP taken: %v", as)
	}
}

// A host alone on two networks is master of both; the first votes, the
// other dictates, so the host clock gets one correction a round.
func TestHostTopMasterVotesOnce(t *testing.T) {
	hh := newGateway(t, nil)
	h := hh.h
	hh.fireUntil(func() bool { return h.State(0) == Master && h.State(1) == Master })
	if h.Dictates(0) || !h.Dictates(1) {
		t.Fatalf("dictates: A %v, B %v; want B only", h.Dictates(0), h.Dictates(1))
	}
}

// A host that may not be master follows the first master it finds and
// ignores the other networks (BSD IGNORE). Only the slavenet's corrections
// reach the clock.
func TestHostSlaveOnOneNetwork(t *testing.T) {
	hh := newGateway(t, func(c *Config) { c.MayBeMaster = false })
	h := hh.h
	hh.recv(0, tsp.Packet{Type: tsp.MasterAck, Seq: h.Machine(0).probeSeq, Name: "a1"}, a1Addr)
	hh.recv(1, tsp.Packet{Type: tsp.MasterAck, Seq: h.Machine(1).probeSeq, Name: "b1"}, b1Addr)
	hh.fireUntil(func() bool { return h.IsSlaveNet(0) && h.Ignored(1) })
	if _, net, ok := lastOf[Ignored](hh.last); !ok || net != 1 {
		t.Fatalf("last actions %v, want B ignored", hh.last)
	}
	hh.recv(0, tsp.Packet{Type: tsp.AdjTime, Seq: 40, Name: "a1", Time: tsp.Timeval{Usec: 5000}}, a1Addr)
	if adj, net, ok := lastOf[AdjustClock](hh.last); !ok || net != 0 || adj.Delta != 5*time.Millisecond {
		t.Fatalf("ADJTIME from the slavenet's master: %v", hh.last)
	}
}

var b1Addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{11, 0, 0, 1}), 525)

// twoMasters has the gateway find a1 on A and b1 on B. Not knowing yet
// which time source wins, it follows a1 and leaves B out of use; then a
// round of LOOPs (a1's on A; b1's own and, if b1Source is not "b1", those
// it forwards from b1Source) tells it, and it looks at B again at once. It
// returns what the host did meanwhile.
func twoMasters(t *testing.T, b1Source string) (*hostHarness, []NetAction) {
	hh := newGateway(t, nil)
	h := hh.h
	hh.recv(0, tsp.Packet{Type: tsp.MasterAck, Seq: h.Machine(0).probeSeq, Name: "a1"}, a1Addr)
	hh.recv(1, tsp.Packet{Type: tsp.MasterAck, Seq: h.Machine(1).probeSeq, Name: "b1"}, b1Addr)
	hh.fireUntil(func() bool { return h.IsSlaveNet(0) && h.Ignored(1) })
	if ig, _, _ := lastOf[Ignored](hh.last); ig.Reason != "time sources not known yet" {
		t.Fatalf("B ignored: %q", ig.Reason)
	}
	var did []NetAction
	for round := range 2 {
		did = append(did, hh.recv(0, tsp.Packet{Type: tsp.Loop, Seq: uint16(100 + round), HopCount: LoopHops, Name: "a1"}, a1Addr)...)
		did = append(did, hh.recv(1, tsp.Packet{Type: tsp.Loop, Seq: uint16(200 + round), HopCount: LoopHops, Name: "b1"}, b1Addr)...)
		if b1Source != "b1" {
			did = append(did, hh.recv(1, tsp.Packet{Type: tsp.Loop, Seq: uint16(300 + round), HopCount: LoopHops - 2, Name: b1Source}, b1Addr)...)
		}
		hh.now = hh.now.Add(FastConfig("x").SyncInterval)
	}
	return hh, did
}

// b1 passes a1's LOOPs on: it serves a1's time, as the gateway does. The
// gateway has one way into that tree already: once it knows, it leaves B
// ignored, without a packet, until its next look.
func TestHostSameSourceIgnored(t *testing.T) {
	hh, did := twoMasters(t, "a1")
	if _, _, ok := lastOf[Ignored](did); ok || !hh.h.Ignored(1) || hh.h.nets[1].waiting {
		t.Fatalf("B ignored %v, waiting %v; did %v", hh.h.Ignored(1), hh.h.nets[1].waiting, did)
	}
	if st, _, ok := lastOf[SetTimer](did); !ok || st.ID != TimerLook {
		t.Fatalf("no new look at B: %v", did)
	}
}

// b1 is its own time source, which a1 outranks (lower name): the gateway
// takes B over. a1's LOOP goes out on B first, so that b1 learns at once
// whose time the gateway serves, then MASTERUP and QUIT to b1.
func TestHostTakesOver(t *testing.T) {
	hh, did := twoMasters(t, "b1")
	if ig, net, ok := lastOf[Ignored](did); !ok || ig.On || net != 1 {
		t.Fatalf("B not looked at again once the sources were known: %v", did)
	}
	// B's machine probes again: b1 answers.
	hh.recv(1, tsp.Packet{Type: tsp.MasterAck, Seq: hh.h.Machine(1).probeSeq, Name: "b1"}, b1Addr)
	hh.fireUntil(func() bool { return hh.h.State(1) == Master })
	var seq []string
	for _, s := range hh.sends(1) {
		seq = append(seq, fmt.Sprintf("%v:%s", s.Packet.Type, s.Packet.Name))
	}
	if want := []string{"LOOP:a1", "MASTERUP:gw", "QUIT:gw"}; !slices.Equal(seq, want) {
		t.Fatalf("sent on B %v, want %v", seq, want)
	}
	if !hh.h.IsSlaveNet(0) || !hh.h.Dictates(1) {
		t.Fatalf("slavenet A %v, B dictates %v", hh.h.IsSlaveNet(0), hh.h.Dictates(1))
	}
	// b1, a master, QUITs the gateway back before it has heard a1's LOOP:
	// refused, since the gateway's source outranks b1's.
	hh.recv(1, tsp.Packet{Type: tsp.Quit, Seq: 900, Name: "b1"}, b1Addr)
	if r, _, ok := lastOf[Refused](hh.last); !ok || r.Reason != RefusedOutranked {
		t.Fatalf("QUIT from b1: %v", hh.last)
	}
	if hh.h.State(1) != Master {
		t.Fatalf("B is %v", hh.h.State(1))
	}
}

func TestNewHostErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	if _, err := NewHost(nil, rng); !errors.Is(err, ErrNoNetworks) {
		t.Fatalf("no networks: %v", err)
	}
	if _, err := NewHost([]Config{FastConfig("a"), FastConfig("b")}, rng); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("two names: %v", err)
	}
	if _, err := NewHost([]Config{FastConfig("a")}, nil); !errors.Is(err, ErrNoRand) {
		t.Fatalf("no rng: %v", err)
	}
	bad := FastConfig("a")
	bad.SyncInterval = 0
	if _, err := NewHost([]Config{FastConfig("a"), bad}, rng); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad config: %v", err)
	}
}

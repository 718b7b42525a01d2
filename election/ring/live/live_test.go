package live

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/election/ring"
	"github.com/timed-project/timed/internal/vtime"
	"github.com/timed-project/timed/tsp"
)

// elect asks hs[0] to coordinate an election of alg and runs the net until
// it answers.
func elect(t *testing.T, f *fakeNet, hs []*fakeHost, alg string) Result {
	t.Helper()
	var res *Result
	hs[0].r.Elect(alg, DefaultUnit, func(r Result) {
		if res != nil {
			t.Errorf("second result %+v", r)
		}
		res = &r
	})
	f.run(2*timeout, func() bool { return res != nil })
	return *res
}

// checkElected checks a result the way the simulator checks a run, and
// asks every node what it decided: one leader, the extremum the algorithm
// elects, every node that decided naming it (all of them where the
// algorithm announces), messages within the paper's bound.
func checkElected(t *testing.T, a ring.Algorithm, res Result, hs []*fakeHost) {
	t.Helper()
	if res.Error != "" {
		t.Fatalf("%s: %s", a.Name, res.Error)
	}
	if res.N != len(hs) || len(res.Members) != len(hs) {
		t.Fatalf("%s: %d members (%v), want %d", a.Name, res.N, res.Members, len(hs))
	}
	var ids []uint64
	byName := map[string]uint64{}
	for _, m := range res.Members {
		ids = append(ids, m.ID)
		byName[m.Name] = m.ID
	}
	want := slices.Max(ids)
	if a.Elects == ring.Min {
		want = slices.Min(ids)
	}
	if a.Elects != ring.Any && res.LeaderID != want {
		t.Errorf("%s elected id %d, want %d among %v", a.Name, res.LeaderID, want, ids)
	}
	if byName[res.Leader] != res.LeaderID {
		t.Errorf("%s: leader %q has id %d, the result says %d", a.Name, res.Leader, byName[res.Leader], res.LeaderID)
	}
	if float64(res.Messages) > res.Bound || res.Messages == 0 && len(hs) > 1 {
		t.Errorf("%s: %d messages, bound %.0f", a.Name, res.Messages, res.Bound)
	}
	elected := 0
	for _, h := range hs {
		nd := h.r.node
		if nd == nil {
			t.Fatalf("%s: %s never started", a.Name, h.name)
		}
		rep := nd.rep
		if rep.Elected {
			elected++
			if h.name != res.Leader {
				t.Errorf("%s: %s says it is the leader, the result says %s", a.Name, h.name, res.Leader)
			}
		}
		if rep.Decided && rep.Leader != res.LeaderID || a.Announces && !rep.Decided {
			t.Errorf("%s: %s decided %v, leader %d; want %d", a.Name, h.name, rep.Decided, rep.Leader, res.LeaderID)
		}
		if id := res.Members[nd.me].ID; res.Members[nd.me].Name != h.name || byName[h.name] != id {
			t.Errorf("%s: %s ran as member %d %+v", a.Name, h.name, nd.me, res.Members[nd.me])
		}
	}
	if elected != 1 {
		t.Errorf("%s: %d nodes elected", a.Name, elected)
	}
}

// TestElectEveryAlgorithm runs every algorithm that can run over the
// network among five daemons, on twenty nets. Their clocks are up to ¾
// unit apart and their links take up to ¼: together under a unit, which
// is what reading each message at its send time + unit absorbs, so the
// synchronous algorithms' rounds still line up on T0. (Read on arrival
// instead, afek-gafni-sync elects the wrong node.)
func TestElectEveryAlgorithm(t *testing.T) {
	ran := 0
	for _, a := range ring.All() {
		if a.HalfDuplex {
			continue
		}
		ran++
		t.Run(a.Name, func(t *testing.T) {
			for seed := range uint64(20) {
				f := newFakeNet(t, seed)
				f.delay = func() time.Duration { return 1 + time.Duration(f.rng.Int64N(int64(DefaultUnit/4))) }
				hs := f.add(5, DefaultUnit*3/8)
				checkElected(t, a, elect(t, f, hs, a.Name), hs)
			}
		})
	}
	if ran < 10 {
		t.Fatalf("only %d algorithms run live", ran)
	}
}

// TestElectAsynchronousReordered runs the asynchronous algorithms over
// links slower than the unit that reorder packets: every link is kept
// FIFO by its counters, and late messages are read on arrival.
func TestElectAsynchronousReordered(t *testing.T) {
	reordered := 0
	for _, a := range ring.All() {
		if a.HalfDuplex || a.SyncOnly {
			continue
		}
		t.Run(a.Name, func(t *testing.T) {
			f := newFakeNet(t, 2)
			f.delay = func() time.Duration { return 1 + time.Duration(f.rng.Int64N(int64(3*DefaultUnit))) }
			hs := f.add(7, DefaultUnit/10)
			checkElected(t, a, elect(t, f, hs, a.Name), hs)
			reordered += f.reorder
		})
	}
	if reordered == 0 {
		t.Errorf("the net reordered no packet: the test proves nothing")
	}
}

// TestRingOrder: the members are ordered by address in broadcast mode,
// in the configured list's order in peers mode, whatever the order of the
// roll call's answers; the coordinator takes its own place.
func TestRingOrder(t *testing.T) {
	for _, mode := range []string{"broadcast", "peers"} {
		t.Run(mode, func(t *testing.T) {
			f := newFakeNet(t, 3)
			hs := f.add(4, 0)
			var want []netip.AddrPort
			for _, h := range hs {
				want = append(want, h.addr)
			}
			if mode == "peers" {
				f.peers = []netip.AddrPort{hs[2].addr, hs[0].addr, hs[3].addr, hs[1].addr}
				want = f.peers
			} else {
				slices.SortFunc(want, netip.AddrPort.Compare)
			}
			res := elect(t, f, hs, "chang-roberts")
			checkElected(t, ring.ChangRoberts, res, hs)
			for i, m := range res.Members {
				h := f.hosts[want[i]]
				if m.Name != h.name || (h != hs[0]) != (m.Addr == h.addr.String()) || h == hs[0] && m.Addr != "" {
					t.Errorf("member %d is %+v, want %s at %v", i, m, h.name, h.addr)
				}
			}
		})
	}
}

// TestElectAlone: a coordinator nobody answers runs a ring of one.
func TestElectAlone(t *testing.T) {
	f := newFakeNet(t, 4)
	hs := f.add(1, 0)
	checkElected(t, ring.ChangRoberts, elect(t, f, hs, "chang-roberts"), hs)
}

// TestElectOverThePacketPath is timedc's way in: an ELECT packet from an
// address that is no daemon, answered with a RESULT that echoes its seq.
func TestElectOverThePacketPath(t *testing.T) {
	f := newFakeNet(t, 5)
	hs := f.add(3, 0)
	timedc := netip.MustParseAddrPort("10.9.9.9:40000")
	var res *Result
	var others int
	f.client(timedc, func(p tsp.ExtPacket) {
		if r, ok := ResultOf(p, 77); ok {
			res = r
		} else {
			others++
		}
	})
	req, err := ElectPacket("admin", 77, "franklin", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.send(timedc, req, hs[1].addr); err != nil {
		t.Fatal(err)
	}
	f.run(2*timeout, func() bool { return res != nil })
	checkElected(t, ring.Franklin, *res, hs)
	if others != 0 {
		t.Errorf("timedc got %d packets besides the result", others)
	}
}

// TestLostNode: a daemon that answered the roll call is lost before the
// start: the ring is broken, and timedc hears so when the time is up.
func TestLostNode(t *testing.T) {
	f := newFakeNet(t, 6)
	hs := f.add(4, 0)
	var res *Result
	hs[0].r.Elect("chang-roberts", 0, func(r Result) { res = &r })
	f.run(time.Second, func() bool { return f.s.Since(vtime.Epoch) > rollCall*9/10 })
	f.down[hs[2].addr] = true
	f.run(2*timeout, func() bool { return res != nil })
	if !strings.Contains(res.Error, "no result within") || res.N != 4 {
		t.Errorf("result %+v, want a timeout among 4", res)
	}
	if took := f.s.Since(vtime.Epoch); took < timeout || took > timeout+time.Second {
		t.Errorf("answered after %v, want the timeout, %v", took, timeout)
	}
}

// TestElectRefusals: what cannot run is refused at once.
func TestElectRefusals(t *testing.T) {
	f := newFakeNet(t, 7)
	hs := f.add(2, 0)
	ask := func(alg string) Result {
		var res *Result
		hs[0].r.Elect(alg, 0, func(r Result) { res = &r })
		if res == nil {
			t.Fatalf("%s: no answer at once", alg)
		}
		return *res
	}
	for alg, want := range map[string]string{"nosuch": "unknown algorithm", "vlt-half-self": "half-duplex"} {
		if res := ask(alg); !strings.Contains(res.Error, want) || res.Algorithm != alg {
			t.Errorf("%s: %+v, want an error naming %q", alg, res, want)
		}
	}
	hs[0].r.Elect("lelann", 0, func(r Result) {})
	if res := ask("franklin"); !strings.Contains(res.Error, "already running") {
		t.Errorf("second election: %+v", res)
	}
}

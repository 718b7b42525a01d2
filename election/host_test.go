package election

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

// A Host with one network is its Machine: for any sequence of events (here
// random packets of every election type from a few peers, timer expiries
// and sync results) it returns the same actions, tagged with network 0. The
// only packets that can make them differ are LOOPs forwarded by a gateway
// (hop count below LoopHops), which a one-network site never carries; the
// random packets leave them out.
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
			}
		}
	}
}

func peerAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 525)
}

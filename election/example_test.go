package election_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp"
)

// A runtime's loop, reduced to one daemon alone on its network: nobody
// answers its MASTERREQ, so it becomes master. A real runtime sends the
// packets on UDP port 525 and fires the timers with time.AfterFunc (or one
// timer wheel), feeding every event back into Step on one goroutine.
func Example() {
	cfg := election.DefaultConfig("tsa")
	m, err := election.New(cfg, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	timers := map[election.TimerID]time.Time{}
	events := []election.Event{election.Start{}}
	for len(events) > 0 && m.State() != election.Master {
		rd := m.Step(now, events[0])
		events = events[1:]
		for _, a := range rd.Actions {
			switch a := a.(type) {
			case election.Send:
				fmt.Println(a.Packet.Type, "broadcast:", a.Broadcast)
			case election.SetTimer:
				timers[a.ID] = now.Add(a.After)
			case election.CancelTimer:
				delete(timers, a.ID)
			case election.StateChange:
				fmt.Println(a)
			}
		}
		if len(events) == 0 && len(timers) > 0 { // nothing received: the next timer fires
			var id election.TimerID
			for i, t := range timers {
				if id == 0 || t.Before(timers[id]) {
					id = i
				}
			}
			now = timers[id]
			delete(timers, id)
			events = append(events, election.TimerFired{ID: id})
		}
	}
	// Output:
	// state startup -> startup (started)
	// MASTERREQ broadcast: true
	// MASTERREQ broadcast: true
	// MASTERREQ broadcast: true
	// MASTERREQ broadcast: true
	// MASTERREQ broadcast: true
	// state startup -> nomaster (no MASTERACK)
	// state nomaster -> master (no master found)
	// MASTERUP broadcast: true
}

// A gateway's loop: one Host for the two networks it is on, A and B, one
// timer table per network, every action carried out on the network it is
// tagged with. Here a1 is the master of A (scripted: it answers the
// gateway's MASTERREQ, sends a LOOP and an ADJTIME) and nobody is on B, so
// the gateway follows a1 on A (its slavenet) and becomes master of B: a
// submaster, which passes a1's LOOPs on to B and whose rounds on B
// dictate the time its clock takes from a1.
func ExampleHost() {
	var cfgs []election.Config
	for _, network := range []string{"A", "B"} {
		c := election.FastConfig("gw")
		c.Network = network
		cfgs = append(cfgs, c)
	}
	h, err := election.NewHost(cfgs, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		panic(err)
	}
	a1 := netip.MustParseAddrPort("10.0.0.1:525")
	b2 := netip.MustParseAddrPort("10.0.1.2:525")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type timer struct {
		net int
		id  election.TimerID
	}
	timers := map[timer]time.Time{}
	type event struct {
		net int
		ev  election.Event
	}
	var events []event
	rounds := 0
	recv := func(net int, p tsp.Packet, from netip.AddrPort) {
		p.Version = tsp.Version
		events = append(events, event{net, election.Recv{Packet: p, From: from}})
	}
	carryOut := func(as []election.NetAction) {
		for _, na := range as {
			network := cfgs[na.Net].Network
			switch a := na.Action.(type) {
			case election.Send:
				p := a.Packet
				if p.Type == tsp.Loop {
					fmt.Printf("%s: send LOOP %s hops %d\n", network, p.Name, p.HopCount)
				}
				// a1 plays A's master: it answers the probe.
				if p.Type == tsp.MasterReq && na.Net == 0 {
					recv(0, tsp.Packet{Type: tsp.MasterAck, Seq: p.Seq, Name: "a1"}, a1)
				}
			case election.SetTimer:
				timers[timer{na.Net, a.ID}] = now.Add(a.After)
			case election.CancelTimer:
				delete(timers, timer{na.Net, a.ID})
			case election.StateChange:
				if a.From != a.To {
					fmt.Printf("%s: %v\n", network, a)
				}
			case election.SyncRound:
				// The clock layer measures the slaves; with Dictate it
				// corrects them towards this host's clock, takes no vote,
				// and leaves Own at 0.
				fmt.Printf("%s: sync round, dictate %v\n", network, a.Dictate)
				events = append(events, event{na.Net, election.ZeroResult(a)})
				rounds++
			case election.AdjustClock:
				fmt.Printf("%s: adjust the clock by %v (from %s)\n", network, a.Delta, a.Master)
			}
		}
	}
	earliest := func() (next timer) {
		found := false
		for k, at := range timers {
			if !found || at.Before(timers[next]) ||
				at.Equal(timers[next]) && (k.net < next.net || k.net == next.net && k.id < next.id) {
				next, found = k, true
			}
		}
		return next
	}
	carryOut(h.Start(now))
	joined := false
	for len(events) > 0 || rounds == 0 {
		if len(events) == 0 { // nothing received: the next timer fires
			next := earliest()
			now = timers[next]
			delete(timers, next)
			events = append(events, event{next.net, election.TimerFired{ID: next.id}})
		}
		e := events[0]
		events = events[1:]
		carryOut(h.Step(now, e.net, e.ev))
		if !joined && h.IsSlaveNet(0) && h.State(1) == election.Master {
			joined = true
			// Once the gateway is master of B, b2 joins it there; a1's
			// round on A: its LOOP, and an ADJTIME for the gateway.
			recv(1, tsp.Packet{Type: tsp.SlaveUp, Seq: 1, Name: "b2"}, b2)
			recv(0, tsp.Packet{Type: tsp.Loop, Seq: 2, HopCount: election.LoopHops, Name: "a1"}, a1)
			recv(0, tsp.Packet{Type: tsp.AdjTime, Seq: 3, Name: "a1", Time: tsp.Timeval{Usec: 2000}}, a1)
		}
	}
	s, _ := h.SlaveNet()
	fmt.Printf("slavenet %s, time source %s\n", cfgs[s].Network, h.Source())
	// Output:
	// A: state startup -> consistency (MASTERACK from a1)
	// A: state consistency -> slave (one master)
	// B: state startup -> nomaster (no MASTERACK)
	// B: state nomaster -> master (no master found)
	// B: send LOOP a1 hops 9
	// A: adjust the clock by 2ms (from a1)
	// B: sync round, dictate true
	// B: send LOOP gw hops 10
	// slavenet A, time source a1
}

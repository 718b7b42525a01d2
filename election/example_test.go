package election_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/timed-project/timed/election"
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

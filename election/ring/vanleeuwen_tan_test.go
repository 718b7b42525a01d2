package ring

import (
	"errors"
	"reflect"
	"testing"
)

// feed runs events through a machine and returns the last step's actions.
func feed(m Machine, evs ...Event) []Action {
	var out []Action
	for _, ev := range evs {
		out = m.Step(ev)
	}
	return out
}

func recv(p Port, m Msg) Event { return Event{Kind: Receive, Port: p, Msg: m} }

func elect(id uint64, phase uint32, q bool) Msg {
	return Msg{Kind: KElect, ID: id, Phase: phase, Q: q}
}

// §4 (ii): an observant node that relayed <30,1> to its right and then
// gets an active neighbour's <40,1,q=1> from there treats it as the
// collision it would have been: it turns active in phase 2 with 40 and
// chases 30's side. Without the q bit the same message would just stop.
func TestVLTQBitCrossingIsCollision(t *testing.T) {
	steps := []Event{
		{Kind: Start},
		recv(Left, Msg{Kind: KElect, ID: 5}),   // phase 0: a smaller left
		recv(Right, Msg{Kind: KElect, ID: 20}), // neighbour, so observant
		recv(Left, elect(30, 1, false)),        // relayed to the right
		recv(Right, elect(40, 1, true)),        // crossed it in the link
	}
	full := VanLeeuwenTan(true, InaugurateRegister).New(NodeConfig{ID: 10})
	if got, want := feed(full, steps...), []Action{send(Left, elect(40, 2, true))}; !reflect.DeepEqual(got, want) {
		t.Errorf("full duplex: %v, want %v", got, want)
	}
	half := VanLeeuwenTan(false, InaugurateRegister).New(NodeConfig{ID: 10})
	if got := feed(half, steps...); len(got) != 0 {
		t.Errorf("half duplex: %v, want nothing (40 > 30 stops)", got)
	}
}

// §4 (i): an active node that gets a relayed (q=0) message of its own
// phase back over the link it sent on discards it: the neighbour is the
// one that counts the crossing.
func TestVLTQBitActiveDiscards(t *testing.T) {
	steps := []Event{
		{Kind: Start},
		recv(Left, Msg{Kind: KElect, ID: 7}),
		recv(Right, Msg{Kind: KElect, ID: 3}), // local minimum: <7,1,q> goes right
		recv(Right, elect(5, 1, false)),
	}
	full := VanLeeuwenTan(true, InaugurateRegister).New(NodeConfig{ID: 1})
	if got := feed(full, steps[:3]...); !reflect.DeepEqual(got, []Action{send(Right, elect(7, 1, true))}) {
		t.Fatalf("phase 0 ended with %v", got)
	}
	if got := full.Step(steps[3]); len(got) != 0 {
		t.Errorf("full duplex: %v, want the crossing message discarded", got)
	}
	half := VanLeeuwenTan(false, InaugurateRegister).New(NodeConfig{ID: 1})
	if got, want := feed(half, steps...), []Action{send(Right, elect(7, 2, false))}; !reflect.DeepEqual(got, want) {
		t.Errorf("half duplex: %v, want d-activation %v", got, want)
	}
}

// Two same-phase messages from both sides with equal values: inaugurate.
// With the register variant the leader is the register's value.
func TestVLTInaugurationVariants(t *testing.T) {
	steps := []Event{
		{Kind: Start},
		recv(Left, Msg{Kind: KElect, ID: 5}),
		recv(Right, Msg{Kind: KElect, ID: 20}),
		{Kind: Receive, Batch: []Incoming{{Left, elect(30, 3, false)}, {Right, elect(30, 3, false)}}},
	}
	self := VanLeeuwenTan(false, InaugurateSelf).New(NodeConfig{ID: 10})
	want := []Action{{Kind: Elected, Leader: 10}, send(Left, Msg{Kind: KLeader, ID: 10}), send(Right, Msg{Kind: KLeader, ID: 10})}
	if got := feed(self, steps...); !reflect.DeepEqual(got, want) {
		t.Errorf("self: %v, want %v", got, want)
	}
	reg := VanLeeuwenTan(false, InaugurateRegister).New(NodeConfig{ID: 10})
	want = []Action{{Kind: LeaderIs, Leader: 30}, send(Left, Msg{Kind: KSleepwell}), send(Right, Msg{Kind: KSleepwell})}
	if got := feed(reg, steps...); !reflect.DeepEqual(got, want) {
		t.Errorf("register: %v, want %v", got, want)
	}
}

func TestFibPhases(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 3, 4: 3, 5: 4, 8: 5, 13: 6, 20: 6, 21: 7} {
		if got := fibPhases(n); got != want {
			t.Errorf("fibPhases(%d) = %d, want %d", n, got, want)
		}
	}
}

// Why §4 insists on the register variant: on full-duplex links two
// neighbours can inaugurate at once (their same-value messages cross), and
// if each then claims the leadership there are two leaders. Half-duplex
// links, or the register variant, avoid it on the same run.
func TestVLTSelfNeedsHalfDuplex(t *testing.T) {
	ids := []uint64{1, 3, 2, 4}
	onFull := VanLeeuwenTan(false, InaugurateSelf)
	onFull.HalfDuplex = false
	if _, err := Run(Config{Algorithm: onFull, IDs: ids, Schedule: Asynchronous, Seed: 10}); !errors.Is(err, ErrManyLeaders) {
		t.Errorf("self-inauguration on full-duplex links: %v, want %v", err, ErrManyLeaders)
	}
	runOrFail(t, "half", Config{Algorithm: VanLeeuwenTan(false, InaugurateSelf), IDs: ids, Schedule: Asynchronous, Seed: 10})
	runOrFail(t, "register", Config{Algorithm: VanLeeuwenTan(true, InaugurateRegister), IDs: ids, Schedule: Asynchronous, Seed: 10})
}

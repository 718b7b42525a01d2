package ring

import (
	"math/rand/v2"
	"testing"
)

// Chang–Roberts' worst case is met exactly: id k travels k hops.
func TestChangRobertsDescendingIsWorstCase(t *testing.T) {
	for n := 1; n <= 64; n++ {
		r := runOrFail(t, "descending", Config{Algorithm: ChangRoberts, IDs: DescendingIDs(n), Schedule: Synchronous})
		if want := n*(n+1)/2 + n; r.Messages != want {
			t.Fatalf("n=%d: %d messages, want n(n+1)/2+n = %d", n, r.Messages, want)
		}
	}
}

// LeLann always costs exactly n².
func TestLeLannExactlySquare(t *testing.T) {
	for n := 1; n <= 32; n++ {
		r := runOrFail(t, "lelann", Config{Algorithm: LeLann, IDs: DescendingIDs(n), Schedule: Asynchronous, Seed: uint64(n)})
		if r.Messages != n*n {
			t.Fatalf("n=%d: %d messages", n, r.Messages)
		}
	}
}

// Vitányi §3: ascending placement with tick u_i = 2^(n−i+1) against
// f(i) = 2^i drives the message count to order n² ("square in N"); the
// election is still correct and the minimum wins.
func TestVitanyiClockAdversary(t *testing.T) {
	prev := 0
	for n := 2; n <= 16; n++ {
		ids, ticks := VitanyiAdversary(n, Unit)
		r := runOrFail(t, "adversary", Config{Algorithm: Vitanyi(Pow2, 1, false), IDs: ids, TickLen: ticks, Schedule: Asynchronous, Seed: 1})
		if r.Leader != 1 {
			t.Fatalf("n=%d: leader %d", n, r.Leader)
		}
		if r.Messages > n*n+2*n {
			t.Fatalf("n=%d: %d messages > n²+2n", n, r.Messages)
		}
		// Every M_i is held the same absolute time per hop, so none
		// overtakes another: all run until they meet a smaller name.
		if want := 2*n + n*(n+1)/2; r.Messages != want {
			t.Errorf("n=%d: %d messages, want 2n+n(n+1)/2 = %d", n, r.Messages, want)
		}
		if r.Messages < prev {
			t.Errorf("n=%d: %d messages, fewer than n−1's %d", n, r.Messages, prev)
		}
		prev = r.Messages
	}
}

// §3: with f(i) = u·2^i/m the count stays under 5N on rings whose clocks
// are merely Archimedean (ticks in [Unit, 2·Unit], delays ≤ Unit, so
// u/m ≤ 3), for random arrangements. (Against the §3 clock adversary the
// scaling does not help: every hold rescales alike and the count stays
// quadratic, as the adversary test shows for f = 2^i.)
func TestVitanyiScaledUnderFiveN(t *testing.T) {
	a := Vitanyi(Scaled, 3, false)
	rng := rand.New(rand.NewPCG(5, 5))
	for seed := range uint64(10) {
		n := 100
		r := runOrFail(t, "scaled", Config{Algorithm: a, IDs: randomIDs(rng, n), Schedule: Asynchronous, Seed: seed})
		if r.Messages >= 5*n {
			t.Errorf("seed %d: %d messages ≥ 5N", seed, r.Messages)
		}
	}
}

// Synchronous case: the leader measures n from the sleepwell's tour.
func TestVitanyiRingSize(t *testing.T) {
	a := Vitanyi(Pow2, 1, true)
	rng := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{1, 2, 3, 10, 57, 200} {
		ids := randomIDs(rng, n)
		r := runOrFail(t, "ring size", Config{Algorithm: a, IDs: ids, Schedule: Synchronous})
		if r.RingSize != n {
			t.Fatalf("n=%d: measured %d", n, r.RingSize)
		}
	}
}

// Minimal-time variant: the winner is never held, so the election takes
// about three walk times (wakeups, the winner's tour, the sleepwell) where
// f(i) = 2^i needs f(l)+1 per hop.
func TestVitanyiMinimalTime(t *testing.T) {
	n := 64
	ids := DescendingIDs(n)
	fast := runOrFail(t, "mintime", Config{Algorithm: Vitanyi(MinimalTime, 1, false), IDs: ids, Schedule: Synchronous})
	slow := runOrFail(t, "pow2", Config{Algorithm: Vitanyi(Pow2, 1, false), IDs: ids, Schedule: Synchronous})
	// Synchronous: one hop is one tick of two units; 3 walks plus the
	// first tick.
	if walks := fast.Units() / float64(2*n); walks > 3.1 {
		t.Errorf("minimal time took %.2f walk times", walks)
	}
	if fast.Time >= slow.Time {
		t.Errorf("minimal time %v not faster than 2^i's %v", fast.Time, slow.Time)
	}
}

// Afek–Gafni synchronous: with staggered starts the earliest starter with
// the largest id wins (lexicographic (level, id)).
func TestAfekGafniSyncStaggered(t *testing.T) {
	a := AfekGafniSync
	a.Elects = Any
	ids := []uint64{5, 9, 2, 7, 3, 8, 1, 6}
	starters := []Wake{{Node: 0, At: 0}, {Node: 2, At: 0}, {Node: 1, At: 4 * Unit}, {Node: 5, At: 2 * Unit}}
	r := runOrFail(t, "staggered", Config{Algorithm: a, IDs: ids, Schedule: Synchronous, Starters: starters})
	if r.Leader != 5 {
		t.Errorf("leader %d, want 5 (largest id among the round-0 starters)", r.Leader)
	}
}

// The time-slice leader speaks in its slice: (l−1)·n rounds of silence.
func TestTimeSliceTime(t *testing.T) {
	n := 20
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i + 4) // least id 4: three empty slices first
	}
	r := runOrFail(t, "timeslice", Config{Algorithm: TimeSlice, IDs: ids, Schedule: Synchronous})
	rounds := r.Units() / 2
	if rounds < 3*float64(n) || rounds > 4*float64(n) {
		t.Errorf("took %.1f rounds, want in [(l−1)n, l·n] = [%d, %d]", rounds, 3*n, 4*n)
	}
}

func randomIDs(r *rand.Rand, n int) []uint64 {
	ids := make([]uint64, n)
	for i, p := range r.Perm(n) {
		ids[i] = uint64(p + 1)
	}
	return ids
}

// Afek–Gafni synchronous: the winner captures 1, 2, 4, … nodes, one batch
// every two rounds, so it is elected by round 2⌈log₂ n⌉.
func TestAfekGafniSyncRounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, n := range []int{2, 3, 5, 8, 13, 64, 100, 513} {
		r := runOrFail(t, "ag rounds", Config{Algorithm: AfekGafniSync, IDs: randomIDs(rng, n), Schedule: Synchronous})
		if rounds, want := r.Units()/2, 2*ceilLog2(n); rounds > float64(want) {
			t.Errorf("n=%d: elected in round %.1f, want ≤ 2⌈log₂ n⌉ = %d", n, rounds, want)
		}
	}
}

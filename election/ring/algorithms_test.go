package ring

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// Every algorithm, every variant, every arrangement of 1…n for n ≤ 6.
func TestExhaustive(t *testing.T) {
	for _, a := range All() {
		t.Run(a.Name, func(t *testing.T) { exhaustive(t, a, 1, 6) })
	}
}

// n = 7: 5040 arrangements. Without the race detector every variant runs;
// under -race (≈10× slower) only the synchronous one, so that the
// package's race run stays near a minute on two shared cores.
func TestExhaustiveSeven(t *testing.T) {
	for _, a := range All() {
		t.Run(a.Name, func(t *testing.T) {
			if raceEnabled {
				exhaustiveVariants(t, a, 7, 7, variantsFor(a)[:1])
				return
			}
			exhaustive(t, a, 7, 7)
		})
	}
}

// Random larger rings: random and (for comparison-based algorithms)
// sparse ids, random delays, orientations, half-duplex links for the
// full-duplex vLT too, and a staggered wake-up.
func TestRandomLargerRings(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 42))
	for _, a := range All() {
		for _, n := range []int{8, 17, 33, 100} {
			for seed := range uint64(4) {
				ids := randomIDs(rng, n)
				if a.Elects != Min && seed%2 == 1 {
					ids = sparseIDs(rng, n)
				}
				for _, v := range variantsFor(a) {
					c := v.mk(ids, seed)
					runOrFail(t, fmt.Sprintf("%s/%s n=%d seed=%d", a.Name, v.name, n, seed), c)
					if a.Name == "vlt-full-register" {
						c.HalfDuplex = true
						runOrFail(t, fmt.Sprintf("%s/%s-half n=%d seed=%d", a.Name, v.name, n, seed), c)
					}
				}
				if !a.SyncOnly {
					c := Config{Algorithm: a, IDs: ids, Schedule: Asynchronous, Seed: seed, MaxDelay: 5 * Unit}
					for i := range n {
						if rng.IntN(3) == 0 {
							c.Starters = append(c.Starters, Wake{Node: i, At: time.Duration(rng.Int64N(int64(20 * Unit)))})
						}
					}
					if c.Starters == nil {
						c.Starters = []Wake{{Node: n - 1, At: Unit}}
					}
					runOrFail(t, fmt.Sprintf("%s/staggered n=%d seed=%d", a.Name, n, seed), c)
				}
			}
		}
	}
}

func sparseIDs(r *rand.Rand, n int) []uint64 {
	seen := map[uint64]bool{}
	ids := make([]uint64, 0, n)
	for len(ids) < n {
		v := 1 + r.Uint64N(1<<62)
		if !seen[v] {
			seen[v] = true
			ids = append(ids, v)
		}
	}
	return ids
}

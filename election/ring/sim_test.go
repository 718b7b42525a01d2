package ring

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// permute calls f with every permutation of 1…n (Heap's algorithm).
func permute(n int, f func([]uint64)) {
	a := make([]uint64, n)
	for i := range a {
		a[i] = uint64(i + 1)
	}
	c := make([]int, n)
	f(a)
	for i := 0; i < n; {
		if c[i] < i {
			if i%2 == 0 {
				a[0], a[i] = a[i], a[0]
			} else {
				a[c[i]], a[i] = a[i], a[c[i]]
			}
			f(a)
			c[i]++
			i = 0
		} else {
			c[i] = 0
			i++
		}
	}
}

// variant is one way of running an algorithm in the exhaustive tests.
type variant struct {
	name string
	mk   func(ids []uint64, seed uint64) Config
}

func variantsFor(a Algorithm) []variant {
	vs := []variant{{"sync", func(ids []uint64, _ uint64) Config {
		return Config{Algorithm: a, IDs: ids, Schedule: Synchronous}
	}}}
	if a.SyncOnly {
		return vs
	}
	vs = append(vs, variant{"async", func(ids []uint64, seed uint64) Config {
		return Config{Algorithm: a, IDs: ids, Schedule: Asynchronous, Seed: seed}
	}})
	vs = append(vs, variant{"async-one-starter", func(ids []uint64, seed uint64) Config {
		return Config{Algorithm: a, IDs: ids, Schedule: Asynchronous, Seed: seed,
			Starters: []Wake{{Node: int(seed % uint64(len(ids)))}}}
	}})
	if a.Topology == Bidirectional {
		vs = append(vs, variant{"async-no-orientation", func(ids []uint64, seed uint64) Config {
			r := rand.New(rand.NewPCG(seed, 7))
			flip := make([]bool, len(ids))
			for i := range flip {
				flip[i] = r.IntN(2) == 1
			}
			return Config{Algorithm: a, IDs: ids, Schedule: Asynchronous, Seed: seed, Flip: flip}
		}})
	}
	return vs
}

func runOrFail(t *testing.T, what string, c Config) Result {
	t.Helper()
	r, err := Run(c)
	if err != nil {
		t.Fatalf("%s ids=%v: %v (%+v)", what, c.IDs, err, r)
	}
	return r
}

// exhaustive runs every variant of a on every arrangement of 1…n, for n
// from lo to hi.
func exhaustive(t *testing.T, a Algorithm, lo, hi int) {
	exhaustiveVariants(t, a, lo, hi, variantsFor(a))
}

func exhaustiveVariants(t *testing.T, a Algorithm, lo, hi int, vs []variant) {
	for _, v := range vs {
		for n := lo; n <= hi; n++ {
			if a.Topology == Complete && n < 2 {
				continue
			}
			seed := uint64(n)
			permute(n, func(ids []uint64) {
				seed++
				runOrFail(t, fmt.Sprintf("%s/%s n=%d", a.Name, v.name, n), v.mk(ids, seed))
			})
		}
	}
}

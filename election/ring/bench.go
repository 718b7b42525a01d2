package ring

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Stat summarises the runs of one algorithm at one ring size.
type Stat struct {
	Algorithm string
	N, Runs   int
	// Worst over all runs, mean over the random ones. Bits are those of the Msg encoding
	// (what a daemon puts on the wire), not information-theoretic bits.
	// Time is in maximal link delays (Unit); a synchronous round is two.
	WorstMsgs, MeanMsgs float64
	WorstBits, MeanBits float64
	WorstTime, MeanTime float64
	// Bound is the largest message bound over the runs, TimeBound the
	// largest time bound (0: the algorithm states none).
	Bound, TimeBound float64
	// WorstCase names the arrangement that gave WorstMsgs.
	WorstCase string
}

// PerNLogN is messages/(n·log₂ n), the figure the plot shows.
func (s Stat) PerNLogN(msgs float64) float64 {
	if s.N < 2 {
		return msgs
	}
	return msgs / (float64(s.N) * math.Log2(float64(s.N)))
}

// Measure runs a on runs ≥ 1 random arrangements of 1…n (random delays and
// orientations where the algorithm allows them, seeded from seed) and on
// the structured ones: ascending, descending, and for Vitányi's f = 2^i
// with n ≤ 32 the §3 clock adversary. Each run is checked as Run checks
// it; the first failure is returned.
func Measure(a Algorithm, n, runs int, seed uint64) (Stat, error) {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	st := Stat{Algorithm: a.Name, N: n}
	var random int
	add := func(name string, c Config) error {
		r, err := Run(c)
		if err != nil {
			return fmt.Errorf("%s n=%d %s: %w", a.Name, n, name, err)
		}
		m, b, t := float64(r.Messages), float64(r.Bits), r.Units()
		if m > st.WorstMsgs {
			st.WorstMsgs, st.WorstCase = m, name
		}
		st.WorstBits, st.WorstTime = max(st.WorstBits, b), max(st.WorstTime, t)
		if name == "random" {
			random++
			st.MeanMsgs += m
			st.MeanBits += b
			st.MeanTime += t
		}
		st.Bound = max(st.Bound, r.Bound)
		st.TimeBound = max(st.TimeBound, r.TimeBound)
		st.Runs++
		return nil
	}
	base := func(ids []uint64, s uint64) Config {
		c := Config{Algorithm: a, IDs: ids, Schedule: Asynchronous, Seed: s}
		if a.SyncOnly {
			c.Schedule = Synchronous
		}
		if a.Topology == Bidirectional {
			c.Flip = make([]bool, n)
			for i := range c.Flip {
				c.Flip[i] = rng.IntN(2) == 1
			}
		}
		return c
	}
	for k := range runs {
		if err := add("random", base(randomPerm(rng, n), seed+uint64(k))); err != nil {
			return st, err
		}
	}
	asc := make([]uint64, n)
	for i := range asc {
		asc[i] = uint64(i + 1)
	}
	if err := add("ascending", base(asc, seed)); err != nil {
		return st, err
	}
	if err := add("descending", base(DescendingIDs(n), seed)); err != nil {
		return st, err
	}
	if a.Name == "vitanyi-2^i" && n <= 32 {
		ids, ticks := VitanyiAdversary(n, Unit)
		c := base(ids, seed)
		c.TickLen = ticks
		if err := add("§3-adversary", c); err != nil {
			return st, err
		}
	}
	if random > 0 {
		st.MeanMsgs /= float64(random)
		st.MeanBits /= float64(random)
		st.MeanTime /= float64(random)
	}
	return st, nil
}

func randomPerm(r *rand.Rand, n int) []uint64 {
	ids := make([]uint64, n)
	for i, p := range r.Perm(n) {
		ids[i] = uint64(p + 1)
	}
	return ids
}

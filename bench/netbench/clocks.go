package netbench

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// Clock is one daemon's simulated clock at start.
type Clock struct {
	Offset   time.Duration // from the kernel clock, whole microseconds
	DriftPPM float64       // thousandths of a ppm
}

// Spec is the clock as timed's --clock flag.
func (c Clock) Spec() string {
	return fmt.Sprintf("sim:offset=%+dus,drift=%+.3fppm", c.Offset.Microseconds(), c.DriftPPM)
}

// Clocks draws n clocks, offsets uniform in ±maxOffset and drifts in
// ±maxDriftPPM, the same for the same seed and n.
func Clocks(seed uint64, n int, maxOffset time.Duration, maxDriftPPM float64) []Clock {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	cs := make([]Clock, n)
	for i := range cs {
		us := maxOffset.Microseconds()
		cs[i] = Clock{
			Offset:   time.Duration(rng.Int64N(2*us+1)-us) * time.Microsecond,
			DriftPPM: float64(rng.Int64N(int64(2000*maxDriftPPM)+1))/1000 - maxDriftPPM,
		}
	}
	return cs
}

// CounterSum is the sum of every series of the counter name in a
// Prometheus text exposition; false where there is none.
func CounterSum(text []byte, name string) (float64, bool) {
	var sum float64
	found := false
	for line := range bytes.Lines(text) {
		line = bytes.TrimSpace(line)
		rest, ok := bytes.CutPrefix(line, []byte(name))
		if !ok || len(rest) == 0 || (rest[0] != '{' && rest[0] != ' ') {
			continue // a comment, another metric, or one whose name only begins so
		}
		if rest[0] == '{' {
			i := bytes.LastIndexByte(rest, '}')
			if i < 0 {
				continue
			}
			rest = rest[i+1:]
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(string(f[0]), 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

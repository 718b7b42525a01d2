package netbench

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/timed-project/timed/clocksync"
)

// Clock is one daemon's simulated clock at start.
type Clock struct {
	Offset   time.Duration // from the kernel clock, whole microseconds
	DriftPPM float64       // thousandths of a ppm
	// Osc is how its frequency wanders (zero: a constant drift).
	Osc clocksync.Oscillator
}

// Spec is the clock as timed's --clock flag.
func (c Clock) Spec() string {
	s := fmt.Sprintf("sim:offset=%+dus,drift=%+.3fppm", c.Offset.Microseconds(), c.DriftPPM)
	if o := c.Osc; o.Wanders() {
		s += fmt.Sprintf(",wander=%gppm,temp=%gppm,seed=%d", o.WanderPPM, o.TempPPM, o.Seed)
		if o.TempPeriod > 0 {
			s += ",period=" + o.TempPeriod.String()
		}
	}
	return s
}

// Clocks draws n clocks, offsets uniform in ±maxOffset and drifts in
// ±maxDriftPPM, the same for the same seed and n. Each wanders as osc
// says, with its own seed (osc.Seed's, and its place among the n), so
// that no two wander alike.
func Clocks(seed uint64, n int, maxOffset time.Duration, maxDriftPPM float64, osc clocksync.Oscillator) []Clock {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	cs := make([]Clock, n)
	for i := range cs {
		us := maxOffset.Microseconds()
		cs[i] = Clock{
			Offset:   time.Duration(rng.Int64N(2*us+1)-us) * time.Microsecond,
			DriftPPM: float64(rng.Int64N(int64(2000*maxDriftPPM)+1))/1000 - maxDriftPPM,
		}
		if osc.Wanders() {
			cs[i].Osc = osc
			cs[i].Osc.Seed = osc.Seed<<16 + seed<<8 + uint64(i)
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

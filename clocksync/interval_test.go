package clocksync

import (
	"fmt"
	"testing"
	"time"
)

// network is a toy network for the controller: each host's correction
// after an interval T is its noise plus its residual frequency error
// times T (what a slave whose discipline has converged to within resid
// drifts by).
type network struct {
	hosts []string
	noise time.Duration
	resid float64 // ppm
}

func (n network) round(since time.Duration) []HostCorrection {
	out := make([]HostCorrection, len(n.hosts))
	for i, h := range n.hosts {
		drift := time.Duration(n.resid * 1e-6 * float64(since))
		// Alternate signs and a little spread, as real corrections.
		c := n.noise*time.Duration(1+i%3)/3 + drift
		if i%2 == 1 {
			c = -c
		}
		out[i] = HostCorrection{Host: h, Correction: c}
	}
	return out
}

// run feeds rounds of n to c, each after the interval c chose, and
// returns the intervals chosen.
func run(c *IntervalController, n network, rounds int) []time.Duration {
	var out []time.Duration
	for range rounds {
		since := c.Interval()
		out = append(out, c.Round(since, n.round(since)).Next)
	}
	return out
}

var testInterval = IntervalConfig{Floor: 8 * time.Second, Ceiling: 240 * time.Second, Target: 20 * time.Microsecond}

func settled(t *testing.T, cfg IntervalConfig, n network) *IntervalController {
	t.Helper()
	c := NewIntervalController(cfg)
	got := run(c, n, 12)
	if last := got[len(got)-1]; last != cfg.Ceiling {
		t.Fatalf("settled network: intervals %v, want to end at the ceiling %v", got, cfg.Ceiling)
	}
	return c
}

func TestIntervalController(t *testing.T) {
	hosts := []string{"a", "b", "c", ""}
	quiet := network{hosts: hosts, noise: 3 * time.Microsecond, resid: 0.01}
	tests := []struct {
		name string
		// after the network settled at the ceiling, one round of these
		// corrections
		round []HostCorrection
		since time.Duration
		want  func(d IntervalDecision) error
	}{
		{
			name:  "quiet: stays at the ceiling",
			round: quiet.round(240 * time.Second),
			want:  wantNext(240*time.Second, "hold"),
		},
		{
			name:  "a clock jumped by 5 ms: back to the floor",
			round: append(quiet.round(240*time.Second), HostCorrection{Host: "b", Correction: 5 * time.Millisecond}),
			want:  wantNext(8*time.Second, "floor"),
		},
		{
			name:  "a new slave: back to the floor",
			round: append(quiet.round(240*time.Second), HostCorrection{Host: "new", Correction: time.Microsecond}),
			want:  wantNext(8*time.Second, "floor"),
		},
		{
			name:  "a slave sent SETTIME: back to the floor",
			round: []HostCorrection{{Host: "a", Correction: 30 * time.Second, New: true}, {Host: "b"}, {Host: "c"}},
			want:  wantNext(8*time.Second, "floor"),
		},
		{
			name:  "the temperature changed (0.3 ppm over 240 s): shorter, above the floor",
			round: network{hosts: hosts, noise: 3 * time.Microsecond, resid: 0.3}.round(240 * time.Second),
			want: func(d IntervalDecision) error {
				if d.Change != "shorten" || d.Next >= 240*time.Second/2+time.Second || d.Next <= 8*time.Second {
					return fmt.Errorf("want shorten to within (8 s, 120 s]")
				}
				return nil
			},
		},
		{
			name:  "a frequency change of 2 ppm: shortened by far more",
			round: network{hosts: hosts, noise: 3 * time.Microsecond, resid: 2}.round(240 * time.Second),
			want: func(d IntervalDecision) error {
				if d.Change != "shorten" || d.Next > 30*time.Second {
					return fmt.Errorf("want shorten to 30 s or less")
				}
				return nil
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := settled(t, testInterval, quiet)
			since := tt.since
			if since == 0 {
				since = c.Interval()
			}
			d := c.Round(since, tt.round)
			if err := tt.want(d); err != nil {
				t.Fatalf("%+v: %v", d, err)
			}
		})
	}
}

func wantNext(next time.Duration, change string) func(IntervalDecision) error {
	return func(d IntervalDecision) error {
		if d.Next != next || d.Change != change {
			return fmt.Errorf("want %s to %v", change, next)
		}
		return nil
	}
}

// From the first round: the floor for the first round and learnRounds
// more, a fifth to see the corrections steady, then doubling while quiet,
// and the ceiling at the tenth round; a network whose residual error stays large
// is held short, never below the floor.
func TestIntervalControllerStartAndFloor(t *testing.T) {
	c := NewIntervalController(testInterval)
	if c.Interval() != 8*time.Second {
		t.Fatalf("starts at %v, want the floor", c.Interval())
	}
	quiet := network{hosts: []string{"a", "b"}, noise: 2 * time.Microsecond}
	got := run(c, quiet, 11)
	want := []time.Duration{8, 8, 8, 8, 8, 16, 32, 64, 128, 240, 240}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("intervals %v, want %v s", got, want)
		}
	}
	// Residual 20 ppm (a slave that does not learn its frequency, as a
	// BSD daemon): each round 160 µs over 8 s, below a jump; the interval
	// goes to the floor and stays there, but for a probe of twice the
	// floor once the rounds that showed the growth are forgotten.
	bad := network{hosts: []string{"a", "b"}, noise: 2 * time.Microsecond, resid: 20}
	probes := 0
	for i, iv := range run(c, bad, 30) {
		if iv < testInterval.Floor {
			t.Fatalf("round %d: %v below the floor", i, iv)
		}
		if iv > testInterval.Floor {
			probes++
		}
		if i >= 1 && i <= 4 && iv != testInterval.Floor {
			t.Fatalf("round %d: %v, want the floor while learning after the jump", i, iv)
		}
		if iv > 2*testInterval.Floor {
			t.Fatalf("round %d: %v: 20 ppm of residual error let the interval grow", i, iv)
		}
	}
	if probes > 30/intervalHistory+1 {
		t.Fatalf("%d probes of a longer interval in 30 rounds", probes)
	}
}

// Noise above the target does not pin the rounds to the floor: only the
// part of the corrections that grows with the interval counts.
func TestIntervalControllerNoise(t *testing.T) {
	c := NewIntervalController(testInterval)
	noisy := network{hosts: []string{"a", "b", "c"}, noise: 45 * time.Microsecond, resid: 0.005}
	got := run(c, noisy, 16)
	if last := got[len(got)-1]; last != 240*time.Second {
		t.Fatalf("noisy but stable network: %v, want to reach the ceiling", got)
	}
}

// Floor at or above the ceiling: BSD's fixed rounds, whatever happens.
func TestIntervalControllerFixed(t *testing.T) {
	c := NewIntervalController(IntervalConfig{Floor: 240 * time.Second, Ceiling: 240 * time.Second})
	for _, r := range [][]HostCorrection{{{Host: "a", Correction: time.Second, New: true}}, {{Host: "a", Correction: 10 * time.Millisecond}}, nil} {
		if d := c.Round(0, r); d.Next != 240*time.Second {
			t.Fatalf("fixed rounds: %+v", d)
		}
	}
}

// The hosts remembered are those of the last rounds only: a stream of
// made-up names does not grow the table.
func TestIntervalControllerBounded(t *testing.T) {
	c := NewIntervalController(testInterval)
	for i := range 1000 {
		c.Round(0, []HostCorrection{{Host: fmt.Sprint("h", i)}, {Host: fmt.Sprint("g", i)}})
	}
	if n := len(c.seen); n > 2*(intervalHistory+1) {
		t.Fatalf("%d hosts remembered", n)
	}
	if c.Interval() != testInterval.Floor {
		t.Fatalf("a new host every round: %v, want the floor", c.Interval())
	}
}

// A residual frequency error the discipline does not remove (0.1 ppm:
// 24 µs over 240 s, beyond the 20 µs target): the interval settles where
// the predicted error fits the budget, below the ceiling, and stays there
// instead of going up to the ceiling and back down.
func TestIntervalControllerSettlesBelowCeiling(t *testing.T) {
	c := NewIntervalController(testInterval)
	drifting := network{hosts: []string{"a", "b", "c"}, noise: 2 * time.Microsecond, resid: 0.1}
	got := run(c, drifting, 30)
	for i, iv := range got[15:] {
		if iv < 32*time.Second || iv > 128*time.Second {
			t.Fatalf("round %d: %v; intervals %v, want them settled within [32 s, 128 s]", 15+i, iv, got)
		}
	}
}

// The controller judges the spread of a round's corrections (largest
// minus smallest), which is what the clocks' spread was before it: a
// correction common to every host (the network time moved them all)
// leaves the clocks together and does not shorten the rounds, where the
// same size split between two directions does.
func TestIntervalControllerSpreadOfCorrections(t *testing.T) {
	hosts := []string{"a", "b", "c", ""}
	quiet := network{hosts: hosts, noise: 3 * time.Microsecond, resid: 0.01}
	all := func(c func(i int) time.Duration) []HostCorrection {
		out := make([]HostCorrection, len(hosts))
		for i, h := range hosts {
			out[i] = HostCorrection{Host: h, Correction: c(i)}
		}
		return out
	}
	common := settled(t, testInterval, quiet).Round(240*time.Second, all(func(int) time.Duration { return 30 * time.Microsecond }))
	if common.Next != 240*time.Second || common.Change != "hold" {
		t.Fatalf("every host corrected by the same 30 µs: %+v, want to hold the ceiling", common)
	}
	split := settled(t, testInterval, quiet).Round(240*time.Second, all(func(i int) time.Duration {
		return time.Duration(1-2*(i%2)) * 15 * time.Microsecond
	}))
	if split.Change != "shorten" || split.Next >= 240*time.Second {
		t.Fatalf("hosts corrected by ±15 µs (30 µs apart): %+v, want shorter rounds", split)
	}
}

// Lengthening goes to the interval over which the fit predicts 70 % of
// the budget, at most twice the last: a network whose residual error
// allows more than 128 s but not 240 s settles in between, rather than
// holding at 128 s, and never goes where the fit predicts beyond the
// budget.
func TestIntervalControllerLengthensToFit(t *testing.T) {
	c := NewIntervalController(testInterval)
	drifting := network{hosts: []string{"a", "b", "c"}, noise: 2 * time.Microsecond, resid: 0.04}
	var got []time.Duration
	for range 30 {
		since := c.Interval()
		d := c.Round(since, drifting.round(since))
		got = append(got, d.Next)
		if d.Change == "lengthen" && d.Predicted > testInterval.Target*7/10 {
			t.Fatalf("lengthened to %v where %v is predicted: %+v", d.Next, d.Predicted, d)
		}
	}
	last := got[len(got)-1]
	if last <= 128*time.Second || last >= 240*time.Second {
		t.Fatalf("intervals %v: want to settle between 128 s and 240 s", got)
	}
}

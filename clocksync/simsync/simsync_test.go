package simsync

import (
	"fmt"
	"testing"
	"time"

	"github.com/timed-project/timed/clocksync"
)

// convergenceBound is the largest offset between two correctly working
// clocks the synchronisation loop (our settings) can leave, once the first
// three rounds are over.
//
// Derivation. Let ε bound a measurement's offset error. A probe's error is
// half the asymmetry of its two one-way delays, each in [DelayMin,
// DelayMax], so ε = (DelayMax − DelayMin)/2 whatever sample is kept.
//
//  1. Placement. In round k the master measures slave i at y_i + e_i
//     (|e_i| ≤ ε; e = 0 for the master itself), computes the network time a
//     and sends c_i = a − y_i − e_i, while moving itself by a. Every clock
//     lands at the same point C_k = master + a, slave i at C_k − e_i: the
//     error of a is common to all and cancels between any two clocks, so
//     right after a round |x_i − x_j| ≤ 2ε. A new slave is instead set by
//     SETTIME, which lands it at C_1 − d with d the one-way delay:
//     |e_set| ≤ DelayMax.
//  2. Drift. Let u_i be what clock i gains on the master over one interval
//     Δt at its current frequency setting. At round k+1 it is measured
//     with u_i accumulated, so c_i − a = e_i,k − u_i − e_i,k+1, and the
//     discipline (gain g_k: the running mean's 1, 1/2, … , 1/8 on every
//     clock, the master included, since all start together) gives
//     u_i ← (1 − g)·u_i + g·(e_i,k − e_i,k+1): |u| ≤ (1 − g)|u| + 2gε.
//     The first estimate (g = 1, round 2) leaves |u| ≤ |e_set| + ε ≤
//     DelayMax + ε; so with v = |u| − 2ε, v ≤ (DelayMax − ε)·Π(1 − g_j) =
//     (DelayMax − ε)/k after k estimates: U_k = 2ε + (DelayMax − ε)/k.
//     (Over 240 s rounds the discipline's trust in its mean against the
//     prior is w ≥ 0.99 from the first estimate, and the error that leaves
//     is corrected by the next; the runs stay far inside the bound.)
//  3. Between rounds two clocks part by at most 2ε + 2U_k. Sampling starts
//     after round 3, when k ≥ 2: 2ε + 2(2ε + (DelayMax − ε)/2) =
//     5ε + DelayMax. While corrections are being slewed, clocks move from
//     their pre- to their post-correction positions at the same 500 ppm, so
//     no intermediate value exceeds the larger of the two.
//  4. Add 1 µs per clock for the microsecond rounding of ADJTIME.
//
// With 50–150 µs delays: ε = 50 µs, bound = 250 + 150 + 2 = 402 µs. The
// typical spread is far lower (min-RTT selection makes the kept samples'
// errors much smaller than ε); the bound is what must never be exceeded.
func convergenceBound(c Config) time.Duration {
	c = c.withDefaults()
	eps := (c.DelayMax - c.DelayMin) / 2
	return 5*eps + c.DelayMax + 2*time.Microsecond
}

func TestConvergenceWithinDerivedBound(t *testing.T) {
	// Full 6 h runs where they are cheap; N = 50 with a fault over the
	// first 90 minutes (the step fault strikes after one hour), to keep the
	// race-detector run short.
	cases := []Config{
		{N: 10, Seed: 1}, {N: 10, Seed: 2}, {N: 10, Seed: 3},
		{N: 10, Seed: 1, Fault: FaultDrift}, {N: 10, Seed: 2, Fault: FaultStep},
		{N: 50, Seed: 1},
		{N: 50, Seed: 2, Fault: FaultDrift, Duration: 90 * time.Minute},
		{N: 50, Seed: 3, Fault: FaultStep, Duration: 90 * time.Minute},
	}
	for _, cfg := range cases {
		if testing.Short() && cfg.N > 10 {
			continue
		}
		r, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("N=%d fault=%v seed=%d", cfg.N, cfg.Fault, cfg.Seed)
		b := convergenceBound(cfg)
		if r.Max > b {
			t.Errorf("%s: largest offset %v beyond the derived bound %v", name, r.Max, b)
		}
		if r.Lost != 0 || r.Refused != 0 {
			t.Errorf("%s: %d corrections lost, %d refused", name, r.Lost, r.Refused)
		}
		d := cfg.withDefaults().Duration
		if want := int((d - 3*time.Second) / (240 * time.Second)); r.Rounds < want || len(r.Spread) < int(d/time.Second)-4*240 {
			t.Errorf("%s: %d rounds, %d samples", name, r.Rounds, len(r.Spread))
		}
		t.Logf("%s: p50 %v p99 %v max %v (bound %v), eps observed %v", name, r.P50, r.P99, r.Max, b, r.Eps)
	}
}

// BSD-equivalent settings stay at the TEMPO paper's order of magnitude
// (milliseconds to tens of milliseconds) in steady state.
func TestBSDSettings(t *testing.T) {
	r, err := Run(Config{N: 10, Seed: 1, BSD: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.P50 < time.Millisecond || r.P50 > 100*time.Millisecond {
		t.Fatalf("BSD settings: p50 %v", r.P50)
	}
}

func TestDeterministic(t *testing.T) {
	cfg := Config{N: 10, Seed: 42, Duration: time.Hour}
	a, _ := Run(cfg)
	b, _ := Run(cfg)
	if a.P50 != b.P50 || a.Max != b.Max || len(a.Spread) != len(b.Spread) {
		t.Fatalf("two runs differ: %v/%v vs %v/%v", a.P50, a.Max, b.P50, b.Max)
	}
}

func TestConfigErrors(t *testing.T) {
	if _, err := Run(Config{N: 1}); err == nil {
		t.Fatal("N = 1 accepted")
	}
	if _, err := Run(Config{DelayMin: time.Millisecond, DelayMax: time.Microsecond}); err == nil {
		t.Fatal("DelayMax < DelayMin accepted")
	}
}

func TestPercentile(t *testing.T) {
	s := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if Percentile(s, 0.5) != 5 || Percentile(s, 0.99) != 10 || Percentile(s, 0) != 1 || Percentile(nil, 0.5) != 0 {
		t.Fatal("percentiles")
	}
}

// TestNoisySlave: one slave's readings carry scheduling delays (in 30 % of
// the rounds every reply it sends leaves 2–4 ms after its timestamp was
// read, so that even the minimum-RTT sample is off by 1–2 ms, with an RTT
// to match). The network neither follows those readings (no two clocks,
// the noisy slave's included, are further apart than the derived bound of
// a clean network) nor drifts in frequency (the mean frequency setting
// moves by less than 2 ppm once the first estimates are in). Without the
// master's outlier handling the same runs fail both (the scenario bites).
func TestNoisySlave(t *testing.T) {
	noisy := Sched{Prob: 0.3, Max: 4 * time.Millisecond}
	cases := []Config{
		{N: 10, Seed: 1}, {N: 10, Seed: 2}, {N: 10, Seed: 3},
		{N: 50, Seed: 1, Duration: 90 * time.Minute},
		{N: 10, Seed: 1, Interval: 4 * time.Second, Duration: 20 * time.Minute}, // the fast profile
	}
	for _, cfg := range cases {
		if testing.Short() && cfg.N > 10 {
			continue
		}
		cfg.Noisy = noisy
		name := fmt.Sprintf("N=%d seed=%d interval=%v", cfg.N, cfg.Seed, cfg.withDefaults().Interval)
		r, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b := convergenceBound(cfg)
		if r.Max > b {
			t.Errorf("%s: largest offset %v beyond the clean network's bound %v: the noisy readings were followed", name, r.Max, b)
		}
		if r.FreqWanderPPM > 2 {
			t.Errorf("%s: the network's mean frequency moved by %.2f ppm", name, r.FreqWanderPPM)
		}
		t.Logf("%s: p50 %v p99 %v max %v (bound %v), frequency wander %.2f ppm", name, r.P50, r.P99, r.Max, b, r.FreqWanderPPM)
	}
	cfg := Config{N: 10, Seed: 1, Interval: 4 * time.Second, Duration: 20 * time.Minute, Noisy: noisy, FilterOff: true}
	if r, _ := Run(cfg); r.Max <= convergenceBound(cfg) || r.FreqWanderPPM <= 2 {
		t.Errorf("without outlier handling: max %v, wander %.2f ppm: the scenario does not bite", r.Max, r.FreqWanderPPM)
	}
}

// TestNoFrequencyRunaway is the regression: in the fast profile
// (4 s rounds), with clocks starting ±0.5 s apart and half the datagrams
// leaving up to 2 ms after their timestamps were read (CPU contention),
// the first frequency estimates after the start's steps were taken whole
// and set clocks hundreds of ppm off (simsync measured a 453–501 ppm
// spread of rates at round 3, against 194 ppm of natural drifts). No
// clock's rate may now get further from another's than the natural drifts
// already are (2 × MaxDriftPPM), at any round.
func TestNoFrequencyRunaway(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		cfg := Config{N: 50, Seed: seed, Interval: 4 * time.Second, Duration: 10 * time.Minute,
			MaxOffset: 500 * time.Millisecond, Sched: Sched{Prob: 0.5, Max: 2 * time.Millisecond}}
		if testing.Short() {
			cfg.N = 20
		}
		worst := 0.0
		cfg.Trace = func(r RoundTrace) { worst = max(worst, r.FreqSpreadPPM) }
		if _, err := Run(cfg); err != nil {
			t.Fatal(err)
		}
		if limit := 2 * cfg.withDefaults().MaxDriftPPM; worst > limit {
			t.Errorf("seed %d: clocks' rates %.1f ppm apart, beyond the natural drifts' %v ppm", seed, worst, limit)
		}
	}
}

// The adaptive probe count: two or three probes and replies per slave
// (the stop at two replies, once a kernel-stamped sample is at the
// path's floor, applies where the delays let one be), plus ADJTIME and
// ACK (and the retries 1 % loss costs), where the fixed count of 12
// replies costs 26. The accuracy of both is BenchmarkSync's figure; the
// convergence bound holds for both.
func TestAdaptivePackets(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		cfg := Config{N: 10, Seed: seed, Duration: time.Hour}
		ours, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.FixedCount = true
		fixed, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: %.2f packets per slave per round adaptive, %.2f fixed", seed, ours.PerSlaveRound, fixed.PerSlaveRound)
		if ours.PerSlaveRound < 6 || ours.PerSlaveRound > 9 || fixed.PerSlaveRound < 26 {
			t.Errorf("seed %d: %.2f packets per slave per round adaptive, %.2f fixed", seed, ours.PerSlaveRound, fixed.PerSlaveRound)
		}
		for _, r := range []Result{ours, fixed} {
			if b := convergenceBound(cfg); r.Max > b {
				t.Errorf("seed %d: largest offset %v beyond the bound %v", seed, r.Max, b)
			}
		}
	}
}

// Wandering clocks (typical crystals) still converge and stay within a
// few hundred µs over 240 s rounds; the run is deterministic for a seed
// and differs from the constant-drift run of the same seed.
func TestWanderingClocks(t *testing.T) {
	base := Config{N: 10, Seed: 4, Duration: 2 * time.Hour}
	wander := base
	wander.Osc = clocksync.TypicalOscillator(1)
	a, err := Run(wander)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Run(wander)
	c, _ := Run(base)
	if a.P99 != b.P99 || a.Max != b.Max || a.Packets != b.Packets {
		t.Fatalf("one seed, two runs: %+v / %+v", a, b)
	}
	if a.P99 == c.P99 && a.Max == c.Max {
		t.Fatalf("the oscillator changed nothing: p99 %v, max %v", a.P99, a.Max)
	}
	if a.Converged < 0 || a.P99Late > time.Millisecond {
		t.Fatalf("wandering clocks: converged %d, p99 late %v; want converged, under 1 ms", a.Converged, a.P99Late)
	}
}

// Adaptive rounds (floor 8 s, ceiling 240 s) on wandering clocks: the
// spread is under 1 ms from the first round (3 s) on, where fixed 240 s
// rounds take until the second (243 s); the rounds reach the ceiling, and
// in the last two thirds of the run they send no more packets than fixed
// rounds do (within 20 %), for a spread no worse (within 20 %).
func TestAdaptiveRounds(t *testing.T) {
	base := Config{N: 10, Seed: 2, Duration: 30 * time.Minute, MaxOffset: 500 * time.Millisecond, MaxDriftPPM: 43,
		Osc: clocksync.TypicalOscillator(1), SkipRounds: 1}
	adaptive := base
	adaptive.Floor = 8 * time.Second
	a, err := Run(adaptive)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := Run(base)
	t.Logf("adaptive: <1 ms from %v, <100 µs from %v, p95 late %v, %.2f packets/slave/min (late %.2f), rounds %v",
		a.ConvergedAt, a.Below100At, a.P95Late, a.PerSlaveMinute, a.PerSlaveMinuteLate, a.Intervals)
	t.Logf("fixed:    <1 ms from %v, <100 µs from %v, p95 late %v, %.2f packets/slave/min (late %.2f)",
		f.ConvergedAt, f.Below100At, f.P95Late, f.PerSlaveMinute, f.PerSlaveMinuteLate)
	if a.Converged < 0 || a.ConvergedAt > 10*time.Second {
		t.Errorf("adaptive: spread under 1 ms for good only from %v (converged %d), want within 10 s", a.ConvergedAt, a.Converged)
	}
	if f.ConvergedAt < 240*time.Second {
		t.Errorf("fixed 240 s rounds under 1 ms from %v: the scenario no longer shows what adaptive rounds gain", f.ConvergedAt)
	}
	if a.Intervals[240*time.Second] == 0 {
		t.Errorf("adaptive rounds never reached the ceiling: %v", a.Intervals)
	}
	if a.PerSlaveMinuteLate > 1.2*f.PerSlaveMinuteLate {
		t.Errorf("adaptive: %.2f packets/slave/min late in the run, fixed %.2f", a.PerSlaveMinuteLate, f.PerSlaveMinuteLate)
	}
	if a.P95Late > f.P95Late*6/5 {
		t.Errorf("adaptive: p95 %v late in the run, fixed %v", a.P95Late, f.P95Late)
	}
}

// A fast temperature cycle (±1 ppm over 30 min, an air conditioner's
// rather than the day's): fixed 240 s rounds leave the frequency
// discipline's lag in the spread (hundreds of µs), adaptive rounds shorten
// to hold it within tens of µs, at the cost of more packets.
func TestAdaptiveRoundsTemperature(t *testing.T) {
	base := Config{N: 5, Seed: 1, Duration: time.Hour, MaxOffset: 500 * time.Millisecond, MaxDriftPPM: 43, SkipRounds: 1,
		Osc: clocksync.Oscillator{WanderPPM: 0.03, TempPPM: 1, TempPeriod: 30 * time.Minute, Seed: 1}, DelayMin: 50 * time.Microsecond, DelayMax: 60 * time.Microsecond}
	adaptive := base
	adaptive.Floor = 8 * time.Second
	a, _ := Run(adaptive)
	f, _ := Run(base)
	t.Logf("adaptive: p95 %v, max %v late in the run, %.1f packets/slave/min, rounds %v", a.P95Late, a.MaxLate, a.PerSlaveMinuteLate, a.Intervals)
	t.Logf("fixed:    p95 %v, max %v, %.1f packets/slave/min", f.P95Late, f.MaxLate, f.PerSlaveMinuteLate)
	if a.P95Late*4 > f.P95Late {
		t.Errorf("adaptive p95 %v, fixed %v: want adaptive four times better at least", a.P95Late, f.P95Late)
	}
	short := 0
	for iv, n := range a.Intervals {
		if iv < 64*time.Second {
			short += n
		}
	}
	if short < a.Rounds/2 {
		t.Errorf("adaptive: %d of %d rounds under 64 s (%v): the temperature did not shorten them", short, a.Rounds, a.Intervals)
	}
}

// TestMasterCrash: the master dies half-way and host01 takes over, new to
// every slave. The slaves are synchronised: the new master measures them
// and sends each the measured ADJTIME, so no clock is stepped or set
// (which would restart its frequency estimate), and the surviving clocks
// stay within the clean network's bound (convergenceBound) on a quiet
// LAN, and within 500 µs, half the 1 ms the rounds aim under, when half
// the datagrams leave up to 2 ms after their stamps were read (CPU
// contention). With BSD's need_set (SetNewSlaves: SETTIME to every slave
// new to the master, ours before) the contended runs part the clocks by
// more than 1 ms: a SETTIME carries the time read before the write and
// the transit, uncorrected (the scenario bites).
func TestMasterCrash(t *testing.T) {
	contention := Sched{Prob: 0.5, Max: 2 * time.Millisecond}
	cases := []struct {
		cfg   Config
		bound time.Duration
		bites bool
	}{
		{Config{Duration: 2 * time.Hour}, convergenceBound(Config{}), false},
		{Config{Duration: 2 * time.Hour, Floor: 8 * time.Second}, convergenceBound(Config{}), false},
		{Config{Duration: 2 * time.Hour, Sched: contention}, 500 * time.Microsecond, true},
		{Config{Duration: 30 * time.Minute, Interval: 4 * time.Second, Sched: contention}, 500 * time.Microsecond, true}, // the fast profile
	}
	for _, c := range cases {
		for seed := uint64(1); seed <= 3; seed++ {
			cfg := c.cfg
			cfg.N, cfg.Seed, cfg.MasterCrashAt = 10, seed, cfg.Duration/2
			name := fmt.Sprintf("interval=%v floor=%v contention=%v seed=%d", cfg.withDefaults().Interval, cfg.Floor, cfg.Sched.Max, seed)
			r, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.StepsAfterCrash != 0 || r.SetsAfterCrash != 0 {
				t.Errorf("%s: after the crash %d steps, %d SETTIMEs: a synchronised slave was moved by more than its measurement", name, r.StepsAfterCrash, r.SetsAfterCrash)
			}
			if r.MaxAfterCrash > c.bound {
				t.Errorf("%s: the surviving clocks parted by %v after the crash, beyond %v", name, r.MaxAfterCrash, c.bound)
			}
			t.Logf("%s: after the crash max spread %v (bound %v)", name, r.MaxAfterCrash, c.bound)
			if !c.bites {
				continue
			}
			cfg.SetNewSlaves = true
			if old, _ := Run(cfg); old.MaxAfterCrash <= time.Millisecond || old.SetsAfterCrash == 0 {
				t.Errorf("%s: with SETTIME to the new master's slaves max %v, %d SETTIMEs: the scenario does not bite", name, old.MaxAfterCrash, old.SetsAfterCrash)
			}
		}
	}
}

// The defaults on the jittery network (one-way delays 50–150 µs, whose
// asymmetry no measurement can see), 20 wandering clocks for an hour, as
// BenchmarkDefaults' "jittery" row (virtual time, one seed: the run is
// the same every time): the adaptive rounds never go below the floor, the
// spread stays under 1 ms from the first round and within the loop's
// derived bound once steady, and the packets stay within BSD's budget (3
// per slave a minute once steady, twice that over the hour).
func TestDefaultsJittery(t *testing.T) {
	cfg := Config{N: 20, Seed: 1, Duration: time.Hour, Interval: 240 * time.Second, Floor: clocksync.DefaultIntervalFloor,
		Target: clocksync.DefaultIntervalTarget, MaxOffset: 500 * time.Millisecond, MaxDriftPPM: 43,
		Osc: clocksync.TypicalOscillator(1), SkipRounds: 1, DelayMin: 50 * time.Microsecond, DelayMax: 150 * time.Microsecond}
	r, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("<1 ms from %v, p95 late %v, max late %v, %.2f packets/slave/min (late %.2f), rounds %v",
		r.ConvergedAt, r.P95Late, r.MaxLate, r.PerSlaveMinute, r.PerSlaveMinuteLate, r.Intervals)
	for iv := range r.Intervals {
		if iv < clocksync.DefaultIntervalFloor || iv > cfg.Interval {
			t.Errorf("a round of %v, outside [%v, %v]: %v", iv, clocksync.DefaultIntervalFloor, cfg.Interval, r.Intervals)
		}
	}
	if r.Converged < 0 || r.ConvergedAt > 10*time.Second {
		t.Errorf("spread under 1 ms for good only from %v (converged %d), want within 10 s", r.ConvergedAt, r.Converged)
	}
	if b := convergenceBound(cfg); r.MaxLate > b {
		t.Errorf("steady spread up to %v, beyond the derived bound %v", r.MaxLate, b)
	}
	if r.PerSlaveMinuteLate > 3 || r.PerSlaveMinute > 6 {
		t.Errorf("%.2f packets per slave a minute once steady (BSD 3), %.2f over the hour (twice BSD: 6)", r.PerSlaveMinuteLate, r.PerSlaveMinute)
	}
	if r.Lost != 0 || r.Refused != 0 {
		t.Errorf("%d corrections lost, %d refused", r.Lost, r.Refused)
	}
}

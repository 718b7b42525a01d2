package simsync

import (
	"fmt"
	"testing"
	"time"

	"github.com/timed-project/timed/clocksync"
)

// BenchmarkSync runs the scenario — offsets uniform in ±1 s, drifts
// in ±100 ppm, one-way delays 50–150 µs, 1 % loss, 240 s rounds, 6 h of
// virtual time — and reports the largest offset between any two clocks
// (the faulty node excluded), p50/p99/max over the samples taken every
// second after the first 3 rounds, and the packets per slave per sync
// round (probes, replies, ADJTIME or SETTIME and its retries, ACKs):
// (a) BSD-equivalent settings, (b) ours as before the adaptive count
// (12 replies, the minimum-RTT sample), (c) ours.
// p99-last4h is the steady state: BSD slaves slew the initial ±1 s for
// over an hour, which dominates BSD's p99 over the whole run.
// Target for ours: p99 ≤ 100 µs (the TEMPO paper reports 20 ms), and
// ≤ 8 packets per slave per round (BSD: about 12, 5 ICMP timestamp
// request/reply pairs, ADJTIME and ACK).
//
// One iteration is one 6 h simulation; ns/op is its cost.
func BenchmarkSync(b *testing.B) {
	modes := []struct {
		name       string
		bsd, fixed bool
	}{{"bsd", true, false}, {"ours-12", false, true}, {"ours", false, false}}
	for _, n := range []int{10, 50} {
		for _, md := range modes {
			for _, f := range []Fault{FaultNone, FaultDrift, FaultStep} {
				b.Run(fmt.Sprintf("N=%d/%s/fault=%v", n, md.name, f), func(b *testing.B) {
					r := runEach(b, Config{N: n, Seed: 1, BSD: md.bsd, FixedCount: md.fixed, Fault: f})
					b.ReportMetric(us(r.P50), "p50-µs")
					b.ReportMetric(us(r.P99), "p99-µs")
					b.ReportMetric(us(r.Max), "max-µs")
					b.ReportMetric(us(r.P99Late), "p99-last4h-µs")
					b.ReportMetric(r.PerSlaveRound, "pkts/slave/round")
					b.Logf("| N=%-2d | %-7s | fault %-5v | p50 %12v | p99 %12v | max %12v | p99 last 4 h %12v | %5.2f packets/slave/round (BSD ≈ 12) |",
						n, md.name, f, r.P50, r.P99, r.Max, r.P99Late, r.PerSlaveRound)
				})
			}
		}
	}
}

// BenchmarkConverge measures the convergence: clocks start within
// ±0.5 s (drifts ±100 ppm), and the figure is the number of sync rounds
// after which the spread stays below 1 ms for good (Result.Converged;
// "never" if it was not below at the end), and the time from the start.
// Five seeds each; mean and worst. Networks: clean (50–150 µs one-way)
// and contended (half the datagrams leave up to 2 ms after their
// timestamp was read, as under CPU contention, SETTIME's included).
// Intervals: the fast profile's 4 s, BSD's 240 s. BSD-equivalent settings
// beside ours. Goal (issue 15): within 2 rounds.
//
// Before issue 15's changes (same scenarios, the discipline's gain
// schedule 1, 1/2, …, 1/8 taken from the first estimate, no outlier
// handling, no makestep): fast/contended took 3 rounds at N = 20 and 4–5
// at N = 50; 240 s/clean 2 rounds, 282–302 s; 240 s/contended 3 and 4–5.
func BenchmarkConverge(b *testing.B) {
	nets := []struct {
		name  string
		sched Sched
	}{{"clean", Sched{}}, {"contended", Sched{Prob: 0.5, Max: 2 * time.Millisecond}}}
	for _, n := range []int{20, 50} {
		for _, iv := range []time.Duration{4 * time.Second, 240 * time.Second} {
			for _, nw := range nets {
				for _, bsd := range []bool{true, false} {
					mode := "ours"
					if bsd {
						mode = "bsd"
					}
					b.Run(fmt.Sprintf("N=%d/interval=%v/%s/%s", n, iv, nw.name, mode), func(b *testing.B) {
						var rounds, worst, never int
						var at time.Duration
						const seeds = 5
						for b.Loop() {
							rounds, worst, never, at = 0, 0, 0, 0
							for seed := range uint64(seeds) {
								r, err := Run(Config{N: n, Seed: seed + 1, BSD: bsd, Interval: iv, Duration: 60 * iv,
									MaxOffset: 500 * time.Millisecond, Sched: nw.sched})
								if err != nil {
									b.Fatal(err)
								}
								if r.Converged < 0 {
									never++
									continue
								}
								rounds += r.Converged
								worst = max(worst, r.Converged)
								at += r.ConvergedAt
							}
						}
						if never > 0 {
							b.ReportMetric(float64(never), "never-of-5")
							b.Logf("| N=%-2d | %-5v | %-9s | %-4s | spread < 1 ms: never, in %d of %d runs |", n, iv, nw.name, mode, never, seeds)
							return
						}
						b.ReportMetric(float64(rounds)/seeds, "rounds-mean")
						b.ReportMetric(float64(worst), "rounds-worst")
						b.ReportMetric((at / seeds).Seconds(), "s-mean")
						b.Logf("| N=%-2d | %-5v | %-9s | %-4s | spread < 1 ms for good after %.1f rounds (worst %d), %.0f s |",
							n, iv, nw.name, mode, float64(rounds)/seeds, worst, (at / seeds).Seconds())
					})
				}
			}
		}
	}
}

// BenchmarkNoisySlave: TestNoisySlave's scenario (in 30 % of the rounds
// the first slave's replies all leave 2–4 ms after their timestamps) over
// the default 6 h, the spread's p50/p99/max and how far the network's mean
// frequency moved: ours, ours without the master's outlier handling (the
// master took every reading in full before issue 15), and BSD-equivalent
// settings.
func BenchmarkNoisySlave(b *testing.B) {
	for _, n := range []int{10, 50} {
		for _, mode := range []string{"bsd", "ours-no-filter", "ours"} {
			b.Run(fmt.Sprintf("N=%d/%s", n, mode), func(b *testing.B) {
				cfg := Config{N: n, Seed: 1, BSD: mode == "bsd", FilterOff: mode == "ours-no-filter",
					Noisy: Sched{Prob: 0.3, Max: 4 * time.Millisecond}}
				r := runEach(b, cfg)
				b.ReportMetric(us(r.P50), "p50-µs")
				b.ReportMetric(us(r.P99), "p99-µs")
				b.ReportMetric(us(r.Max), "max-µs")
				b.ReportMetric(r.FreqWanderPPM, "freq-wander-ppm")
				b.Logf("| N=%-2d | %-14s | p50 %12v | p99 %12v | max %12v | p99 last 4 h %12v | frequency wander %.2f ppm |",
					n, mode, r.P50, r.P99, r.Max, r.P99Late, r.FreqWanderPPM)
			})
		}
	}
}

// Profiles is BenchmarkDefaults' settings: the defaults (adaptive
// rounds, 8 s up to 240 s, target 20 µs), the fast profile (fixed 4 s
// rounds), BSD-equivalent settings (fixed 240 s rounds, no discipline,
// 5 ms rounding), and ours with fixed 240 s rounds (the defaults before
// adaptive rounds).
var Profiles = []struct {
	Name string
	Cfg  Config
}{
	{"defaults", Config{Interval: 240 * time.Second, Floor: clocksync.DefaultIntervalFloor, Target: clocksync.DefaultIntervalTarget}},
	{"fast", Config{Interval: 4 * time.Second}},
	{"bsd", Config{Interval: 240 * time.Second, BSD: true}},
	{"fixed-240s", Config{Interval: 240 * time.Second}},
}

// BenchmarkDefaults is issue 20's scenario in virtual time: N daemons
// start at once, clocks ±0.5 s and ±43 ppm apart, each wandering as a
// typical crystal (clocksync.TypicalOscillator: random walk of 0.03 ppm
// Allan deviation at 1000 s, ±1 ppm over 24 h), for 60 simulated
// minutes, 1 % loss. It prints, for the defaults first and the fast
// profile and BSD-equivalent settings beside them (and ours with fixed
// 240 s rounds, the defaults before adaptive rounds): when the spread
// fell under 1 ms and under 100 µs for good, its p95 and max over the
// last 40 minutes (the steady state), and packets per slave per minute
// (probes, replies, corrections, ACKs) over the first hour and over its
// last 40 minutes. BSD's budget: 5 ICMP timestamp pairs, ADJTIME and
// ACK, 12 packets a 240 s round, 3 a minute. The spread is sampled every second from the end of
// the first round.
//
// Two networks: "lan", one-way delays of 50–60 µs (the jitter of kernel
// timestamps on a quiet bridge: the fast profile's 4–7 µs here is what
// `make bench-net` measures on real namespaces), and "jittery", 50–150
// µs (simsync's default), whose asymmetric delays bound every profile's
// steady spread at tens of µs.
func BenchmarkDefaults(b *testing.B) {
	nets := []struct {
		name     string
		min, max time.Duration
	}{{"lan", 50 * time.Microsecond, 60 * time.Microsecond}, {"jittery", 50 * time.Microsecond, 150 * time.Microsecond}}
	for _, nw := range nets {
		for _, n := range []int{5, 20, 50, 150} {
			for _, p := range Profiles {
				b.Run(fmt.Sprintf("%s/N=%d/%s", nw.name, n, p.Name), func(b *testing.B) {
					cfg := p.Cfg
					cfg.N, cfg.Seed, cfg.Duration = n, 1, time.Hour
					cfg.MaxOffset, cfg.MaxDriftPPM, cfg.Osc, cfg.SkipRounds = 500*time.Millisecond, 43, clocksync.TypicalOscillator(1), 1
					cfg.DelayMin, cfg.DelayMax = nw.min, nw.max
					r := runEach(b, cfg)
					b.ReportMetric(r.ConvergedAt.Seconds(), "s-to-1ms")
					b.ReportMetric(r.Below100At.Seconds(), "s-to-100µs")
					b.ReportMetric(us(r.P95Late), "p95-µs")
					b.ReportMetric(us(r.MaxLate), "max-µs")
					b.ReportMetric(r.PerSlaveMinute, "pkts/slave/min")
					b.ReportMetric(r.PerSlaveMinuteLate, "pkts/slave/min-steady")
					never := func(d time.Duration, ok bool) string {
						if !ok {
							return "not for good"
						}
						return d.String()
					}
					b.Logf("| %-7s | N=%-2d | %-10s | < 1 ms %12s | < 100 µs %12s | steady p95 %10v | max %10v | %6.2f packets/slave/min (steady %6.2f) | rounds %3d |",
						nw.name, n, p.Name, never(r.ConvergedAt, r.Converged >= 0), never(r.Below100At, r.Below100At > 0),
						r.P95Late.Round(100*time.Nanosecond), r.MaxLate.Round(100*time.Nanosecond), r.PerSlaveMinute, r.PerSlaveMinuteLate, r.Rounds)
				})
			}
		}
	}
}

// runEach runs cfg once per benchmark iteration and returns the last
// result (every run of a seed is the same).
func runEach(b *testing.B, cfg Config) Result {
	b.Helper()
	var r Result
	for b.Loop() {
		var err error
		if r, err = Run(cfg); err != nil {
			b.Fatal(err)
		}
	}
	return r
}

// us is d in microseconds, for ReportMetric.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

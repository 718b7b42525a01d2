package simsync

import (
	"fmt"
	"testing"
	"time"
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
					var r Result
					for b.Loop() {
						var err error
						if r, err = Run(Config{N: n, Seed: 1, BSD: md.bsd, FixedCount: md.fixed, Fault: f}); err != nil {
							b.Fatal(err)
						}
					}
					us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
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
				var r Result
				for b.Loop() {
					var err error
					if r, err = Run(cfg); err != nil {
						b.Fatal(err)
					}
				}
				us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
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

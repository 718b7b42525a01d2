// Package clocksync owns everything TEMPO does with time once a master has
// been elected: the clocks a daemon reads and corrects, the measurement of
// remote clocks, the fault-tolerant network time, the corrections the master
// sends, the slave's frequency discipline and the date path.
//
// # What it owns
//
//   - Clock: the one interface the daemon uses to read, slew, step and
//     re-tune a clock, with three implementations: the host's system clock
//     (Linux adjtimex), a simulated clock with its own offset and drift, and a
//     dry-run clock that never touches anything. ParseClock turns the
//     `--clock` flag into one of them.
//   - Measurement: the Measurer interface; a nanosecond probe carried as a
//     TSP version-2 extension (tsp.ExtProbe / tsp.ExtProbeReply, ignored by
//     BSD daemons) whose payload (t1, t2, t3) is defined in probe.go, sent
//     over a small PacketConn interface (UDPConn, with kernel receive
//     timestamps, is one); the minimum-RTT sample of several is kept, offset
//     ((t2−t1)+(t3−t4))/2, error bound RTT/2. An ICMP timestamp measurer
//     (RFC 792, as BSD's measure.c; needs CAP_NET_RAW) serves BSD slaves,
//     which do not answer the probe. MeasureRound measures a round's
//     hosts concurrently inside its deadline, each with its own (a host
//     silent last round is given up after a few probes' waits).
//   - Network time (networktime.go): BSD's two-stage median (networkdelta.c)
//     and our variant.
//   - Corrections (correct.go): the master's ADJTIME/SETTIME choice and the
//     slave's application of a correction, with the max-step alarm.
//   - Frequency discipline (discipline.go) and the date path (date.go), both
//     as pure logic the daemon calls.
//   - Adaptive sync rounds (interval.go): IntervalController, pure, chooses
//     the interval between a master's rounds from their corrections.
//   - clocksync/simsync: the measure → network time → correct loop among
//     simulated clocks in virtual time, for tests and `make bench`.
//
// # What it must never do
//
//   - It never sends or receives on the network by itself, except through
//     the PacketConn a caller hands it, the ICMP socket a caller asks for,
//     and the loopback sockets of its tests.
//   - It never changes the host's clock except through SystemClock, which the
//     daemon creates only when `--clock=system` is asked for. No test in this
//     package writes the host's clock: SystemClock's tests call adjtimex with
//     modes = 0 only, or a fake syscall.
//   - It never moves the clock by more than the configured max-step
//     (default 1000 s) at once, except when the operator asks
//     (Applier.Step). Larger corrections put the Applier in alarm: they are
//     refused and logged as errors, unless they lead towards network time,
//     and then the clock moves by max-step, at most once a round.
//   - It never panics on bad input: decoders and parsers return errors.
//
// # Network time: BSD semantics and our improvement
//
// BSD's networkdelta (facts §4) takes the master's own offset (0) and the
// offsets of every trusted, responsive slave; finds their median; keeps the
// hosts within 14 ms of it (6 ms for untrusted hosts, which do not vote in the
// first stage); and returns the median of those. If only the master is left
// the result is 0: the master never chases the others. NetworkTimeBSD
// reproduces this with an exact median in place of BSD's iterative
// estimator (which converges to a point between the two middle values).
//
// NetworkTime keeps the same first stage and the same exclusion windows, so a
// clock far from the majority — the paper's faulty clock — still cannot pull
// the result, but in the second stage it takes the mean of the kept offsets
// weighted by the inverse square of each measurement's error bound (RTT/2,
// floored at MinErrorBound). A sample measured over a fast, symmetric path
// counts for more than one measured over a slow or congested one, and for
// noise of one shape the mean's spread is about 20 % smaller than the
// median's (its variance π/2 times smaller for Gaussian noise). The
// windows have already removed the outliers the median guards against.
//
// It also bounds what one host can do (NetworkOptions.MaxSourceInfluence,
// 50 ms by default): in a network of the master and one slave the median
// is their midpoint, so a slave set 990 s off by one forged SETTIME moved
// BSD's network time, and every clock with it, by 495 s. Ours stays within
// the bound of what it would be without any one disagreeing host.
//
// # Corrections: BSD semantics and our changes
//
// PlanCorrection is BSD's correct(): ADJTIME(network − slave) for known
// slaves, SETTIME(master's now + network) for new slaves and for corrections
// at or above the step threshold (20 s). Three changes, all optional:
//
//   - New slaves near the network time (CorrectOptions.AdjustNewBelow, the
//     slaves' slewing range) get the measured ADJTIME: after a master
//     change every slave is new to the new master, and a SETTIME, whose
//     time is uncorrected for the transit delay, moved them all by it and
//     restarted their frequency estimates (simsync's TestMasterCrash).
//   - Rounding: BSD rounds ADJTIME to 5 ms (mstotvround); ours keeps the
//     microsecond TSP carries (CorrectOptions.Rounding).
//   - Retries: BSD's acksend re-sends the same SETTIME bytes, so a copy sent
//     after a lost one carries a time 200 ms (or more) stale. PacketAfter
//     re-stamps each copy with the time elapsed since planning.
//
// The Applier applies corrections on both sides (a slave's ADJTIME and
// SETTIME, the master's own share): it slews below its step threshold and
// steps at or above it. Our settings step already at SlewStepThreshold
// (100 ms): what adjtime's 500 ppm cannot slew well within one 240 s round
// is stepped rather than dragged over several rounds.
//
// Beyond max-step (default 1000 s; ntpd's panic threshold, chrony's
// maxchange) the Applier is in alarm, which the daemon shows. BSD has no
// such limit; a plain refusal, as ntpd's, would wedge a slave that forged
// corrections (each within max-step) had pushed far off: the master's
// correction home would be refused for ever. So in alarm the Applier still
// takes a correction towards network time, by max-step at most once a
// RecoveryInterval (about a round); it refuses, logging an error, one
// that leads away. With only the correction and its own past to go by, it
// counts as towards if it undoes the Applier's recent steps (returns the
// clock to within 20 s of where it was before them), or if a correction
// the same way was already asked for in this alarm (the master repeats
// itself every round; a forged packet must be repeated, and then gains no
// more than max-step a round, as one within max-step would). Applier.Step,
// the operator's step, ignores max-step and ends the alarm.
//
// # Frequency discipline
//
// BSD only corrects phase: a clock drifting by 100 ppm is 24 ms off again at
// every 240 s round. Discipline (discipline.go) estimates each clock's
// frequency error from successive corrections (correction / interval) and sets
// the clock's frequency, so that between rounds the offset grows only with the
// residual error of that estimate. Setting Discipline off gives BSD's
// behaviour. Rates are averaged over their baselines and trusted against a
// prior (±100 ppm) only as far as the baseline earns: a phase error ε over
// an interval T is ε/T of rate error, 250 ppm for 1 ms over the fast
// profile's 4 s.
//
// # Why convergence took 5–7 rounds, and what changed
//
// Measured with simsync (N = 50, clocks ±0.5 s and ±100 ppm apart, 4 s
// rounds, half the datagrams leaving up to 2 ms after their timestamps were
// read, as under the CPU contention of the real-daemon runs), at
// the start of each round, before issue 15's changes:
//
//	round             1       2        3        4        5        6       7
//	spread         977 ms  2.57 ms  1.97 ms  1.11 ms  1.12 ms  0.89 ms 0.45 ms
//	rates apart     194     194      502      263      196      137     101  ppm
//	slew pending      0       0        0        0        0        0       0
//
// Not slewing: nothing was left to slew when a round began (below the
// daemon's local step threshold, 2 ms in 4 s rounds, slews finish within
// the round; above it, clocks step). Not averaging lag: each round's
// network time is computed afresh. The frequency loop: the first rate
// estimate, read over the 4 s after the start's steps, was taken at full
// weight, and those steps had left clocks 1–2 ms off (SETTIME's one-way
// delay is not corrected, and the contended timestamps add to it): clocks
// were set up to 500 ppm apart, 2.5 times their natural drifts, and the
// gain schedule 1, 1/2, 1/3, … then took the error down only as 1/k, 2 ms
// a round, then 1, then 0.8: 4–5 rounds before the spread stayed below
// 1 ms (3 at N = 20). Without contention the first estimate was good and
// one round sufficed, which is why the simulator had not shown it.
//
// Now (BenchmarkConverge): 2 rounds at N = 20, 2–3 at N = 50 (8–9 s) in
// the same scenario; the rates stay within their natural spread
// (TestNoFrequencyRunaway). Over 240 s rounds makestep (Applier.MakeStep)
// steps the 46 ms the clocks drift apart before the second round, which
// slewing took 40–60 s more (converged at 244 s against 282–302 s). What
// remains: under the same contention, 240 s rounds still take 3–5 rounds,
// because the first rate estimate is read against the SETTIME the start
// sends every new slave, whose up-to-2 ms one-way error is 8 ppm over
// 240 s, 2 ms a round; with a measured ADJTIME in the first round instead
// (an election change), the simulator gives 2 rounds there too.
//
// # Simulated oscillators
//
// A real crystal's frequency is not constant. SimClock's Oscillator adds
// to the constant drift a random walk of the frequency and a periodic
// (temperature) term; without them ("sim:offset=…,drift=…") the drift is
// constant and the arithmetic exact, as the tests of exact values need.
// The typical values, which benchmarks use (TypicalOscillator), are those
// of commodity PC and server crystals as NTP users measured them:
//
//   - Temperature: Mills (Computer Network Time Synchronization, ch.
//     "Clock discipline algorithm"): commodity computers do not control
//     the crystal's temperature, "so the oscillator frequency may vary
//     over a few parts per million, in the normal course of a day";
//     ntp:questions, February 2012 ("Frequency Offset"): temperature
//     sensitivity "usually less than 1 ppm per °C", and three PCs in one
//     room varying by ±0.7 ppm (−1.5 ppm one day), −0.2…+0.1 ppm and
//     ±0.01 ppm; Meinberg's knowledge base ("Frequency Offset and
//     Drift"): the day/night cycle, air conditioning and CPU load move
//     the crystal's temperature. TypicalTempPPM is ±1 ppm over 24 h.
//   - Random walk: chrony.conf(5) assumes by default that a clock's
//     frequency changes by up to 1 ppm between updates on its own
//     (maxclockerror; 10 for a poor clock, 0.1 for an OCXO); time-nuts,
//     August 2010 ("pc clock crystal long term variations"): a PC crystal
//     under ntpd at 1024 s polls stayed within ±0.2 ppm for months; NTP's
//     "Allan intercept", where a computer clock's Allan deviation stops
//     falling and the random walk takes over, is of the order of 1000–
//     2000 s (RFC 5905, ALLAN = 2^11 s). TypicalWanderPPM is an Allan
//     deviation of 0.03 ppm (3·10⁻⁸) at τ = 1000 s: the frequency moves
//     by 0.05 ppm in an hour and 0.5 ppm in a day, the size of the
//     variations above, and about 3 µs of error over one 240 s round.
//
// Options in `--clock sim:…`: wander= (ppm, the Allan deviation at
// τ = 1000 s, 0 to 10), temp= (ppm, 0 to 100), period= (1m to 8760h,
// default 24h), seed=. The model is deterministic for a seed, whatever the
// pattern of reads: the walk is drawn on a 1 s grid of source time, its
// frequency linear in between, the periodic term integrated exactly
// (TestOscillatorWanderAllanDeviation checks σ_y(τ) = √(qτ/3) at 10, 100
// and 1000 s; TestOscillatorTemperatureAllanDeviation the sinusoid's).
//
// # Outliers
//
// A sample whose round trip is far above the same host's recent minimum
// (RTTHistory, 8 rounds) was delayed on one side, which moves the offset by
// half the delay and the RTT by all of it. It does not vote in the network
// time, and its slave is sent only what the delay cannot explain (Justify,
// PlanJustified): it never gets a correction larger than its own
// measurement can justify. The network time already weighed every sample
// by 1/max(RTT/2, 100 µs)²; what went wrong was the per-slave correction,
// which took the bad reading in full (TestNoisySlave).
package clocksync

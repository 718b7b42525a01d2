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
// at or above the step threshold (20 s). Two changes, both optional:
//
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
// behaviour.
package clocksync

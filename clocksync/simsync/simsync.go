// Package simsync runs TEMPO's synchronisation loop — measure every slave,
// compute the network time, send each slave its correction — among
// simulated clocks in virtual time (internal/vtime), deterministically for a
// given seed. It uses clocksync's own pieces (probe payload and responder,
// the adaptive probe count and the combination of samples (SampleSet,
// RTTHistory), or BSD's minimum-RTT selection, network time, correction
// planning, the TSP
// encoding of corrections, the Applier and the frequency discipline); only
// the network between daemons is simulated. It never touches a real clock
// or the network.
package simsync

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/internal/vtime"
	"github.com/timed-project/timed/tsp"
)

// Fault is the misbehaviour of the faulty node (the last slave).
type Fault int

// Faults.
const (
	FaultNone  Fault = iota
	FaultDrift       // the faulty node drifts at FaultDriftPPM
	FaultStep        // the faulty node's clock is stepped by FaultStepBy at FaultAt
)

func (f Fault) String() string {
	switch f {
	case FaultNone:
		return "none"
	case FaultDrift:
		return "drift"
	case FaultStep:
		return "step"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Config describes one simulation. Zero fields take the scenario.
type Config struct {
	N        int           // daemons, the master included (default 10)
	Seed     uint64        // random seed
	Interval time.Duration // sync interval (default 240 s, BSD SAMPLEINTVL); the ceiling with Floor
	// Floor, if set below Interval, makes the rounds adaptive
	// (clocksync.IntervalController): from Floor up to Interval, aiming
	// at Target (default clocksync.DefaultIntervalTarget). Ours only.
	Floor    time.Duration
	Target   time.Duration
	Duration time.Duration // virtual time simulated (default 6 h)
	// BSD selects BSD-equivalent settings: no frequency discipline, 5 ms
	// rounding, BSD's median, 20 s step threshold, SETTIME retries re-sent
	// unchanged. Otherwise ours: frequency discipline, 1 µs rounding,
	// weighted mean, the Applier steps at 100 ms (SlewStepThreshold),
	// re-stamped SETTIME retries. Both measure with the same probe (BSD used
	// ICMP timestamps of 1 ms resolution), so the comparison isolates what
	// the settings do; BSD's takes a fixed count of replies and the
	// minimum-RTT sample, ours an adaptive count, combined by error.
	BSD bool

	MaxOffset   time.Duration // initial offsets uniform in ±MaxOffset (default 1 s)
	MaxDriftPPM float64       // drifts uniform in ±MaxDriftPPM (default 100)
	// Osc makes every clock's frequency wander around its drift, each
	// with its own seed (from Osc.Seed, Seed and its index); the zero
	// value: constant drifts. Benchmarks use clocksync.TypicalOscillator.
	Osc      clocksync.Oscillator
	DelayMin time.Duration // one-way delay uniform in [DelayMin, DelayMax] (50 µs)
	DelayMax time.Duration // (150 µs)
	Loss     float64       // per-datagram loss probability (default 0.01; <0 for none)
	// Replies is the number of probe replies wanted per slave: BSD
	// settings and FixedCount take exactly this many (default 5 for BSD,
	// its measure()'s MSGS, and 12 for FixedCount, this daemon's count
	// before the adaptive one); ours take between
	// clocksync.DefaultMinReplies and DefaultMaxReplies, stopping once
	// the minimum RTT has settled (clocksync.SampleSet).
	Replies int
	Trials  int // probes sent at most (default 2 × Replies: BSD's TRIALS, 10)
	// FixedCount makes ours measure as before the adaptive count:
	// Replies replies, the minimum-RTT sample alone. For comparisons.
	FixedCount bool

	Fault         Fault
	FaultDriftPPM float64       // default 5000
	FaultStepBy   time.Duration // default 10 s
	FaultAt       time.Duration // default 1 h 0 m 17 s after the start

	SkipRounds  int           // rounds before sampling starts (default 3)
	SampleEvery time.Duration // sampling period of the spread (default 1 s)

	// LocalStep is where an Applier steps instead of slewing (ours; BSD
	// settings step at 20 s). Default as the daemon's localStepThreshold:
	// SlewStepThreshold, or what adjtime's 500 ppm slews in one Interval
	// if that is less (2 ms in the fast profile's 4 s rounds).
	LocalStep time.Duration

	// Sched delays the datagrams of every daemon after they were
	// stamped: the gap between reading the clock and the packet leaving,
	// under CPU contention (the probe's t1 and t3 and SETTIME's time are
	// read in user space before the write), independently per datagram.
	Sched Sched
	// Noisy is a slave whose readings carry scheduling delays: in a
	// round, with probability Noisy.Prob, every reply of the first slave
	// leaves late by between Noisy.Max/2 and Noisy.Max (a busy host: the
	// minimum-RTT sample of that round is as bad as the others).
	Noisy Sched

	// MakeStepOff turns off our stepping while unsynchronised
	// (clocksync.DefaultMakeStep), to show what it gains.
	MakeStepOff bool
	// FilterOff turns off the master's outlier handling (its verdicts and
	// justified corrections; the RTT history is still kept, for the
	// probe's floors), to show what it does.
	FilterOff bool

	// MasterCrashAt, if set, is when the master (host00) dies, from the
	// start. Takeover later (default 30 s: an election) host01 becomes
	// master, with all a new master lacks: no slave set yet (need_set),
	// no round-trip history, a fresh interval controller; its first
	// round comes 3 s after that, as BSD's. The dead clock leaves the
	// spread.
	MasterCrashAt time.Duration
	Takeover      time.Duration
	// SetNewSlaves makes the new master send SETTIME to every slave not
	// set yet, however near it measured it: BSD's need_set, always the
	// rule with BSD settings, and ours before clocksync.CorrectOptions
	// AdjustNewBelow (LocalStep here). For comparisons.
	SetNewSlaves bool

	// Trace, if set, is called at the start of every round with the
	// state the previous rounds left (analysis and benchmarks only).
	Trace func(RoundTrace)
}

// Sched is a scheduling delay: with probability Prob a datagram leaves
// late by a delay uniform in [0, Max] after its timestamp was read.
type Sched struct {
	Prob float64
	Max  time.Duration
}

// RoundTrace is the clocks' state when a round starts, before it measures:
// what the previous round's corrections and the time since have left.
type RoundTrace struct {
	Round  int           // the round about to start, from 1
	At     time.Duration // virtual time since the start
	Spread time.Duration // largest offset between two clocks (faulty node excluded)
	// Pending is the largest slew still unfinished on any clock.
	Pending time.Duration
	// MeanFreqPPM is the mean frequency setting of the clocks (faulty
	// node excluded): how much faster than the mean of their natural
	// drifts the network runs because of the discipline.
	MeanFreqPPM float64
	// FreqSpreadPPM is the largest difference between two clocks' rates
	// (natural drift plus frequency setting), faulty node excluded: what
	// the spread grows by, per second, until the next correction.
	FreqSpreadPPM float64
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.N <= 0 {
		c.N = 10
	}
	def(&c.Interval, 240*time.Second)
	def(&c.Duration, 6*time.Hour)
	def(&c.MaxOffset, time.Second)
	if c.MaxDriftPPM <= 0 {
		c.MaxDriftPPM = 100
	}
	def(&c.DelayMin, 50*time.Microsecond)
	def(&c.DelayMax, 150*time.Microsecond)
	if c.Loss == 0 {
		c.Loss = 0.01
	} else if c.Loss < 0 {
		c.Loss = 0
	}
	if c.Replies <= 0 {
		switch {
		case c.BSD:
			c.Replies = bsdReplies
		case c.FixedCount:
			c.Replies = 12
		default:
			c.Replies = clocksync.DefaultMaxReplies
		}
	}
	if c.Trials < c.Replies {
		c.Trials = 2 * c.Replies
	}
	if c.FaultDriftPPM == 0 {
		c.FaultDriftPPM = 5000
	}
	def(&c.FaultStepBy, 10*time.Second)
	def(&c.FaultAt, time.Hour+17*time.Second)
	if c.SkipRounds <= 0 {
		c.SkipRounds = 3
	}
	def(&c.SampleEvery, time.Second)
	def(&c.Takeover, 30*time.Second)
	if c.LocalStep <= 0 {
		slewable := time.Duration(float64(c.shortest()) * clocksync.MaxSlewPPM / 1e6)
		c.LocalStep = max(min(clocksync.SlewStepThreshold, slewable), time.Microsecond)
	}
	return c
}

// adaptive: the rounds adapt between Floor and Interval.
func (c Config) adaptive() bool { return !c.BSD && c.Floor > 0 && c.Floor < c.Interval }

// shortest is the shortest round: the floor of adaptive rounds.
func (c Config) shortest() time.Duration {
	if c.adaptive() {
		return c.Floor
	}
	return c.Interval
}

// Result is what a run measured.
type Result struct {
	// Spread holds, every SampleEvery after the first SkipRounds rounds, the
	// largest offset between any two clocks, the faulty node excluded.
	Spread             []time.Duration
	P50, P95, P99, Max time.Duration
	// P99Late is the p99 over the samples of the last two thirds of the run:
	// the steady state, once BSD's slews of the initial offsets are over
	// (BSD slaves slew SETTIME differences below 20 s: ±1 s takes over an
	// hour at 500 ppm). P95Late and MaxLate likewise.
	P99Late, P95Late, MaxLate time.Duration
	// Below100At is when the spread (sampled from the first round on)
	// last went from 100 µs or more to below it, from the start; 0 if it
	// was at or above 100 µs at the end.
	Below100At time.Duration
	// PerSlaveMinute is Packets per slave per minute of the run;
	// PerSlaveMinuteLate over its last two thirds.
	PerSlaveMinute, PerSlaveMinuteLate float64
	// Intervals counts the rounds by their length (adaptive rounds).
	Intervals map[time.Duration]int
	// Eps is the largest offset error the master's measurements can have
	// had after the first round: max over used samples of RTT/2 − DelayMin
	// (each one-way delay is at least DelayMin, so the asymmetry error of a
	// sample is at most (RTT − 2·DelayMin)/2).
	Eps    time.Duration
	Rounds int
	// Converged is the number of rounds after which the spread (sampled
	// every SampleEvery from the first round on) stayed below 1 ms until
	// the end: the rounds started before the first sample of that last
	// good stretch. −1 if the spread was at or above 1 ms at the end.
	Converged int
	// ConvergedAt is when that last good stretch began, from the start
	// (0 if it never did).
	ConvergedAt time.Duration
	// MeanFreqMaxPPM is the largest |RoundTrace.MeanFreqPPM| seen at the
	// start of a round: the frequency the discipline pushed the whole
	// network to, against its natural mean.
	MeanFreqMaxPPM float64
	// FreqWanderPPM is how far RoundTrace.MeanFreqPPM moved (max − min)
	// from the start of round SkipRounds + 1 on: the network's frequency
	// drifting once the first estimates are in.
	FreqWanderPPM float64
	// Packets counts every datagram sent (probes, replies, corrections
	// and their retries, ACKs); PerSlaveRound is Packets per slave per
	// round.
	Packets       int
	PerSlaveRound float64
	Steps         int // corrections applied by stepping (all clocks)
	Refused       int // corrections refused as beyond max-step
	Lost          int // corrections never delivered (all retries lost)
	// After a master crash (Config.MasterCrashAt): MaxAfterCrash is the
	// largest spread of the surviving clocks sampled from the crash on,
	// StepsAfterCrash the corrections applied by stepping since (the new
	// master's own included), SetsAfterCrash the SETTIMEs sent since.
	MaxAfterCrash   time.Duration
	StepsAfterCrash int
	SetsAfterCrash  int
}

const (
	// bsdReplies is the replies BSD's measure() waits for (MSGS, of at
	// most TRIALS = 10 ICMP timestamp requests): 5 request/reply pairs,
	// the ADJTIME and its ACK make BSD's 12 packets per slave a round, 3
	// a minute at 240 s.
	bsdReplies    = 5
	probeSpacing  = time.Millisecond       // between probes to one slave
	measureWindow = 100 * time.Millisecond // per-round deadline
	ackWait       = 200 * time.Millisecond // acksend's first wait
	ackTries      = 5                      // acksend(5)
	firstRound    = 3 * time.Second        // BSD: first round 3 s after becoming master
)

type node struct {
	name    string
	addr    netip.AddrPort
	clock   *clocksync.SimClock
	applier *clocksync.Applier
	resp    *clocksync.ProbeResponder
	lastSeq uint16
	haveSeq bool
	known   bool // the master has set its time once (need_set cleared)
}

type sim struct {
	// lastBad is the rounds started when the spread was last sampled at
	// or above 1 ms; -1: never.
	lastBad int
	roundAt time.Time // when the last round started
	busy    bool      // the noisy slave is busy this round
	// rtt is the master's memory of its slaves' round trips, as the
	// daemon's: its rounds record it (JudgeRound) and the probe's
	// adaptive count reads floors from it. Nil with BSD settings.
	rtt *clocksync.RTTHistory
	// freqLo, freqHi: the range of the mean frequency since round
	// SkipRounds + 1.
	freqLo, freqHi float64
	ctl            *clocksync.IntervalController // adaptive rounds; nil: fixed
	prevRound      time.Time                     // when the round before began
	below100       bool
	lateFrom       time.Time // where the last two thirds begin
	latePackets    int       // Packets when they began
	cfg            Config
	s              *vtime.Scheduler
	rng            *rand.Rand
	nodes          []*node
	res            Result
	seq            uint16
	faulty         int
	master         int // the master's index: 0, 1 after a takeover
	dead           int // the crashed master's index (Config.MasterCrashAt); -1: none
	gen            int // the mastership: a dead master's rounds and sends stop
}

// Run runs one simulation.
func Run(cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if cfg.N < 2 {
		return Result{}, errors.New("simsync: need at least 2 daemons")
	}
	if cfg.DelayMax < cfg.DelayMin {
		return Result{}, errors.New("simsync: DelayMax below DelayMin")
	}
	sm := &sim{cfg: cfg, s: vtime.New(vtime.Epoch), rng: rand.New(rand.NewPCG(cfg.Seed, 0x7e3d0)), faulty: -1, dead: -1}
	log := logrus.New()
	log.SetLevel(logrus.FatalLevel) // refusals are counted, not printed
	for i := range cfg.N {
		sc := clocksync.SimConfig{
			Offset:   time.Duration((2*sm.rng.Float64() - 1) * float64(cfg.MaxOffset)),
			DriftPPM: (2*sm.rng.Float64() - 1) * cfg.MaxDriftPPM,
		}
		if cfg.Osc.Wanders() {
			sc.Osc = cfg.Osc
			sc.Osc.Seed = cfg.Osc.Seed<<24 ^ cfg.Seed<<12 ^ uint64(i)
		}
		if i == cfg.N-1 && cfg.Fault != FaultNone && cfg.N > 2 {
			sm.faulty = i
			if cfg.Fault == FaultDrift {
				sc.DriftPPM = cfg.FaultDriftPPM
			}
		}
		clk := clocksync.NewSimClock(sm.s, sc)
		n := &node{
			name:  fmt.Sprintf("host%02d", i),
			addr:  netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 525),
			clock: clk,
			resp:  clocksync.NewProbeResponder(clk, fmt.Sprintf("host%02d", i)),
		}
		n.applier = &clocksync.Applier{Clock: clk, Log: log}
		if !cfg.BSD {
			n.applier.StepThreshold = cfg.LocalStep
			if !cfg.MakeStepOff {
				n.applier.MakeStep = clocksync.DefaultMakeStep
			}
			// The daemon's baseline: most of a round.
			n.applier.Discipline = clocksync.NewDiscipline(clocksync.DisciplineConfig{MinInterval: cfg.shortest() * 3 / 4})
		}
		sm.nodes = append(sm.nodes, n)
	}
	if sm.faulty >= 0 && cfg.Fault == FaultStep {
		f := sm.nodes[sm.faulty]
		sm.s.After(cfg.FaultAt, func() { _ = f.clock.Step(f.clock.Now().Add(cfg.FaultStepBy)) })
	}
	end := vtime.Epoch.Add(cfg.Duration)
	sm.lastBad = -1
	if !cfg.BSD {
		sm.rtt = clocksync.NewRTTHistory(0)
	}
	if cfg.adaptive() {
		sm.ctl = sm.newController()
	}
	sm.res.Intervals = map[time.Duration]int{}
	sm.lateFrom = vtime.Epoch.Add(cfg.Duration / 3)
	sm.s.At(sm.lateFrom, func() { sm.latePackets = sm.res.Packets })
	sm.s.After(firstRound, sm.roundOf(sm.gen))
	sm.s.After(firstRound, sm.sample)
	if cfg.MasterCrashAt > 0 {
		sm.s.After(cfg.MasterCrashAt, sm.crash)
	}
	sm.s.RunUntil(end)
	sm.finish()
	return sm.res, nil
}

// crash kills the master; Takeover later host01 is master, new to all.
func (sm *sim) crash() {
	sm.dead = sm.master
	sm.gen++
	sm.s.After(sm.cfg.Takeover, func() {
		sm.master = 1
		for _, n := range sm.nodes {
			n.known = false
		}
		if sm.rtt != nil {
			sm.rtt = clocksync.NewRTTHistory(0)
		}
		if sm.ctl != nil {
			sm.ctl = sm.newController()
		}
		sm.roundAt = time.Time{}
		sm.gen++
		sm.s.After(firstRound, sm.roundOf(sm.gen))
	})
}

// newController is a master's interval controller for adaptive rounds.
func (sm *sim) newController() *clocksync.IntervalController {
	return clocksync.NewIntervalController(clocksync.IntervalConfig{Floor: sm.cfg.Floor, Ceiling: sm.cfg.Interval, Target: sm.cfg.Target})
}

// roundOf is a round of mastership gen: nothing once that master died.
func (sm *sim) roundOf(gen int) func() {
	return func() {
		if gen == sm.gen {
			sm.round()
		}
	}
}

// crashed: the master crashed (Config.MasterCrashAt).
func (sm *sim) crashed() bool { return sm.dead >= 0 }

// isSlave: node i is a live slave of the current master.
func (sm *sim) isSlave(i int) bool { return i != sm.master && i != sm.dead }

func (sm *sim) delay() time.Duration {
	return sm.cfg.DelayMin + time.Duration(sm.rng.Float64()*float64(sm.cfg.DelayMax-sm.cfg.DelayMin))
}

func (sm *sim) lost() bool { return sm.rng.Float64() < sm.cfg.Loss }

// late draws a scheduling delay (no draw at all when there is none, so
// that runs without stay as they were).
func (sm *sim) late(s Sched) time.Duration {
	if s.Prob <= 0 || sm.rng.Float64() >= s.Prob {
		return 0
	}
	return time.Duration(sm.rng.Float64() * float64(s.Max))
}

// transmit encodes p, and unless the datagram is lost decodes it at the
// far end after a scheduling delay late and a one-way delay, and calls
// deliver.
func (sm *sim) transmit(p tsp.ExtPacket, from netip.AddrPort, late time.Duration, deliver func(clocksync.Datagram)) {
	b, err := p.Marshal()
	if err != nil {
		return
	}
	sm.res.Packets++
	if sm.lost() {
		return
	}
	sm.s.After(late+sm.delay(), func() {
		q, err := tsp.UnmarshalExt(b)
		if err == nil {
			deliver(clocksync.Datagram{Packet: q, From: from})
		}
	})
}

// round is one master round: measure all slaves within measureWindow, then
// compute the network time and correct everyone.
func (sm *sim) round() {
	tr := sm.trace()
	sm.res.MeanFreqMaxPPM = math.Max(sm.res.MeanFreqMaxPPM, math.Abs(tr.MeanFreqPPM))
	if tr.Round == sm.cfg.SkipRounds+1 {
		sm.freqLo, sm.freqHi = tr.MeanFreqPPM, tr.MeanFreqPPM
	} else if tr.Round > sm.cfg.SkipRounds {
		sm.freqLo, sm.freqHi = math.Min(sm.freqLo, tr.MeanFreqPPM), math.Max(sm.freqHi, tr.MeanFreqPPM)
		sm.res.FreqWanderPPM = sm.freqHi - sm.freqLo
	}
	if sm.cfg.Trace != nil {
		sm.cfg.Trace(tr)
	}
	sm.busy = sm.cfg.Noisy.Prob > 0 && sm.rng.Float64() < sm.cfg.Noisy.Prob
	sm.res.Rounds++
	sm.prevRound, sm.roundAt = sm.roundAt, sm.s.Now()
	round := sm.res.Rounds
	master, gen, first := sm.nodes[sm.master], sm.gen, sm.prevRound.IsZero()
	samples := make([]*clocksync.SampleSet, len(sm.nodes))
	sent := make([]int, len(sm.nodes))
	for i := range sm.nodes {
		if !sm.isSlave(i) {
			continue
		}
		samples[i] = &clocksync.SampleSet{Floor: sm.rtt.Floor(sm.nodes[i].addr.String()), MaxReplies: sm.cfg.Replies}
		if sm.fixed() {
			samples[i].MinReplies = sm.cfg.Replies
		}
		sm.probe(i, 0, samples, sent)
	}
	sm.s.After(measureWindow, func() {
		if gen != sm.gen {
			return // the master died while measuring
		}
		offsets := make([]clocksync.HostOffset, 0, len(sm.nodes)-1)
		meas := make([]*clocksync.Measurement, len(sm.nodes))
		names, ms, ok := make([]string, len(sm.nodes)), make([]clocksync.Measurement, len(sm.nodes)), make([]bool, len(sm.nodes))
		for i := range sm.nodes {
			if !sm.isSlave(i) {
				continue
			}
			m, err := sm.measurement(samples[i], sent[i])
			names[i], ms[i], ok[i] = sm.nodes[i].addr.String(), m, err == nil
		}
		verdicts := sm.rtt.JudgeRound(names, ms, ok)
		if sm.cfg.FilterOff {
			verdicts = make([]clocksync.Judged, len(sm.nodes)) // recorded, never acted on
		}
		for i := range sm.nodes {
			if !sm.isSlave(i) {
				continue
			}
			if !ok[i] {
				offsets = append(offsets, clocksync.HostOffset{Trusted: true})
				continue
			}
			m := ms[i]
			meas[i] = &m
			j := verdicts[i]
			offsets = append(offsets, clocksync.HostOffset{Offset: m.Offset, ErrorBound: m.ErrorBound, Trusted: true, Responsive: !j.Outlier})
			if round > 1 {
				sm.res.Eps = max(sm.res.Eps, m.RTT/2-sm.cfg.DelayMin)
			}
		}
		opt := clocksync.NetworkOptions{BSD: sm.cfg.BSD}
		copt := clocksync.CorrectOptions{}
		if !sm.cfg.BSD && !sm.cfg.SetNewSlaves {
			copt.AdjustNewBelow = sm.cfg.LocalStep
		}
		if sm.cfg.BSD {
			copt.Rounding = clocksync.BSDRounding
		}
		nt := clocksync.NetworkTime(offsets, opt)
		now := master.clock.Now()
		hosts := []clocksync.HostCorrection{{Host: master.name, Correction: nt.Offset}}
		for i := range sm.nodes {
			if meas[i] == nil {
				continue
			}
			c := clocksync.PlanJustified(nt.Offset, meas[i].Offset, verdicts[i].Slack, !sm.nodes[i].known, now, copt)
			if sm.crashed() && c.Type == tsp.SetTime {
				sm.res.SetsAfterCrash++
			}
			hosts = append(hosts, clocksync.HostCorrection{Host: sm.nodes[i].name, Correction: c.Adjust, New: c.Type == tsp.SetTime})
			sm.nodes[i].known = true
			sm.sendCorrection(i, c)
		}
		sm.count(master.applier.ApplyAdjust(clocksync.RoundCorrection(nt.Offset, rounding(copt))))
		if sm.ctl != nil {
			var since time.Duration
			if !first {
				since = sm.roundAt.Sub(sm.prevRound)
			}
			next := sm.ctl.Round(since, hosts).Next
			sm.res.Intervals[next]++
			sm.s.At(sm.roundAt.Add(next), sm.roundOf(gen))
		}
	})
	if sm.ctl == nil {
		sm.res.Intervals[sm.cfg.Interval]++
		sm.s.After(sm.cfg.Interval, sm.roundOf(gen))
	}
}

// probe sends probe k to slave i and, while replies are missing, the next
// one probeSpacing later.
func (sm *sim) probe(i, k int, samples []*clocksync.SampleSet, sent []int) {
	if k >= sm.cfg.Trials || samples[i].Enough() {
		return
	}
	master, slave := sm.nodes[sm.master], sm.nodes[i]
	sm.seq++
	t1 := master.clock.Now()
	sent[i]++
	req := tsp.ExtPacket{Kind: tsp.ExtProbe, Seq: sm.seq, Name: master.name, Payload: clocksync.ProbePayload{T1: t1.UnixNano()}.Marshal()}
	sm.transmit(req, master.addr, sm.late(sm.cfg.Sched), func(d clocksync.Datagram) {
		rep, err := slave.resp.Reply(d)
		if err != nil {
			return
		}
		late := sm.late(sm.cfg.Sched)
		if i == 1 && sm.busy {
			late += sm.cfg.Noisy.Max/2 + time.Duration(sm.rng.Float64()*float64(sm.cfg.Noisy.Max/2))
		}
		sm.transmit(rep, slave.addr, late, func(d clocksync.Datagram) {
			t4 := master.clock.Now()
			pl, err := clocksync.UnmarshalProbe(d.Packet.Payload)
			if err != nil || pl.T1 != t1.UnixNano() {
				return
			}
			x := clocksync.Sample{T1: t1, T2: time.Unix(0, pl.T2), T3: time.Unix(0, pl.T3), T4: t4, KernelT1: sm.kernelStamps()}
			if x.KernelT1 {
				// As the daemon's ProbeClient: a reply carries the kernel's
				// send stamp of the slave's previous one.
				set := samples[i]
				if k := len(set.Samples()) - 1; k >= 0 {
					prev := set.Samples()[k]
					prev.KernelT3 = true
					set.Update(k, prev)
				}
			}
			samples[i].Add(x)
		})
	})
	sm.s.After(probeSpacing, func() { sm.probe(i, k+1, samples, sent) })
}

// kernelStamps: our probes' samples are stamped as the kernel stamps
// them on Linux (KernelT1, and KernelT3 once the next reply brings it),
// which lets a path at its floor stop at two replies. Not where the
// configuration delays datagrams after their stamps were read (Sched,
// Noisy): that models stamps read in user space.
func (sm *sim) kernelStamps() bool {
	return !sm.fixed() && sm.cfg.Sched.Prob <= 0 && sm.cfg.Noisy.Prob <= 0
}

// fixed: the replies are a fixed count and the minimum-RTT sample alone
// is used, as BSD and as this daemon before the adaptive count.
func (sm *sim) fixed() bool { return sm.cfg.BSD || sm.cfg.FixedCount }

// measurement is a slave's measurement of the round, from its samples.
func (sm *sim) measurement(set *clocksync.SampleSet, sent int) (clocksync.Measurement, error) {
	if sm.fixed() {
		return clocksync.BestSample(set.Samples(), sent)
	}
	return set.Measurement(sent)
}

// sendCorrection delivers an ADJTIME or SETTIME like acksend(5): each try
// and each ACK can be lost; the slave ignores a repeated seq.
func (sm *sim) sendCorrection(i int, c clocksync.Correction) {
	master, slave := sm.nodes[sm.master], sm.nodes[i]
	sm.seq++
	seq, planned, gen := sm.seq, sm.s.Now(), sm.gen
	var try func(n int)
	try = func(n int) {
		if gen != sm.gen {
			return // a dead master sends no more copies
		}
		if n >= ackTries {
			sm.res.Lost++
			return
		}
		// BSD re-sends the same bytes; ours re-stamps a SETTIME's time.
		var elapsed time.Duration
		if !sm.cfg.BSD {
			elapsed = sm.s.Since(planned)
		}
		p, err := c.PacketAfter(seq, master.name, elapsed)
		if err != nil {
			return
		}
		b, err := p.Marshal()
		if err != nil {
			return
		}
		acked := false
		sm.res.Packets++
		if !sm.lost() {
			var late time.Duration
			if c.Type == tsp.SetTime {
				late = sm.late(sm.cfg.Sched) // the time was read before the write
			}
			sm.s.After(late+sm.delay(), func() {
				q, err := tsp.Unmarshal(b)
				if err != nil {
					return
				}
				if !slave.haveSeq || q.Seq != slave.lastSeq {
					slave.haveSeq, slave.lastSeq = true, q.Seq
					if q.Type == tsp.SetTime {
						sm.count(slave.applier.ApplySetTime(q.Time.Time(), 0))
					} else {
						sm.count(slave.applier.ApplyAdjust(q.Time.Duration()))
					}
				}
				sm.res.Packets++ // the ACK
				if !sm.lost() {
					acked = true
				}
			})
		}
		sm.s.After(ackWait<<n, func() {
			if !acked {
				try(n + 1)
			}
		})
	}
	try(0)
}

func (sm *sim) count(a clocksync.Applied, err error) {
	switch a.Action {
	case clocksync.Stepped:
		sm.res.Steps++
		if sm.crashed() {
			sm.res.StepsAfterCrash++
		}
	case clocksync.Refused:
		sm.res.Refused++
	}
	_ = err
}

// spread is the largest offset between two clocks, the faulty node and a
// crashed master excluded.
func (sm *sim) spread() time.Duration {
	lo, hi := time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
	for i, n := range sm.nodes {
		if i == sm.faulty || i == sm.dead {
			continue
		}
		o := n.clock.Offset()
		lo, hi = min(lo, o), max(hi, o)
	}
	return hi - lo
}

func (sm *sim) sample() {
	sp := sm.spread()
	if sm.crashed() {
		sm.res.MaxAfterCrash = max(sm.res.MaxAfterCrash, sp)
	}
	if sp >= time.Millisecond {
		sm.lastBad = sm.res.Rounds
		sm.res.ConvergedAt = 0
	} else if sm.res.ConvergedAt == 0 {
		sm.res.ConvergedAt = sm.s.Since(vtime.Epoch)
	}
	if sp >= 100*time.Microsecond {
		sm.below100 = false
	} else if !sm.below100 {
		sm.below100, sm.res.Below100At = true, sm.s.Since(vtime.Epoch)
	}
	if sm.res.Rounds > sm.cfg.SkipRounds || sm.res.Rounds == sm.cfg.SkipRounds && sm.s.Since(sm.roundAt) >= time.Second {
		sm.res.Spread = append(sm.res.Spread, sp)
	}
	sm.s.After(sm.cfg.SampleEvery, sm.sample)
}

func (sm *sim) trace() RoundTrace {
	t := RoundTrace{Round: sm.res.Rounds + 1, At: sm.s.Since(vtime.Epoch), Spread: sm.spread()}
	lo, hi := math.Inf(1), math.Inf(-1)
	var sum float64
	var clocks int
	for i, n := range sm.nodes {
		st, _ := n.clock.State()
		t.Pending = max(t.Pending, absDur(st.PendingSlew))
		if i == sm.faulty || i == sm.dead {
			continue
		}
		r := n.clock.NaturalPPM() + st.FrequencyPPM
		lo, hi = math.Min(lo, r), math.Max(hi, r)
		sum += st.FrequencyPPM
		clocks++
	}
	t.FreqSpreadPPM = hi - lo
	t.MeanFreqPPM = sum / float64(clocks)
	return t
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func (sm *sim) finish() {
	if sm.res.Rounds > 0 {
		sm.res.PerSlaveRound = float64(sm.res.Packets) / float64(sm.res.Rounds*(len(sm.nodes)-1))
	}
	slaves := float64(len(sm.nodes) - 1)
	sm.res.PerSlaveMinute = float64(sm.res.Packets) / slaves / sm.cfg.Duration.Minutes()
	sm.res.PerSlaveMinuteLate = float64(sm.res.Packets-sm.latePackets) / slaves / (sm.cfg.Duration - sm.lateFrom.Sub(vtime.Epoch)).Minutes()
	if !sm.below100 {
		sm.res.Below100At = 0
	}
	sm.res.Converged = sm.lastBad
	if sm.spread() >= time.Millisecond {
		sm.res.Converged = -1
	}
	if len(sm.res.Spread) == 0 {
		return
	}
	s := slices.Clone(sm.res.Spread)
	slices.Sort(s)
	sm.res.P50, sm.res.P95, sm.res.P99, sm.res.Max = Percentile(s, 0.50), Percentile(s, 0.95), Percentile(s, 0.99), s[len(s)-1]
	late := slices.Clone(sm.res.Spread[len(sm.res.Spread)/3:])
	slices.Sort(late)
	sm.res.P99Late, sm.res.P95Late, sm.res.MaxLate = Percentile(late, 0.99), Percentile(late, 0.95), late[len(late)-1]
}

// Percentile returns the p-quantile (0..1) of sorted values, nearest rank.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func rounding(o clocksync.CorrectOptions) time.Duration {
	if o.Rounding <= 0 {
		return clocksync.FineRounding
	}
	return o.Rounding
}

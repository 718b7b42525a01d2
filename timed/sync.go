package timed

import (
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/timed/control"
)

// Is this host synchronised, how far is its clock from network time, and
// how does it know: `timedc status`'s first lines, `timedc sources`, and
// the timed_synchronised metric. The README's "Is it synchronised?"
// states the rules; judge implements them.
//
// What each role can honestly say. A master measures its slaves every
// round, and the network time is an average of those measurements: it
// knows its own offset from network time right after the round (the
// network time's offset from its clock, which it then slews away) and
// bounds its error by the largest error bound of the measurements (an
// average, a median, or the influence bound moves by no more than its
// inputs do). A slave never measures anything: its master measured it,
// and the correction it sent is the slave's offset from network time at
// that moment, negated. The slave knows the correction and when it came;
// the measurement's error (half the round trip) is known to the master
// alone, and the slave does not pretend to know it.
//
// Between measurements the clock drifts; the estimate does not guess by
// how much (with the frequency discipline, by little), but the bound
// grows by driftAllowancePPM of the time since (ntpd's and chrony's
// allowance for an unknown frequency error), or by the rate the last
// correction showed, whichever is larger.

// driftAllowancePPM is the rate at which the error bound grows between
// measurements, at least.
const driftAllowancePPM = 15

// basis is the last thing this host learnt about its offset from network
// time: a correction it applied, or (a master) its round.
type basis struct {
	kind   string        // "correction" or "round"
	from   string        // whose measurement: the master's name, or this host's
	at     time.Time     // time.Now() when it was taken
	before time.Duration // this clock minus network time just before
	moved  time.Duration // what the clock was moved by then (0 in dry-run)
	slewed bool          // moved by a slew (else a step)
	bound  time.Duration // error of before; negative: unknown here
}

// correctionBasis is the basis a correction applied gives: the clock was
// −Requested from network time, and has been moved by By.
func (s *status) correctionBasis(now time.Time, a clocksync.Applied, from string) *basis {
	b := &basis{kind: "correction", from: from, at: now, before: -a.Requested, moved: a.By, slewed: a.Action == clocksync.Slewed, bound: -1}
	if s.dryRun {
		b.moved = 0
	}
	return b
}

// offsetAt is the estimate at now: before, plus what has been done of the
// move (a slew at adjtime's rate), and what is still pending.
func (b *basis) offsetAt(now time.Time) (offset, pending time.Duration) {
	if b.slewed {
		pending = slewPending(b.moved, now.Sub(b.at))
	}
	return b.before + b.moved - pending, pending
}

// boundAt is the error bound at now, or negative where unknown.
func (b *basis) boundAt(now time.Time, interval time.Duration) time.Duration {
	if b.bound < 0 {
		return -1
	}
	rate := float64(driftAllowancePPM) * 1e-6
	if interval > 0 {
		rate = max(rate, math.Abs(float64(b.before))/float64(interval))
	}
	return b.bound + time.Duration(math.Round(rate*float64(max(now.Sub(b.at), 0))))
}

// slewPending is what is left of a slew of d after age at adjtime's rate.
func slewPending(d, age time.Duration) time.Duration {
	done := time.Duration(math.Round(clocksync.MaxSlewPPM * 1e-6 * float64(max(age, 0))))
	switch {
	case d > done:
		return d - done
	case d < -done:
		return d + done
	}
	return 0
}

// roundInfo is a master's last sync round on one network.
type roundInfo struct {
	at       time.Time     // time.Now() when it was measured; zero: none yet
	slaves   int           // slaves in it
	measured int           // of them, measured
	bound    time.Duration // the largest error bound of the measurements
	offset   time.Duration // the network time minus the master's clock
	dictated bool          // no vote: the master's clock is the time (a date change)
}

// heardMaster is what a slave heard from its master: the corrections it
// sent, whether applied or not (a reach register counts a master that
// was heard).
type heardMaster struct {
	name   string
	at     time.Time     // time.Now() of the last correction; zero: none
	offset time.Duration // that correction: network time minus this clock
	reach  uint8
}

// heard records a correction from master, offset being what it asked
// for, at now; the reach register gets a 1 for this round and a 0 for
// each round (of the sync interval) missed since the last one.
func (h *heardMaster) heard(master string, now time.Time, offset, interval time.Duration) {
	if h.name != master {
		*h = heardMaster{name: master}
	}
	if !h.at.IsZero() {
		// Every correction is a round of its own, even when adaptive
		// rounds come closer together than the sync interval.
		h.reach <<= max(min(roundsIn(now.Sub(h.at), interval), 8), 1)
	}
	h.reach |= 1
	h.at, h.offset = now, offset
}

// reachAt is the register at now: rounds that passed since the last
// correction without one count as missed.
func (h *heardMaster) reachAt(now time.Time, interval time.Duration) uint8 {
	if h.at.IsZero() {
		return 0
	}
	return h.reach << min(max(roundsIn(now.Sub(h.at), interval)-1, 0), 8)
}

// roundsIn is how many sync rounds d spans, to the nearest.
func roundsIn(d, interval time.Duration) int {
	if interval <= 0 || d <= 0 {
		return 0
	}
	return int(math.Min(math.Round(float64(d)/float64(interval)), 64))
}

// syncFacts is what the sync state is judged from, copied off the loop's
// state so that the metrics server can judge it at scrape time too.
type syncFacts struct {
	interval time.Duration
	dryRun   bool
	maxStep  time.Duration
	nets     []netFacts
	basis    *basis    // a copy
	applied  time.Time // time.Now() of the last correction applied; zero: none
	from     string    // who asked for it
	freq     float64
	freqOK   bool // a frequency discipline runs
	estim    int
	change   float64
	changed  time.Time
	// kernelTold: whether the kernel was last told synchronised
	// (kernelsync.go); nil where it is left alone or not told yet.
	kernelTold *bool
	// utcVia is the reference this host follows (or is), utcErr its
	// maxerror; "" for none (reference.go).
	utcVia string
	utcErr time.Duration
	// claiming: a reference host's claim; nil on other hosts.
	claiming *bool
}

// netFacts is one served network's part.
type netFacts struct {
	name   string
	state  election.State
	master string // its name; "" when none is known
	slaves int
	round  roundInfo
}

// syncFacts takes the facts on the loop.
func (d *Daemon) syncFacts() *syncFacts {
	s := &d.st
	f := &syncFacts{interval: d.cfg.Election.SyncInterval, dryRun: s.dryRun, maxStep: d.applier.MaxStep,
		applied: s.correctedAt, freq: s.frequencyPPM, change: s.freqChange, changed: s.freqChangedAt}
	if s.lastCorrection != nil {
		f.from = s.lastCorrection.From
	}
	if d.ks.k != nil && d.ks.last != nil {
		told := d.ks.last.Synchronised
		f.kernelTold = &told
	}
	if s.basis != nil {
		b := *s.basis
		f.basis = &b
	}
	if ppm, n, ok := d.applier.Frequency(); ok {
		f.freq, f.estim, f.freqOK = ppm, n, true
	} else if cs, err := d.clock.State(); err == nil {
		f.freq = cs.FrequencyPPM
	}
	f.utcVia, f.utcErr = d.utcVia()
	if d.ref != nil {
		c := d.ref.health.claiming
		f.claiming = &c
	}
	for _, rt := range d.runtimes {
		n := netFacts{name: rt.network.String(), state: d.host.State(rt.i), slaves: len(rt.st.slaves), round: rt.st.round}
		if m, ok := d.host.Master(rt.i); ok {
			n.master = m.Name
		}
		if !n.state.IsMaster() {
			n.slaves = 0 // the list is the master's
		}
		f.nets = append(f.nets, n)
	}
	return f
}

// publishSync hands the facts to the metrics server; the loop calls it
// after every event.
func (d *Daemon) publishSync() {
	if d.metrics != nil {
		d.syncPub.Store(d.syncFacts())
	}
}

// late is how old the last correction (slave) or round (master) may be
// for the host to count as synchronised: 2 sync intervals, so one round
// lost or late does not flip the state.
func (f *syncFacts) late() time.Duration { return 2 * f.interval }

// judge is the sync state and why (README, "Is it synchronised?").
func (f *syncFacts) judge(now time.Time, alarm clocksync.AlarmState) (state, reason string) {
	if alarm.On {
		return control.InAlarm, fmt.Sprintf("the clock is %v from network time, beyond max-step %v: `timedc step --to-network` steps it there", alarm.Offset, f.maxStep)
	}
	if f.dryRun {
		return control.Unsynchronised, "dry-run clock: corrections are computed and shown, never applied"
	}
	late := f.late()
	for _, n := range f.nets {
		if n.state != election.Slave {
			continue
		}
		switch {
		case n.master == "":
			return control.Unsynchronised, "slave waiting for a master on " + n.name
		case f.applied.IsZero() || f.from != n.master:
			return control.Unsynchronised, fmt.Sprintf("slave of %s, no correction from it yet", n.master)
		case now.Sub(f.applied) > late:
			return control.Unsynchronised, fmt.Sprintf("slave of %s, whose last correction was %v ago: more than 2 sync intervals (%v)",
				n.master, roundDur(now.Sub(f.applied)), late)
		}
		if f.utcVia == n.master {
			return control.Synchronised, fmt.Sprintf("synchronised to UTC via %s (its kernel maxerror %v): slave of %s, whose last correction was applied %v ago",
				n.master, roundDur(f.utcErr), n.master, roundDur(now.Sub(f.applied)))
		}
		return control.Synchronised, fmt.Sprintf("slave of %s, whose last correction was applied %v ago", n.master, roundDur(now.Sub(f.applied)))
	}
	var parts []string
	for _, n := range f.nets {
		r := n.round
		switch {
		case !n.state.IsMaster():
			return control.Unsynchronised, fmt.Sprintf("%s on %s: no master yet", n.state, n.name)
		case n.slaves == 0:
			parts = append(parts, "master alone on "+n.name+": its clock is the network time")
		case r.at.IsZero():
			return control.Unsynchronised, fmt.Sprintf("master of %d slaves on %s, no round measured yet", n.slaves, n.name)
		case now.Sub(r.at) > late:
			return control.Unsynchronised, fmt.Sprintf("master on %s, whose last round was %v ago: more than 2 sync intervals (%v)", n.name, roundDur(now.Sub(r.at)), late)
		case r.measured == 0:
			return control.Unsynchronised, fmt.Sprintf("master on %s, whose last round measured none of its %d slaves", n.name, r.slaves)
		default:
			parts = append(parts, fmt.Sprintf("master on %s, whose last round %v ago measured %d of %d slaves", n.name, roundDur(now.Sub(r.at)), r.measured, r.slaves))
		}
	}
	if len(parts) == 0 {
		return control.Unsynchronised, "no network served"
	}
	if f.utcVia != "" {
		parts = append([]string{fmt.Sprintf("a reference: its clock, kept on UTC by another program (kernel maxerror %v), is the network time", roundDur(f.utcErr))}, parts...)
	}
	return control.Synchronised, strings.Join(parts, "; ")
}

// alone: a master of no slaves on every network it serves.
func (f *syncFacts) alone() bool {
	for _, n := range f.nets {
		if !n.state.IsMaster() || n.slaves > 0 {
			return false
		}
	}
	return len(f.nets) > 0
}

// view is the control socket's Sync at now.
func (f *syncFacts) view(now time.Time, alarm clocksync.AlarmState) *control.Sync {
	v := &control.Sync{Basis: "none", FrequencyPPM: f.freq, FrequencyChangePPM: f.change, FrequencyEstimates: f.estim,
		SyncIntervalSecs: f.interval.Seconds()}
	v.State, v.Reason = f.judge(now, alarm)
	if !f.applied.IsZero() {
		v.LastCorrectionAgeSecs = secsPtr(now.Sub(f.applied))
	}
	if !f.changed.IsZero() {
		v.FrequencyChangeAgeSecs = secsPtr(now.Sub(f.changed))
	}
	switch {
	case alarm.On:
		v.Basis, v.OffsetSecs = "alarm", secsPtr(alarm.Offset)
	case f.alone() && !f.dryRun:
		v.Basis, v.OffsetSecs, v.ErrorBoundSecs = "alone", secsPtr(0), secsPtr(0)
	case f.basis != nil:
		b := f.basis
		off, pending := b.offsetAt(now)
		v.Basis, v.BasisFrom, v.BasisAgeSecs = b.kind, b.from, secsPtr(now.Sub(b.at))
		v.OffsetSecs, v.PendingSlewSecs = secsPtr(off), pending.Seconds()
		if e := b.boundAt(now, f.interval); e >= 0 {
			v.ErrorBoundSecs = secsPtr(e)
		}
	}
	if f.utcVia != "" && v.State == control.Synchronised {
		v.UTCVia, v.ReferenceMaxErrorSecs = f.utcVia, secsPtr(f.utcErr)
		off, bound := f.offsetBound(now, v)
		if f.claiming != nil && *f.claiming {
			off, bound = 0, 0 // its clock is the network time
		}
		v.UTCBoundSecs = secsPtr(f.utcErr + off + bound)
	}
	return v
}

// offsetBound is this host's distance from network time now, as v
// estimates it: its offset, and the offset's error bound, where a slave,
// which does not know the bound, takes clocksync's least measurement
// error grown since its correction (as the kernel is told, kernelsync.go).
func (f *syncFacts) offsetBound(now time.Time, v *control.Sync) (off, bound time.Duration) {
	if v.OffsetSecs != nil {
		off = time.Duration(math.Round(math.Abs(*v.OffsetSecs) * 1e9))
	}
	switch {
	case v.ErrorBoundSecs != nil:
		bound = time.Duration(math.Round(*v.ErrorBoundSecs * 1e9))
	case f.basis != nil:
		b := *f.basis
		b.bound = clocksync.DefaultMinErrorBound
		bound = b.boundAt(now, f.interval)
	default:
		bound = clocksync.DefaultMinErrorBound
	}
	return off, bound
}

func secsPtr(d time.Duration) *float64 {
	s := d.Seconds()
	return &s
}

func roundDur(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// roundBasis is the basis a master's round gives once its own share (own,
// the network time minus its clock) has been applied as a: the clock was
// −own from network time, known within the measurements' largest error
// bound (none under a date change's dictate: the master's clock is the
// time then).
func (d *Daemon) roundBasis(r roundInfo, a clocksync.Applied, applied bool) *basis {
	b := &basis{kind: "round", from: d.hostname, at: r.at, before: -r.offset, bound: r.bound}
	if r.dictated {
		b.before, b.bound = 0, 0
	}
	if applied && !d.st.dryRun {
		b.moved, b.slewed = a.By, a.Action == clocksync.Slewed
	}
	return b
}

// sources lists the hosts this daemon measures or follows, network by
// network: as master its slaves, by name; as slave (or between masters)
// the master it knows.
func (d *Daemon) sources(now time.Time) *control.Sources {
	out := &control.Sources{Hostname: d.hostname, Sources: []control.Source{}}
	interval := d.cfg.Election.SyncInterval
	for _, rt := range d.runtimes {
		net := rt.network.String()
		if d.host.State(rt.i).IsMaster() {
			names := make([]string, 0, len(rt.st.slaves))
			for name := range rt.st.slaves {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				out.Sources = append(out.Sources, slaveSource(*rt.st.slaves[name], net, now))
			}
			continue
		}
		if m, ok := d.host.Master(rt.i); ok && m.Name != d.hostname {
			src := d.masterSource(m, &rt.st.heard, net, now, interval)
			if r, ok := d.host.ReferenceOf(rt.i, m.Addr); ok && r.Name == m.Name {
				src.ReferenceMaxErrorSecs = secsPtr(grownMaxError(r, now))
			}
			out.Sources = append(out.Sources, src)
		}
	}
	return out
}

// slaveSource is a slave's row; sl is copied, for the answer leaves the
// loop.
func slaveSource(sl control.Slave, net string, now time.Time) control.Source {
	src := control.Source{Name: sl.Name, Address: sl.Address, Network: net, Role: "slave", State: sl.State, Reach: sl.Reach,
		Method: sl.Method, Stamps: sl.Stamps, Failures: sl.Failures}
	if !sl.LastSeen.IsZero() {
		src.OffsetSecs, src.ErrorBoundSecs, src.RTTSecs = &sl.OffsetSecs, &sl.ErrorBoundSecs, &sl.RTTSecs
		src.AgeSecs = secsPtr(now.Sub(sl.LastSeen))
	}
	return src
}

// masterSource is the master's row: its last correction, and how it
// measures this host, as seen from here: its probes, or, when
// corrections come without probes, ICMP timestamps (the kernel answers
// them unseen).
func (d *Daemon) masterSource(m election.Peer, h *heardMaster, net string, now time.Time, interval time.Duration) control.Source {
	src := control.Source{Name: m.Name, Address: m.Addr.String(), Network: net, Role: "master", State: "new"}
	if h.name != m.Name || h.at.IsZero() {
		return src
	}
	late := 2 * interval
	src.State = "current"
	if now.Sub(h.at) > late {
		src.State = "silent"
	}
	src.Reach = h.reachAt(now, interval)
	src.OffsetSecs, src.AgeSecs = secsPtr(h.offset), secsPtr(now.Sub(h.at))
	if at, ok := d.st.probes[m.Addr]; ok && now.Sub(at) <= late {
		src.Method = "probe"
	} else if now.Sub(h.at) <= late {
		src.Method = "icmp"
	}
	return src
}

// methodOf is how host was last measured: the fallback measurer knows;
// without ICMP every measurement is a probe.
func (d *Daemon) methodOf(host netip.AddrPort) string {
	if f, ok := d.measurer.(*fallbackMeasurer); ok {
		return f.method(host)
	}
	return "probe"
}

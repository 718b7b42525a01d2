//go:build vm

package vm

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// specs are the errors the guests boot with: clocks stepped up to ±3 s
// off (on top of the RTC's whole second, up to 1 s behind the host's)
// and kernel frequencies up to ±45 ppm off, 90 ppm apart at most. g4 is
// a client that may not be master: cut off, it has no election to win,
// and stays unsynchronised (a master alone is synchronised by TSP's
// definition, docs/operating.md "Is it synchronised?").
var specs = []guestSpec{
	{step: +3, freqPPM: +45},
	{step: -3, freqPPM: -45},
	{step: +1, freqPPM: +20},
	{step: -2, freqPPM: -10, slaveOnly: true},
}

// The bounds, from the fast profile's timers. None is a figure: the
// figures are reported, and these only catch what is broken.
const (
	// electionBound is how long slaves take to replace a master that
	// vanished: the last ADJTIME restarts each slave's election timer,
	// drawn from [electionMin, electionMax]; one collision of two
	// candidates doubles the range once; a few retransmissions (fast
	// profile: 620 ms to a failed reliable send) and the slack.
	electionBound = electionMax + (electionMin + 2*(electionMax-electionMin)) + 2*time.Second + slack // 51 s

	// coldStartBound: daemons started together find no master; one is
	// master after the cold-start delay, or failing that the election
	// timers elect one.
	coldStartBound = electionBound

	// convergeRounds: the first corrections step (makestep), the rest
	// slew at most 500 µs a second; ten rounds leave room for a round or
	// two lost to a loaded machine.
	convergeRounds = 10

	// within is "synchronised" as the observer sees it: every clock
	// within 1 ms of every other.
	within = time.Millisecond

	// After convergeRounds the kernel frequencies must be closer
	// together than they were injected (90 ppm apart): the discipline has
	// moved them towards each other. No tighter: every guest counts time
	// with its HPET, which QEMU runs at the host's rate, so the injected
	// errors are the only ones, but the discipline's estimate over a
	// baseline T is off by up to 2·E/T for corrections off by E
	// (clocksync.Discipline), and under TCG E is 0.3–1 ms (what the
	// observer's readings show): over the ~30 s after the first rounds'
	// steps, ±20–70 ppm. Runs here left 6–34 ppm between the kernel
	// frequencies after ten rounds, one estimate swinging by 35 ppm from
	// a round to the next; the figures show each run's.

	// maxInfluence is the configured bound (max-source-influence, 50 ms)
	// on how far one host can move the network time in a round: a clock
	// 30 s off must not move the others by more.
	maxInfluence = 50 * time.Millisecond
)

// suite is the network of guests the scenarios share, in order: each
// scenario starts from where the one before left the guests.
type suite struct {
	n       *network
	gs      []*guest // the guests still up
	master  string
	release time.Time // when the daemons were started together
}

func TestRealKernels(t *testing.T) {
	n := newNetwork(t)
	s := &suite{n: n}
	for i, sp := range specs {
		s.gs = append(s.gs, n.addGuest(i, sp))
	}
	start := time.Now()
	if _, err := each(s.gs, func(g *guest) (struct{}, error) { return struct{}{}, g.boot() }); err != nil {
		t.Fatal(err)
	}
	var accels []string
	for _, g := range s.gs {
		accels = append(accels, g.accel)
	}
	report(t, "boot of 4 guests at once, QEMU start to shell", "%.1f s (%s; kernel %s)", time.Since(start).Seconds(), strings.Join(slices.Compact(accels), ","), assets["kver"])
	scenarios := []struct {
		name string
		f    func(*testing.T)
	}{
		{"ColdStart", s.coldStart},
		{"Frequency", s.frequency},
		{"KernelSyncState", s.kernelSync},
		{"DriftFileReboot", s.driftFile},
		{"StepForward30s", s.stepForward},
		{"MasterPowerOff", s.masterOff},
		{"CutOff", s.cutOff},
		{"ReferenceUTC", s.referenceUTC},
	}
	for i, sc := range scenarios {
		if !t.Run(sc.name, sc.f) {
			var rest []string
			for _, r := range scenarios[i+1:] {
				rest = append(rest, r.name)
			}
			if len(rest) > 0 {
				t.Errorf("%s failed: the guests' state is unknown, so %s did not run", sc.name, strings.Join(rest, ", "))
			}
			return
		}
	}
	// The discipline's estimates keep improving with the baseline: the
	// kernel frequencies at the end, beside the ten rounds' figures.
	if s.master == "" {
		return // no scenario ran (go test -run)
	}
	if k, err := each(s.gs, (*guest).adjtimex); err == nil {
		rounds := time.Since(s.release).Seconds() / syncInterval.Seconds()
		for _, g := range s.gs {
			report(t, "kernel frequency of "+g.name+" at the end", "%+.3f ppm (%+.3f from the master's, %s), %.0f rounds after the start",
				k[g.name].FreqPPM, k[g.name].FreqPPM-k[s.master].FreqPPM, s.master, rounds)
		}
	}
}

// guest returns the guest called name.
func (s *suite) guest(name string) *guest {
	for _, g := range s.gs {
		if g.name == name {
			return g
		}
	}
	panic("no guest " + name)
}

// slaves are the guests up but the master.
func (s *suite) slaves() []*guest {
	var out []*guest
	for _, g := range s.gs {
		if g.name != s.master {
			out = append(out, g)
		}
	}
	return out
}

// pollTime is how long awaitOneMaster's last poll of every status took:
// how far apart the statuses it judged by were read.
var pollTime time.Duration

// awaitOneMaster waits for one master among gs, every other its slave;
// it returns the master and when that was first seen.
func awaitOneMaster(gs []*guest, bound time.Duration) (string, time.Time, error) {
	var master string
	_, err := await(bound, 200*time.Millisecond, func() (bool, string) {
		start := time.Now()
		st, err := each(gs, (*guest).status)
		pollTime = time.Since(start)
		if err != nil {
			return false, err.Error()
		}
		var why string
		master, why = oneMaster(st)
		return master != "", why
	})
	return master, time.Now(), err
}

// awaitWithin waits until the observer sees every clock of gs within
// bound of every other; it returns the last readings.
func (s *suite) awaitWithin(gs []*guest, bound, limit time.Duration) (map[string]reading, error) {
	var rs map[string]reading
	_, err := await(limit, 500*time.Millisecond, func() (bool, string) {
		var err error
		if rs, err = s.n.observe(gs); err != nil {
			return false, err.Error()
		}
		sp, _ := spread(rs)
		return sp < bound, "observer: " + describeReadings(rs)
	})
	return rs, err
}

// ---- 1. cold start ----

func (s *suite) coldStart(t *testing.T) {
	// Before the daemons run, nothing answers the probe: the observer
	// falls back to ICMP timestamps (ms).
	rs, err := s.n.observe(s.gs)
	if err != nil {
		t.Fatal(err)
	}
	sp, _ := spread(rs)
	report(t, "clocks at the start, as the observer saw them", "%s; spread %.3f s", describeReadings(rs), sp.Seconds())
	for _, g := range s.gs {
		role := "may be master"
		if g.spec.slaveOnly {
			role = "slave only"
		}
		report(t, "injected "+g.name, "clock stepped %+d s, frequency %+.0f ppm; %s", g.spec.step, g.spec.freqPPM, role)
	}

	s.release = time.Now()
	if _, err := each(s.gs, func(g *guest) (struct{}, error) { return struct{}{}, g.startTimed() }); err != nil {
		t.Fatal(err)
	}
	report(t, "daemons started (4 commands through the virtio ports)", "within %.2f s", time.Since(s.release).Seconds())
	master, at, err := awaitOneMaster(s.gs, coldStartBound)
	if err != nil {
		t.Fatalf("one master after a cold start: %v", err)
	}
	s.master = master
	report(t, "one master, every other guest its slave", "%.1f s after the start (%s; polled every 0.2 s, a poll of the 4 statuses taking %.1f s)", at.Sub(s.release).Seconds(), master, pollTime.Seconds())

	rs, err = s.awaitWithin(s.gs, within, coldStartBound+convergeRounds*syncInterval)
	if err != nil {
		t.Fatalf("clocks within %v: %v", within, err)
	}
	sp, bound := spread(rs)
	took := time.Since(s.release)
	report(t, "all clocks within 1 ms (observer)", "%.1f s after the start (%.1f rounds); spread %.3f ms ±%.3f", took.Seconds(), took.Seconds()/syncInterval.Seconds(), sp.Seconds()*1e3, bound.Seconds()*1e3)
}

// ---- 3. frequency ----

// frequency: after convergeRounds rounds, the kernel frequencies agree,
// the injected errors absorbed; the observer, sampling every guest each
// second over the last rounds, sees the rates agree within its noise.
func (s *suite) frequency(t *testing.T) {
	end := s.release.Add(convergeRounds * syncInterval)
	if minEnd := time.Now().Add(4 * syncInterval); end.Before(minEnd) {
		end = minEnd // at least 4 rounds of samples
	}
	type sample struct {
		at time.Time
		rs map[string]reading
	}
	var samples []sample
	var spreads []float64
	for time.Now().Before(end) {
		rs, err := s.n.observe(s.gs)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, sample{time.Now(), rs})
		sp, _ := spread(rs)
		spreads = append(spreads, sp.Seconds())
		time.Sleep(time.Second) // the sampling period, not a synchronisation
	}
	slices.Sort(spreads)
	window := samples[len(samples)-1].at.Sub(samples[0].at)
	report(t, "spread of the clocks (observer), p50 / max", "%.3f / %.3f ms over %d samples, %.0f s", median(spreads)*1e3, spreads[len(spreads)-1]*1e3, len(spreads), window.Seconds())

	k, err := each(s.gs, (*guest).adjtimex)
	if err != nil {
		t.Fatal(err)
	}
	ref := k[s.master].FreqPPM
	var injected, now []float64
	for _, g := range s.gs {
		injected = append(injected, g.spec.freqPPM)
		now = append(now, k[g.name].FreqPPM)
	}
	report(t, "kernel frequencies, max − min", "%.1f ppm after %.0f rounds (injected: %.0f ppm)",
		freqSpread(now), time.Since(s.release).Seconds()/syncInterval.Seconds(), freqSpread(injected))
	if freqSpread(now) >= freqSpread(injected) {
		t.Errorf("kernel frequencies %.1f ppm apart after %d rounds, injected %.0f ppm apart: the discipline did not bring them together",
			freqSpread(now), convergeRounds, freqSpread(injected))
	}
	var bounds []float64
	for _, sm := range samples {
		bounds = append(bounds, maxBound(sm.rs).Seconds())
	}
	// The worst a rate from two readings at the window's ends could be
	// off: their error bounds over the window.
	noise := 2 * median(bounds) / window.Seconds() * 1e6
	for _, g := range s.gs {
		var xs, ys []float64
		for _, sm := range samples {
			xs = append(xs, sm.at.Sub(samples[0].at).Seconds())
			ys = append(ys, sm.rs[g.name].Offset)
		}
		rate, se := slope(xs, ys)
		report(t, "frequency of "+g.name, "injected %+.1f ppm, kernel now %+.3f ppm (%+.3f from the master's); rate against the host %+.2f ppm ±%.2f (observer: regression's standard error; readings' bound over the window ±%.1f)",
			g.spec.freqPPM, k[g.name].FreqPPM, k[g.name].FreqPPM-ref, rate*1e6, se*1e6, noise)
		if g.name != s.master {
			report(t, g.name+" against the master's frequency", "%+.0f ppm injected, %+.1f ppm left",
				g.spec.freqPPM-s.guest(s.master).spec.freqPPM, k[g.name].FreqPPM-ref)
		}
	}
}

// freqSpread is max − min of the frequencies.
func freqSpread(ppm []float64) float64 { return slices.Max(ppm) - slices.Min(ppm) }

// slope is the least-squares slope of ys over xs, and its standard
// error.
func slope(xs, ys []float64) (float64, float64) {
	n := float64(len(xs))
	var mx, my float64
	for i := range xs {
		mx += xs[i] / n
		my += ys[i] / n
	}
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	b := sxy / sxx
	var rss float64
	for i := range xs {
		r := ys[i] - my - b*(xs[i]-mx)
		rss += r * r
	}
	return b, math.Sqrt(rss / (n - 2) / sxx)
}

// ---- 2. kernel state ----

// kernelSyncBound: the daemon tells the kernel at its next correction,
// one round, after being synchronised.
const kernelSyncBound = 2*syncInterval + slack

// kernelSync: synchronised daemons clear the kernel's STA_UNSYNC and keep
// its maxerror current.
func (s *suite) kernelSync(t *testing.T) {
	var k map[string]kernelClock
	took, err := await(kernelSyncBound, 500*time.Millisecond, func() (bool, string) {
		var err error
		if k, err = each(s.gs, (*guest).adjtimex); err != nil {
			return false, err.Error()
		}
		for _, g := range s.gs {
			if c := k[g.name]; c.unsync() || c.MaxError >= time.Second {
				return false, fmt.Sprintf("%s: %v", g.name, c)
			}
		}
		return true, ""
	})
	if err != nil {
		t.Fatalf("every kernel synchronised (STA_UNSYNC clear, maxerror < 1 s): %v", err)
	}
	for _, g := range s.gs {
		report(t, "kernel state of "+g.name, "%v", k[g.name])
	}
	report(t, "waited for it", "%.1f s", took.Seconds())
}

// ---- 5. the drift file across a reboot ----

func (s *suite) driftFile(t *testing.T) {
	// The slave whose kernel frequency is now furthest from what its
	// boot sets: after the reboot, the drift file's value and the
	// injected one are then far apart.
	k, err := each(s.slaves(), (*guest).adjtimex)
	if err != nil {
		t.Fatal(err)
	}
	var g *guest
	for _, c := range s.slaves() {
		if g == nil || math.Abs(k[c.name].FreqPPM-c.spec.freqPPM) > math.Abs(k[g.name].FreqPPM-g.spec.freqPPM) {
			g = c
		}
	}
	if err := g.stopTimed(); err != nil {
		t.Fatal(err)
	}
	stopped, err := g.adjtimex()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(g.dir, "state", "drift")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: the drift file after stop: %v", g.name, err)
	}
	saved, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		t.Fatalf("%s: drift file %q: %v", g.name, b, err)
	}
	// 1/65536 ppm: the kernel's unit.
	if d := saved - stopped.FreqPPM; math.Abs(d) > 2.0/65536 {
		t.Errorf("%s: drift file %+.4f ppm, kernel %+.4f ppm at stop", g.name, saved, stopped.FreqPPM)
	}
	if d := math.Abs(saved - g.spec.freqPPM); d < 5 {
		t.Fatalf("%s: drift file %+.3f ppm is within 5 ppm of the injected %+.0f: the reboot would not tell them apart", g.name, saved, g.spec.freqPPM)
	}

	from := g.ch.offset()
	logFrom := fileSize(g.timedLog())
	rebootAt := time.Now()
	if err := g.ch.send("sync; reboot -f"); err != nil {
		t.Fatal(err)
	}
	if err := g.awaitReady(from, bootBound); err != nil {
		t.Fatal(err)
	}
	booted := time.Since(rebootAt)
	atBoot, err := g.adjtimex()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.startTimed(); err != nil {
		t.Fatal(err)
	}
	// The daemon sets the file's value at start, before any round: read
	// it as soon as the daemon answers.
	if _, err := await(30*time.Second, 200*time.Millisecond, func() (bool, string) {
		_, err := g.status()
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		t.Fatal(err)
	}
	started, err := g.adjtimex()
	if err != nil {
		t.Fatal(err)
	}
	report(t, g.name+" drift file", "%+.3f ppm written at stop; after the reboot the kernel had %+.3f ppm (injected), and %+.3f ppm once timed answered",
		saved, atBoot.FreqPPM, started.FreqPPM)
	report(t, g.name+" reboot to shell", "%.1f s", booted.Seconds())
	if d := started.FreqPPM - saved; math.Abs(d) > 1 {
		t.Errorf("%s: kernel frequency %+.3f ppm after the restart, drift file %+.3f ppm: not taken from the file", g.name, started.FreqPPM, saved)
	}
	if log := readFrom(g.timedLog(), logFrom); !strings.Contains(log, "frequency estimate from the drift file") {
		t.Errorf("%s: no \"frequency estimate from the drift file\" in timed's log after the reboot:\n%s", g.name, tailString(log, 20))
	}

	back := time.Now()
	master, _, err := awaitOneMaster(s.gs, electionBound)
	if err != nil {
		t.Fatalf("%s back as a slave: %v", g.name, err)
	}
	if master != s.master {
		t.Logf("master changed from %s to %s while %s rebooted", s.master, master, g.name)
		s.master = master
	}
	if _, err := s.awaitWithin(s.gs, within, convergeRounds*syncInterval+slack); err != nil {
		t.Fatalf("%s within 1 ms again: %v", g.name, err)
	}
	report(t, g.name+" within 1 ms of the others again", "%.1f s after timed started", time.Since(back).Seconds())
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func readFrom(path string, off int64) string {
	b, err := os.ReadFile(path)
	if err != nil || off > int64(len(b)) {
		return ""
	}
	return string(b[off:])
}

func tailString(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// ---- 4. a clock stepped 30 s ahead ----

// stepBound: the master measures the stepped slave at its next round and
// sends the correction, a step (30 s is beyond step-threshold, 20 s, and
// within max-step, 1000 s); a round lost to the load besides.
const stepBound = 3*syncInterval + slack

func (s *suite) stepForward(t *testing.T) {
	g := s.slaves()[0]
	var others []*guest
	for _, o := range s.gs {
		if o != g {
			others = append(others, o)
		}
	}
	before, err := s.n.observe(others)
	if err != nil {
		t.Fatal(err)
	}
	g.must(`date -s "@$(($(date +%s) + 30))" >/dev/null`)
	stepped := time.Now()
	var worst time.Duration // the others' largest move from before
	var seen bool
	_, err = await(stepBound, 500*time.Millisecond, func() (bool, string) {
		rs, err := s.n.observe(s.gs)
		if err != nil {
			return false, err.Error()
		}
		var offs []float64
		for _, o := range others {
			worst = max(worst, seconds(math.Abs(rs[o.name].Offset-before[o.name].Offset)))
			offs = append(offs, rs[o.name].Offset)
		}
		d := seconds(rs[g.name].Offset - median(offs))
		if d > time.Second {
			seen = true
		}
		return seen && d.Abs() < 10*time.Millisecond, fmt.Sprintf("%s %+.3f s from the others", g.name, d.Seconds())
	})
	if err != nil {
		t.Fatalf("%s stepped 30 s ahead, back within 10 ms of the others: %v", g.name, err)
	}
	took := time.Since(stepped)
	report(t, g.name+" stepped +30 s: back within 10 ms", "%.1f s (%.1f rounds)", took.Seconds(), took.Seconds()/syncInterval.Seconds())
	report(t, "the others' largest move meanwhile (observer)", "%.3f ms (bound %v; their own drift against the host included)", worst.Seconds()*1e3, maxInfluence)
	if worst > maxInfluence {
		t.Errorf("the others moved %v while %s was 30 s ahead: they followed it (bound %v)", worst, g.name, maxInfluence)
	}
	st, err := g.status()
	if err != nil {
		t.Fatal(err)
	}
	if c := st.LastCorrection; c != nil {
		report(t, g.name+" last correction", "%s of %+.6f s, from %s", c.Kind, c.Secs, c.From)
	}
	if _, err := s.awaitWithin(s.gs, within, convergeRounds*syncInterval+slack); err != nil {
		t.Fatalf("within 1 ms again: %v", err)
	}
	report(t, "all within 1 ms again", "%.1f s after the step", time.Since(stepped).Seconds())
}

// ---- 2. the master powered off ----

func (s *suite) masterOff(t *testing.T) {
	old := s.guest(s.master)
	if err := old.ch.send("poweroff -f"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-old.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: QEMU still runs 30 s after poweroff -f", old.name)
	}
	off := time.Now()
	s.gs = slices.DeleteFunc(s.gs, func(g *guest) bool { return g == old })
	master, at, err := awaitOneMaster(s.gs, electionBound)
	if err != nil {
		t.Fatalf("a new master among the survivors: %v", err)
	}
	if master == old.name {
		t.Fatalf("%s is master though powered off", master)
	}
	s.master = master
	report(t, "new master after "+old.name+" powered off", "%s, %.1f s after (election timer %v–%v)", master, at.Sub(off).Seconds(), electionMin, electionMax)
	var k map[string]kernelClock
	_, err = await(kernelSyncBound, 500*time.Millisecond, func() (bool, string) {
		if k, err = each(s.gs, (*guest).adjtimex); err != nil {
			return false, err.Error()
		}
		for _, g := range s.gs {
			if k[g.name].unsync() {
				return false, g.name + ": " + k[g.name].String()
			}
		}
		return true, ""
	})
	if err != nil {
		t.Fatalf("the survivors' kernels synchronised under the new master: %v", err)
	}
	report(t, "survivors' kernels synchronised again", "%.1f s after the power-off", time.Since(off).Seconds())
}

// ---- 2. a guest cut off ----

// cutOffBound: a slave whose master falls silent is unsynchronised after
// 2 sync intervals (docs/operating.md, "Is it synchronised?"), and tells the kernel
// at that change of state.
const cutOffBound = 2*syncInterval + slack

// cutOff: the slave-only guest, its tap taken down on the bridge, sets
// STA_UNSYNC again and keeps it; back on the network, it clears it.
func (s *suite) cutOff(t *testing.T) {
	var g *guest
	for _, c := range s.gs {
		if c.spec.slaveOnly {
			g = c
		}
	}
	s.n.ip("link", "set", g.tap, "down")
	cut := time.Now()
	var k kernelClock
	_, err := await(cutOffBound, 500*time.Millisecond, func() (bool, string) {
		var err error
		if k, err = g.adjtimex(); err != nil {
			return false, err.Error()
		}
		return k.unsync(), k.String()
	})
	if err != nil {
		t.Fatalf("%s cut off: STA_UNSYNC back: %v", g.name, err)
	}
	report(t, g.name+" cut off: STA_UNSYNC back", "%.1f s after the cut (2 sync intervals: %v); %v", time.Since(cut).Seconds(), 2*syncInterval, k)
	// Past the election timer, when a daemon that may be master would be
	// master alone, and synchronised: a slave-only one stays
	// unsynchronised.
	for time.Since(cut) < electionMax {
		if k, err = g.adjtimex(); err != nil {
			t.Fatal(err)
		}
		if !k.unsync() {
			t.Fatalf("%s cut off: STA_UNSYNC cleared %.1f s after the cut: %v", g.name, time.Since(cut).Seconds(), k)
		}
		time.Sleep(time.Second) // the observation window's sampling, not a synchronisation
	}

	s.n.ip("link", "set", g.tap, "up")
	healed := time.Now()
	_, err = await(electionBound, 500*time.Millisecond, func() (bool, string) {
		var err error
		if k, err = g.adjtimex(); err != nil {
			return false, err.Error()
		}
		return !k.unsync(), k.String()
	})
	if err != nil {
		t.Fatalf("%s reconnected: kernel synchronised again: %v", g.name, err)
	}
	report(t, g.name+" reconnected: kernel synchronised again", "%.1f s after the link came back; %v", time.Since(healed).Seconds(), k)
}

package netbench

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/timed-project/timed/clocksync"
)

// Every name of a run carries its id, fits an interface name (IFNAMSIZ:
// 15 bytes), and no two daemons share a name or an address; two runs
// share none of their names.
func TestNames(t *testing.T) {
	a, err := NewNames()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewNames()
	if err != nil {
		t.Fatal(err)
	}
	if a.Run == b.Run || len(a.Run) != 6 {
		t.Fatalf("run ids %q and %q: want two different 6-digit ids", a.Run, b.Run)
	}
	seen := map[string]bool{}
	add := func(kind, s string) {
		if seen[s] {
			t.Fatalf("%s %q given twice", kind, s)
		}
		seen[s] = true
	}
	for _, n := range []Names{a, b} {
		add("bridge", n.Bridge())
		if len(n.Bridge()) > 15 || !strings.Contains(n.Bridge(), n.Run) {
			t.Fatalf("bridge %q", n.Bridge())
		}
		for i := range MaxDaemons {
			h, p := n.Veth(i)
			for _, s := range []string{h, p, n.Netns(i)} {
				add("name", s)
				if !strings.Contains(s, n.Run) || !strings.HasPrefix(s, Prefix) {
					t.Fatalf("%q: not marked with the run %s", s, n.Run)
				}
			}
			if len(h) > 15 || len(p) > 15 {
				t.Fatalf("veth %q/%q longer than an interface name may be", h, p)
			}
			addr := n.Addr(i)
			if !Subnet.Contains(addr) || addr == Subnet.Addr() || addr.As4()[3] == 0 || addr.As4()[3] == 255 {
				t.Fatalf("daemon %d: address %v", i, addr)
			}
			if n == a {
				add("address", addr.String())
				add("host", n.Host(i))
			}
		}
	}
	for i := range MaxDaemons {
		if a6, ll := a.Addr6(i), a.LinkLocal(i); !Subnet6.Contains(a6) || a6 == Subnet6.Addr() || !ll.IsLinkLocalUnicast() || seen[a6.String()] || seen[ll.String()] {
			t.Fatalf("daemon %d: IPv6 addresses %v, %v", i, a6, ll)
		} else {
			seen[a6.String()], seen[ll.String()] = true, true
		}
	}
	for s, want := range map[string]Family{"ipv4": IPv4, "IPv6": IPv6, "dual": Dual} {
		if f, err := ParseFamily(s); err != nil || f != want {
			t.Fatalf("ParseFamily(%q) = %v, %v", s, f, err)
		}
	}
	if _, err := ParseFamily("inet6"); err == nil {
		t.Fatal("ParseFamily(inet6) accepted")
	}
	for _, bad := range []int{-1, 0, 1, MaxDaemons + 1} {
		if Check(bad) == nil {
			t.Fatalf("Check(%d) accepted", bad)
		}
	}
	if Check(2) != nil || Check(MaxDaemons) != nil {
		t.Fatal("Check refused a good N")
	}
}

func TestPercentileSpread(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct{ p, want float64 }{{0, 1}, {10, 1}, {50, 5}, {51, 6}, {95, 10}, {100, 10}} {
		if got := Percentile(xs, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if xs[0] != 5 {
		t.Error("Percentile sorted its argument")
	}
	if !math.IsNaN(Percentile(nil, 50)) || !math.IsNaN(Spread(nil)) {
		t.Error("no values: want NaN")
	}
	if got := Spread([]float64{-0.25, 0.5, 0.1}); got != 0.75 {
		t.Errorf("spread %v, want 0.75", got)
	}
}

// sample is a sample at s seconds whose offsets spread by spread.
func sample(s, spread float64) Sample {
	return Sample{At: time.Duration(s * float64(time.Second)), Offsets: []float64{0, spread, spread / 2}, Master: -1, Rounds: -1}
}

// ForGood: the first sample of the last run of samples under the bound,
// one over it anywhere later starts again, unanswered polls do not count.
func TestForGood(t *testing.T) {
	ss := []Sample{sample(1, 0.4), sample(2, 0.0005), sample(3, 0.002), sample(4, 0.0009),
		{At: 5 * time.Second, Master: -1}, sample(6, 0.00005), sample(7, 0.00002)}
	if at, ok := ForGood(ss, 1e-3, 0); !ok || at != 4*time.Second {
		t.Errorf("< 1 ms for good: %v %v, want 4s", at, ok)
	}
	if at, ok := ForGood(ss, 100e-6, time.Second); !ok || at != 6*time.Second {
		t.Errorf("< 100 µs for good: %v %v, want 6s", at, ok)
	}
	if _, ok := ForGood(ss, 100e-6, 2*time.Second); ok {
		t.Error("under 100 µs for the last second only: want not settled when 2 s are asked")
	}
	if _, ok := ForGood(append(ss, sample(8, 0.2)), 1e-3, 0); ok {
		t.Error("a spread over the bound at the end: want not settled")
	}
	if _, ok := ForGood(nil, 1, 0); ok {
		t.Error("no samples: want not settled")
	}
}

// Analyze: the master's time, the window's spread, the slaves' packets
// per slave per round and CPU; a master that changed in the window gives
// no packet figure.
func TestAnalyze(t *testing.T) {
	var ss []Sample
	for i := range 20 {
		s := sample(float64(i), 1/float64(i+1))
		if i >= 5 {
			s.Master = 1
			s.Rounds = float64(i - 5) // a round a second
			// Three daemons; the two slaves each exchange 26 packets a
			// round, the master 52.
			s.Packets = []uint64{uint64(26 * i), uint64(52 * i), uint64(26 * i)}
			// One LOOP a round among them, received by each slave.
			s.Loops = []uint64{uint64(i), uint64(i), uint64(i)}
			s.CPU = []float64{0.01 * float64(i), 0.1 * float64(i), 0.03 * float64(i)}
			s.Poll = time.Duration(i) * time.Millisecond
		}
		ss = append(ss, s)
	}
	f := Analyze(ss, 10*time.Second, time.Second)
	if !f.HasMaster || f.MasterAfter != 5*time.Second {
		t.Errorf("master after %v %v, want 5s", f.MasterAfter, f.HasMaster)
	}
	// The window is samples 10 to 19: spreads 1/11 … 1/20.
	if f.SpreadSamples != 10 || f.Max != 1.0/11 || f.P50 != 1.0/16 {
		t.Errorf("window: %d samples, p50 %v, max %v; want 10, 1/16, 1/11", f.SpreadSamples, f.P50, f.Max)
	}
	if f.PollP95 != 19*time.Millisecond {
		t.Errorf("p95 poll %v, want 19ms", f.PollP95)
	}
	if f.Rounds != 9 || f.PacketsPerSlaveRound != 26 || f.MeasurePacketsPerSlaveRound != 25 {
		t.Errorf("%v rounds, %v packets per slave per round, %v without LOOP; want 9, 26, 25", f.Rounds, f.PacketsPerSlaveRound, f.MeasurePacketsPerSlaveRound)
	}
	if math.Abs(f.CPUMaster-0.1) > 1e-9 || math.Abs(f.CPUSlave-0.01) > 1e-9 {
		t.Errorf("CPU master %v, slave %v; want 0.1, 0.01 (the median slave's: the lower of two)", f.CPUMaster, f.CPUSlave)
	}
	if f.Settled1ms {
		t.Error("spreads of 50 ms and more: not under 1 ms")
	}
	// 25 packets a second per slave without LOOP, from the release on
	// (the counts are 0 at 0 s) and over the window alike.
	if math.Abs(f.PerSlaveMinute-1500) > 1e-9 || math.Abs(f.PerSlaveMinuteSteady-1500) > 1e-9 {
		t.Errorf("%v packets per slave per minute, %v in the window; want 1500, 1500", f.PerSlaveMinute, f.PerSlaveMinuteSteady)
	}
	ss[len(ss)-1].Master = 0
	if f := Analyze(ss, 10*time.Second, time.Second); !math.IsNaN(f.PacketsPerSlaveRound) || !math.IsNaN(f.PerSlaveMinuteSteady) || math.IsNaN(f.PerSlaveMinute) {
		t.Errorf("master changed in the window: %v packets per slave per round, %v per minute in the window, want none; %v over the run, want one",
			f.PacketsPerSlaveRound, f.PerSlaveMinuteSteady, f.PerSlaveMinute)
	}
	if f := Analyze(nil, time.Second, 0); f.HasMaster || f.SpreadSamples != 0 || !math.IsNaN(f.P50) || !math.IsNaN(f.PerSlaveMinute) {
		t.Errorf("no samples: %+v", f)
	}
}

func TestClocks(t *testing.T) {
	a := Clocks(7, 50, 500*time.Millisecond, 50, clocksync.Oscillator{})
	b := Clocks(7, 50, 500*time.Millisecond, 50, clocksync.Oscillator{})
	c := Clocks(8, 50, 500*time.Millisecond, 50, clocksync.Oscillator{})
	if len(a) != 50 {
		t.Fatalf("%d clocks", len(a))
	}
	var lo, hi time.Duration
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("one seed, two draws")
		}
		if a[i].Offset.Abs() > 500*time.Millisecond || math.Abs(a[i].DriftPPM) > 50 || a[i].Offset%time.Microsecond != 0 {
			t.Fatalf("clock %d: %+v, outside ±500 ms, ±50 ppm or not whole µs", i, a[i])
		}
		lo, hi = min(lo, a[i].Offset), max(hi, a[i].Offset)
	}
	if hi-lo < 500*time.Millisecond {
		t.Errorf("50 offsets within %v: not spread over ±500 ms", hi-lo)
	}
	if a[0] == c[0] && a[1] == c[1] {
		t.Error("two seeds, one draw")
	}
	if got := (Clock{Offset: -1500 * time.Microsecond, DriftPPM: 12.5}).Spec(); got != "sim:offset=-1500us,drift=+12.500ppm" {
		t.Errorf("spec %q", got)
	}
	// Wandering clocks: each its own seed, and a spec the daemon parses
	// back to the same clock.
	w := Clocks(7, 50, 500*time.Millisecond, 50, clocksync.TypicalOscillator(3))
	seeds := map[uint64]bool{}
	for i := range w {
		if w[i].Offset != a[i].Offset || w[i].DriftPPM != a[i].DriftPPM {
			t.Fatalf("clock %d: the oscillator changed the offsets or drifts: %+v, %+v", i, w[i], a[i])
		}
		seeds[w[i].Osc.Seed] = true
		cfg, err := clocksync.ParseSimSpec(w[i].Spec())
		if err != nil || cfg.Osc != w[i].Osc {
			t.Fatalf("clock %d: %q parses to %+v, %v; want %+v", i, w[i].Spec(), cfg.Osc, err, w[i].Osc)
		}
	}
	if len(seeds) != len(w) {
		t.Errorf("%d clocks, %d seeds", len(w), len(seeds))
	}
}

func TestCounterSum(t *testing.T) {
	text := []byte(`# HELP timed_sync_rounds_total Master only: sync rounds measured, by network.
# TYPE timed_sync_rounds_total counter
timed_sync_rounds_total{network="10.99.0.0/16"} 12
timed_sync_rounds_total{network="peers"} 3
timed_sync_rounds_totalx 100
timed_state{network="x",state="master"} 1
`)
	if v, ok := CounterSum(text, "timed_sync_rounds_total"); !ok || v != 15 {
		t.Errorf("%v %v, want 15", v, ok)
	}
	if v, ok := CounterSum([]byte("timed_x 2.5\n"), "timed_x"); !ok || v != 2.5 {
		t.Errorf("unlabelled: %v %v", v, ok)
	}
	if _, ok := CounterSum(text, "timed_missing"); ok {
		t.Error("found a counter that is not there")
	}
}

// The table: a header and separator, then the measures, every line with
// as many columns, padded to one width per column; a failed N says why.
func TestTable(t *testing.T) {
	ok := Analyze([]Sample{sample(1, 0.002), {At: 2 * time.Second, Offsets: []float64{0, 35e-6}, Master: 0, Rounds: -1}}, time.Second, 0)
	ok.PerSlaveMinute, ok.PerSlaveMinuteSteady = 4.25, 2
	rs := []Result{{N: 5, Figures: ok, RSSMedian: 12 << 20, RSSMax: 13 << 20, Unsettled: true, Interval: 4 * time.Second},
		{N: 20, Figures: Analyze(nil, 0, 0), Err: errNoMaster}}
	out := Table(rs)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 11 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	width := utf8.RuneCountInString(lines[0])
	for _, l := range lines {
		if utf8.RuneCountInString(l) != width || strings.Count(l, "|") != 5 {
			t.Fatalf("ragged line %q in\n%s", l, out)
		}
	}
	for _, want := range []string{"| measure", "N=5", "N=20", "| ---", "2.0 s", "35 µs / 35 µs / 35 µs (not settled",
		"2.0 s (0.5 rounds)", "12.0 / 13.0 MB", "failed: no master / none", "4.2 / 2.0", "— / —", AnchorMaster, AnchorPackets, AnchorMinute} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

// TestTableFamilies: where a run was on IPv6, every column names its
// family; IPv4 alone keeps the plain N=… headers.
func TestTableFamilies(t *testing.T) {
	f := Analyze(nil, 0, 0)
	out := Table([]Result{{N: 20, Figures: f}, {N: 20, Family: IPv6, Figures: f}})
	if !strings.Contains(out, "N=20 IPv4") || !strings.Contains(out, "N=20 IPv6") {
		t.Errorf("headers in\n%s", out)
	}
	if out := Table([]Result{{N: 20, Figures: f}}); strings.Contains(out, "IPv4") {
		t.Errorf("IPv4 alone named in\n%s", out)
	}
}

var errNoMaster = errors.New("no master | none")

func TestSeconds(t *testing.T) {
	for _, c := range []struct {
		s    float64
		want string
	}{{35e-6, "35 µs"}, {0.0014, "1.40 ms"}, {2.5, "2.500 s"}, {math.NaN(), "—"}} {
		if got := Seconds(c.s); got != c.want {
			t.Errorf("%v: %q, want %q", c.s, got, c.want)
		}
	}
}

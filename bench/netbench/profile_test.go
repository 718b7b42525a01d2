package netbench

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/timed-project/timed/config"
)

// ParseProfiles keeps the order given and refuses unknown or repeated
// names, naming them.
func TestParseProfiles(t *testing.T) {
	ps, err := ParseProfiles("defaults,fast,bsd")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"defaults", "fast", "bsd"}) {
		t.Errorf("profiles %v, want defaults, fast, bsd", names)
	}
	if ps, err := ParseProfiles(" bsd , defaults"); err != nil || len(ps) != 2 || ps[0].Name != "bsd" {
		t.Errorf("bsd,defaults: %v %v", ps, err)
	}
	for _, bad := range []string{"", "slow", "fast,fast", "defaults,"} {
		if _, err := ParseProfiles(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := ParseProfiles("slow"); err == nil || !strings.Contains(err.Error(), `"slow"`) {
		t.Errorf("slow: %v, want an error naming it", err)
	}
}

// Each profile's flags are the daemon's own and give what the profile
// says: the defaults adapt their rounds; the fast profile's are fixed at
// its Interval; BSD-equivalent settings are fixed 240 s rounds without
// discipline, makestep or influence bound, and BSD's step threshold.
func TestProfilesAreDaemonSettings(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range Profiles {
		fs := pflag.NewFlagSet("timed", pflag.ContinueOnError)
		config.AddFlags(fs)
		if err := fs.Parse(append(append([]string{"-M"}, p.Args...), "--config", empty)); err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		c, err := config.Load(fs)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		iv, floor := c.Election.SyncInterval, c.Sync.IntervalFloor
		adaptive := floor < iv
		if adaptive != (p.Interval == 0) || (!adaptive && iv != p.Interval) {
			t.Errorf("%s: sync interval %v, floor %v; the profile says %v (0: adaptive)", p.Name, iv, floor, p.Interval)
		}
		if p.Name != "bsd" {
			continue
		}
		s := c.Sync
		if iv != 240*time.Second || s.FrequencyDiscipline || s.MakeStepCount != 0 || s.MaxSourceInfluence != 0 || s.StepThreshold != 20*time.Second {
			t.Errorf("bsd: interval %v, discipline %v, makestep %d, influence bound %v, step threshold %v; want 240s, false, 0, 0, 20s",
				iv, s.FrequencyDiscipline, s.MakeStepCount, s.MaxSourceInfluence, s.StepThreshold)
		}
	}
}

// PerSlaveMinute counts the slaves' packets but not the master's nor
// any LOOP, from the release when the first sample has none.
func TestPerSlaveMinute(t *testing.T) {
	to := Sample{At: 2 * time.Minute, Master: 1, Packets: []uint64{30, 900, 50}, Loops: []uint64{6, 6, 6}}
	for _, c := range []struct {
		name     string
		from, to Sample
		want     float64
	}{
		{"from the release", Sample{}, to, (24 + 44) / 2.0 / 2},
		{"between samples", Sample{At: time.Minute, Master: 1, Packets: []uint64{14, 400, 26}, Loops: []uint64{3, 3, 3}}, to, (13 + 21) / 2.0},
		{"no master", Sample{}, Sample{At: time.Minute, Master: -1, Packets: to.Packets, Loops: to.Loops}, math.NaN()},
		{"no packets", Sample{}, Sample{At: time.Minute, Master: 1}, math.NaN()},
		{"no time", to, to, math.NaN()},
		{"one daemon", Sample{}, Sample{At: time.Minute, Master: 0, Packets: []uint64{5}, Loops: []uint64{1}}, math.NaN()},
	} {
		got := PerSlaveMinute(c.from, c.to)
		if got != c.want && !(math.IsNaN(got) && math.IsNaN(c.want)) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// Series: a point per sample in which every daemon answered, its spread.
func TestSeries(t *testing.T) {
	ss := []Sample{sample(0.1, 0.5), {At: 200 * time.Millisecond, Master: -1}, sample(1, 2e-6)}
	got := Series(ss)
	want := []Point{{At: 100 * time.Millisecond, Spread: 0.5}, {At: time.Second, Spread: 2e-6}}
	if !slices.Equal(got, want) {
		t.Errorf("series %v, want %v", got, want)
	}
	if Series(nil) != nil {
		t.Error("no samples: want no points")
	}
}

// WritePlot writes a PNG, a panel per N, with spreads of 0 (below the
// log scale's floor) and a run without a point among them; it refuses
// nothing to draw and a name that is not .png.
func TestWritePlot(t *testing.T) {
	file := filepath.Join(t.TempDir(), "net.png")
	line := func(label string, spreads ...float64) Line {
		l := Line{Label: label}
		for i, s := range spreads {
			l.Points = append(l.Points, Point{At: time.Duration(i) * time.Second, Spread: s})
		}
		return l
	}
	panels := []Panel{
		{Title: "N = 5", Lines: []Line{line("defaults", 0.4, 1e-3, 2e-5, 0), line("fast profile", 0.4, 2e-4, 5e-6), line("BSD-equivalent", 0.4, 0.3, math.NaN())}},
		{Title: "N = 20", Lines: []Line{line("defaults")}},
	}
	if err := WritePlot(file, panels); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "\x89PNG\r\n\x1a\n") || len(b) < 10_000 {
		t.Errorf("%d bytes beginning %q: not a plot", len(b), b[:min(len(b), 8)])
	}
	if err := WritePlot(file, nil); err == nil {
		t.Error("no panels: no error")
	}
	if err := WritePlot(filepath.Join(t.TempDir(), "net.svg"), panels); err == nil {
		t.Error("an .svg name: no error")
	}
}

// The plot's ticks name each decade in the unit that reads best.
func TestDecades(t *testing.T) {
	var labels []string
	for _, tk := range (decades{}).Ticks(2e-7, 0.3) {
		labels = append(labels, tk.Label)
	}
	want := []string{"100 ns", "1 µs", "10 µs", "100 µs", "1 ms", "10 ms", "100 ms", "1 s"}
	if !slices.Equal(labels, want) {
		t.Errorf("ticks %q, want %q", labels, want)
	}
}

package timed

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/spf13/pflag"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/config"
	"github.com/timed-project/timed/tsp/udp"
)

// testConfig is a daemon's configuration as the command line would give
// it, plus args: fast timers, a simulated clock, no control socket, a
// kernel-chosen port on loopback and a peer list of one dead port, so a
// daemon built from it runs alone and touches nothing outside the test.
func testConfig(t *testing.T, args ...string) *config.Config {
	t.Helper()
	fs := pflag.NewFlagSet("timed", pflag.ContinueOnError)
	config.AddFlags(fs)
	base := []string{"--config", "", "--profile", "fast", "--clock", "sim", "--control-socket", "", "--peers", "127.0.0.1:9", "--hostname", "here"}
	if err := fs.Parse(append(base, args...)); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(fs)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Port = udp.AnyPort
	return cfg
}

func TestParseDrift(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		err  string
	}{
		{"12.5\n", 12.5, ""},
		{"  -3.25  ", -3.25, ""},
		{"+500", 500, ""},
		{"-500.000000\n", -500, ""},
		{"", 0, "corrupt"},
		{"12.5 0.3\n", 0, "corrupt"},
		{"fast", 0, "corrupt"},
		{"NaN", 0, "corrupt"},
		{"+Inf", 0, "corrupt"},
		{"500.001", 0, "absurd"},
		{"-1e6", 0, "absurd"},
	} {
		got, err := parseDrift([]byte(c.in))
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: %v, %v; want an error saying %s", c.in, got, err, c.err)
		}
	}
}

// TestDriftFileRoundTrip: what writeDrift writes readDrift reads; the
// file is replaced whole, mode 0644, with no temporary file left behind;
// a missing file is normal (Info), a corrupt or absurd one a warning.
func TestDriftFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "drift")
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	if _, ok := readDrift(path, log); ok || hook.LastEntry().Level != logrus.InfoLevel {
		t.Fatalf("missing file: ok %v, logged %+v", ok, hook.LastEntry())
	}
	for _, ppm := range []float64{-17.123456, 0, 499.5} {
		if err := writeDrift(path, ppm); err != nil {
			t.Fatal(err)
		}
		if got, ok := readDrift(path, log); !ok || got != ppm {
			t.Fatalf("wrote %v, read %v (ok %v)", ppm, got, ok)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, %v; want 0644", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d files in the directory, want the drift file alone", len(entries))
	}
	for _, bad := range []string{"garbage\n", "900\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		hook.Reset()
		if _, ok := readDrift(path, log); ok || hook.LastEntry().Level != logrus.WarnLevel {
			t.Fatalf("%q: ok %v, logged %+v; want ignored with a warning", bad, ok, hook.LastEntry())
		}
	}
	if err := writeDrift(filepath.Join(dir, "no-such-dir", "drift"), 1); err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
}

// TestDriftFileDaemon: a daemon starts its discipline (and its simulated
// clock) from the drift file, ignores an absurd one, and saves its
// estimate while it runs and when it stops.
func TestDriftFileDaemon(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drift")
	if err := os.WriteFile(path, []byte("-42.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log, _ := test.NewNullLogger()
	d, err := New(testConfig(t, "--drift-file", path), log, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ppm, _, _ := d.applier.Frequency(); ppm != -42.5 {
		t.Fatalf("discipline starts at %v ppm, want the file's -42.5", ppm)
	}
	if st, _ := d.clock.State(); st.FrequencyPPM != -42.5 {
		t.Fatalf("clock runs at %v ppm, want the file's -42.5", st.FrequencyPPM)
	}
	// The estimate moves; the periodic save writes it.
	d.applier.Discipline = clocksync.NewDiscipline(clocksync.DisciplineConfig{InitialPPM: 7.25})
	d.driftEvery = 20 * time.Millisecond
	runFor(t, d, func() bool {
		b, _ := os.ReadFile(path)
		return string(b) == "7.250000\n"
	})

	// A daemon that stops before its first periodic save saves at stop.
	if err := os.WriteFile(path, []byte("-42.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err = New(testConfig(t, "--drift-file", path), log, Options{})
	if err != nil {
		t.Fatal(err)
	}
	runFor(t, d, func() bool { return true })
	if b, err := os.ReadFile(path); err != nil || string(b) != "-42.500000\n" {
		t.Fatalf("after stop: %q, %v; want the estimate saved", b, err)
	}

	// An absurd file: the clock's own setting (0 for a new simulated clock).
	if err := os.WriteFile(path, []byte("5000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d2, err := New(testConfig(t, "--drift-file", path), log, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.closeResources()
	if ppm, _, _ := d2.applier.Frequency(); ppm != 0 {
		t.Fatalf("absurd file: discipline at %v ppm, want 0", ppm)
	}
}

// runFor runs d until cond holds (polled every 10 ms, 10 s at most), then
// stops it and waits for Run to return.
func runFor(t *testing.T, d *Daemon, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatal("condition not reached while running")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

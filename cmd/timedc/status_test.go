package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/timed/control"
)

func f64(f float64) *float64 { return &f }

// A slave's status and sources, as a daemon would answer.
var (
	slaveStatus = &control.Status{
		Hostname: "n2", State: "slave", Clock: "sim:offset=-2000ms", OffsetSecs: -0.000015, InStateSecs: 12.3456,
		Master: &control.Peer{Name: "n1", Address: "127.0.0.1:15251"},
		Sync: &control.Sync{State: control.Synchronised, Reason: "slave of n1, whose last correction was applied 812ms ago",
			OffsetSecs: f64(-0.000012), Basis: "correction", BasisFrom: "n1", BasisAgeSecs: f64(0.812), PendingSlewSecs: 0.000004,
			LastCorrectionAgeSecs: f64(0.812), FrequencyPPM: 12.345, FrequencyChangePPM: -0.21, FrequencyChangeAgeSecs: f64(250),
			FrequencyEstimates: 17, SyncIntervalSecs: 1},
		LastCorrection: &control.Correction{Kind: "slew", Secs: 0.003201, From: "n1"},
		Networks: []control.Network{{Address: "127.0.0.1:15252", Served: true, State: "slave",
			Master: &control.Peer{Name: "n1", Address: "127.0.0.1:15251"}}},
	}
	masterSources = &control.Sources{Hostname: "n1", Sources: []control.Source{
		{Name: "n2", Address: "127.0.0.1:15252", Network: "peers", Role: "slave", State: "kept", Reach: 0o377,
			OffsetSecs: f64(0.000012), ErrorBoundSecs: f64(0.00004), RTTSecs: f64(0.00008), AgeSecs: f64(0.4), Method: "probe", Stamps: "kernel"},
		{Name: "n3", Address: "127.0.0.1:15253", Network: "peers", Role: "slave", State: "new"},
	}}
)

// fakeDaemonControl serves a control socket answering status and sources
// with st and src.
func fakeDaemonControl(t *testing.T, st *control.Status, src *control.Sources) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "timed.sock")
	srv, err := control.Listen(path, func(_ context.Context, req control.Request) control.Response {
		switch req.Cmd {
		case control.CmdStatus:
			return control.Response{OK: true, Status: st}
		case control.CmdSources:
			return control.Response{OK: true, Sources: src}
		}
		return control.Response{Error: "unexpected " + req.Cmd}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return path
}

// TestStatusLeadsWithSync: the first line is the sync state and why; the
// offset says what it rests on and that the error is the master's to
// know; the simulated clock's offset from the kernel clock is labelled.
func TestStatusLeadsWithSync(t *testing.T) {
	sock := fakeDaemonControl(t, slaveStatus, masterSources)
	out, err := run(t, "--control-socket", sock, "status")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	if lines[0] != "synchronised: slave of n1, whose last correction was applied 812ms ago" ||
		lines[1] != "n2 is slave for 12.346s; master n1 (127.0.0.1:15251)" {
		t.Fatalf("first lines %q", lines[:2])
	}
	for _, want := range []string{
		"offset:          -0.012 ms from network time (estimated from n1's correction 812ms ago, +0.004 ms still to slew; its error is known to n1 alone",
		"frequency:       +12.345 ppm, last change -0.210 ppm 4m10s ago (17 estimates)",
		"last correction: slew +3.201 ms from n1, 812ms ago",
		"sync interval:   1s (synchronised: a correction or round within 2 of them)",
		"clock:           sim:offset=-2000ms as started; now -0.015 ms from the kernel clock (simulated clock, for tests)",
		"network:         peers, listening on 127.0.0.1:15252: slave, master n1 (127.0.0.1:15251)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	// A master: the bound it knows.
	master := *slaveStatus
	master.Hostname, master.State, master.Master = "n1", "master", &control.Peer{Name: "n1"}
	master.Sync = &control.Sync{State: control.Synchronised, Reason: "master on peers, whose last round 400ms ago measured 2 of 2 slaves",
		OffsetSecs: f64(0.000003), ErrorBoundSecs: f64(0.00015), Basis: "round", BasisFrom: "n1", BasisAgeSecs: f64(0.4)}
	master.Networks = []control.Network{{Address: "127.0.0.1:15251", Served: true, State: "master", Slaves: make([]control.Slave, 2)}}
	text := statusText(&master)
	for _, want := range []string{"n1 is master for 12.346s\n", "offset:          +0.003 ms ±0.150 ms from network time (estimated from this master's round 400ms ago)",
		"peers, listening on 127.0.0.1:15251: master of 2 slaves", "unchanged since start"} {
		if !strings.Contains(text, want) {
			t.Errorf("master's status lacks %q:\n%s", want, text)
		}
	}
	// The kernel's state, where the daemon tells it.
	master.KernelSync = &control.KernelSync{Synchronised: true, MaxErrorSecs: 0.000153, EstErrorSecs: 0.00015, AgeSecs: 0.4, At: time.Now()}
	if text := statusText(&master); !strings.Contains(text, "kernel:          told synchronised 400ms ago (STA_UNSYNC clear), maxerror 0.153 ms, esterror 0.150 ms\n") {
		t.Errorf("master's status lacks the kernel's state:\n%s", text)
	}
	master.KernelSync = &control.KernelSync{AgeSecs: 2, At: time.Now(), Error: "system clock: set kernel sync state unsynchronised: EPERM"}
	if text := statusText(&master); !strings.Contains(text, "kernel:          told unsynchronised 2s ago (STA_UNSYNC set); the last telling failed: system clock") {
		t.Errorf("master's status lacks the kernel's state:\n%s", text)
	}
	// JSON: the new fields beside the old ones.
	out, err = run(t, "--control-socket", sock, "--json", "status")
	if err != nil {
		t.Fatal(err)
	}
	var res []map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 1 {
		t.Fatalf("%v: %s", err, out)
	}
	sync, _ := res[0]["sync"].(map[string]any)
	nets, _ := res[0]["networks"].([]any)
	if sync["state"] != "synchronised" || sync["basis"] != "correction" || sync["last_correction_age_seconds"] != 0.812 ||
		res[0]["state"] != "slave" || res[0]["clock_offset_seconds"] != -0.000015 || len(nets) != 1 || nets[0].(map[string]any)["state"] != "slave" {
		t.Errorf("json %s", out)
	}
}

// TestSources: the table, reach in octal, a dash for what is not known;
// JSON: one object for the daemon asked, its rows under sources.
func TestSources(t *testing.T) {
	sock := fakeDaemonControl(t, slaveStatus, masterSources)
	out, err := run(t, "--control-socket", sock, "sources")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME ADDRESS ROLE STATE REACH OFFSET ERROR RTT AGE METHOD STAMPS" {
		t.Fatalf("table %q", out)
	}
	if got := strings.Join(strings.Fields(lines[1]), " "); got != "n2 127.0.0.1:15252 slave kept 377 +0.012 ms ±0.040 ms 0.080 ms 400ms probe kernel" {
		t.Errorf("n2's row %q", got)
	}
	if got := strings.Join(strings.Fields(lines[2]), " "); got != "n3 127.0.0.1:15253 slave new 0 - - - - - -" {
		t.Errorf("n3's row %q", got)
	}
	out, err = run(t, "--control-socket", sock, "--json", "sources")
	if err != nil {
		t.Fatal(err)
	}
	var res []struct {
		Host    string           `json:"host"`
		Schema  int              `json:"schema_version"`
		Socket  string           `json:"control_socket"`
		Sources []control.Source `json:"sources"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 1 || res[0].Host != "localhost" || res[0].Schema != 1 ||
		res[0].Socket != sock || len(res[0].Sources) != 2 || res[0].Sources[0].Reach != 255 || res[0].Sources[0].Stamps != "kernel" || res[0].Sources[1].OffsetSecs != nil {
		t.Fatalf("json %v: %s", err, out)
	}
	if out := sourcesText(&control.Sources{Hostname: "n1", Sources: []control.Source{}}); !strings.Contains(out, "n1 has no sources") {
		t.Errorf("no sources: %q", out)
	}
}

// watchRun runs timedc until ctx ends, as a user's Ctrl-C would end it.
func watchRun(t *testing.T, ctx context.Context, screen *bytes.Buffer, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	opts := &options{out: &out, port: 525}
	if screen != nil {
		opts.screen = screen
	}
	root := newRoot(opts)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// TestWatch: --watch redraws until stopped: separators where stdout is no
// terminal, the clear sequence where it is (and never through the
// escaping writer), one JSON document per line with --json.
func TestWatch(t *testing.T) {
	sock := fakeDaemonControl(t, slaveStatus, masterSources)
	watch := func(screen *bytes.Buffer, args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 450*time.Millisecond)
		defer cancel()
		out, err := watchRun(t, ctx, screen, append([]string{"--control-socket", sock}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := watch(nil, "status", "--watch", "--interval", "100ms")
	if n := strings.Count(out, "synchronised: slave of n1"); n < 3 || strings.Count(out, "\n---- ") != n-1 {
		t.Errorf("%d redraws, %d separators:\n%s", n, strings.Count(out, "\n---- "), out)
	}
	var screen bytes.Buffer
	out = watch(&screen, "sources", "--watch", "--interval", "100ms")
	if n := strings.Count(out, "NAME"); n < 3 || strings.Count(screen.String(), clearScreen) != n || strings.Contains(out, "----") || strings.Contains(out, "\x1b") {
		t.Errorf("terminal: %d tables, screen %q, out:\n%s", n, screen.String(), out)
	}
	out = watch(nil, "--json", "status", "--watch", "--interval", "100ms")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 {
		t.Fatalf("%d JSON lines:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var res []map[string]any
		if err := json.Unmarshal([]byte(l), &res); err != nil || len(res) != 1 || res[0]["schema_version"] != float64(1) {
			t.Fatalf("line %q: %v", l, err)
		}
	}
	// A daemon that goes away: the watch says so and goes on.
	out = watch(nil, "--control-socket", filepath.Join(t.TempDir(), "none.sock"), "status", "--watch", "--interval", "100ms")
	if strings.Count(out, "timedc: connect to timed") < 2 {
		t.Errorf("no daemon:\n%s", out)
	}
	if _, err := run(t, "--control-socket", sock, "status", "--watch", "--interval", "1ms"); err == nil || !strings.Contains(err.Error(), "at least 100ms") {
		t.Errorf("--interval 1ms: %v", err)
	}
}

// TestStatusUTC: a slave of a reference has a UTC line (its bound, the
// reference, its maxerror); a reference host has its own line; sources
// mark a master that claims to be a reference.
func TestStatusUTC(t *testing.T) {
	st := *slaveStatus
	y := *st.Sync
	y.UTCVia, y.ReferenceMaxErrorSecs, y.UTCBoundSecs = "n1", f64(0.004), f64(0.0045)
	st.Sync = &y
	st.Reference = &control.Reference{Claiming: false, KernelSynchronised: true, KernelMaxErrorSecs: 0.2, MaxErrorBoundSecs: 0.1, CorrectionsIgnored: 7}
	out := statusText(&st)
	for _, want := range []string{"UTC:", "within 4.500 ms via n1 (its kernel maxerror 4.000 ms)",
		"reference:", "not claiming", "kernel says synchronised, maxerror 200.000 ms (bound 100.000 ms); 7 corrections ignored"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if out := statusText(slaveStatus); strings.Contains(out, "UTC:") || strings.Contains(out, "reference:") {
		t.Errorf("a slave of a plain master shows UTC or reference lines:\n%s", out)
	}
	src := sourcesText(&control.Sources{Hostname: "n2", Sources: []control.Source{
		{Name: "n1", Address: "127.0.0.1:15251", Network: "peers", Role: "master", State: "current", ReferenceMaxErrorSecs: f64(0.004)}}})
	if !strings.Contains(src, "master (UTC reference ±4.000 ms)") {
		t.Errorf("sources do not mark the reference:\n%s", src)
	}
}

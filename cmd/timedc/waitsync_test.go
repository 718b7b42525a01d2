package main

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timed-project/timed/timed/control"
)

// syncingDaemon serves a control socket at path whose status is
// unsynchronised for the first `after` questions, then sync; it counts
// the questions.
func syncingDaemon(t *testing.T, path string, after int32, clock string, sync control.Sync) *atomic.Int32 {
	t.Helper()
	var asked atomic.Int32
	srv, err := control.Listen(path, func(_ context.Context, req control.Request) control.Response {
		if req.Cmd != control.CmdStatus {
			return control.Response{Error: "unexpected " + req.Cmd}
		}
		y := control.Sync{State: control.Unsynchronised, Reason: "slave waiting for a master on peers", Basis: "none"}
		if asked.Add(1) > after {
			y = sync
		}
		return control.Response{OK: true, Status: &control.Status{Hostname: "n2", State: "slave", Clock: clock, Sync: &y}}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &asked
}

var slaveSynced = control.Sync{State: control.Synchronised, Reason: "slave of n1, whose last correction was applied 812ms ago",
	OffsetSecs: f64(-0.0012), Basis: "correction", BasisFrom: "n1", BasisAgeSecs: f64(0.812)}

// TestWaitsyncWaits: waitsync asks until the daemon says synchronised,
// then exits 0 saying so; --json tells how many questions it took.
func TestWaitsyncWaits(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "timed.sock")
	asked := syncingDaemon(t, sock, 2, "system", slaveSynced)
	out, err := run(t, "--control-socket", sock, "waitsync", "--interval", "100ms")
	if err != nil || asked.Load() != 3 || !strings.HasPrefix(out, "synchronised after ") ||
		!strings.Contains(out, ": slave of n1, whose last correction was applied 812ms ago; offset -1.200 ms from network time") {
		t.Fatalf("asked %d times: %v: %q", asked.Load(), err, out)
	}
	out, err = run(t, "--json", "--control-socket", sock, "waitsync")
	var res []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || len(res) != 1 {
		t.Fatalf("%v: %s", err, out)
	}
	if r := res[0]; r["synchronised"] != true || r["polls"] != float64(1) || r["state"] != "synchronised" || r["offset_seconds"] != -0.0012 ||
		r["host"] != "localhost" || r["schema_version"] != float64(1) || r["control_socket"] != sock || r["error"] != nil {
		t.Errorf("json %s", out)
	}
}

// TestWaitsyncMaxOffset: with --max-offset, |offset| + error bound must
// be within it; a slave, without a bound, compares its offset.
func TestWaitsyncMaxOffset(t *testing.T) {
	master := control.Sync{State: control.Synchronised, Reason: "master on peers, whose last round 400ms ago measured 2 of 2 slaves",
		OffsetSecs: f64(0.003), ErrorBoundSecs: f64(0.001), Basis: "round", BasisFrom: "n1", BasisAgeSecs: f64(0.4)}
	for _, c := range []struct {
		sync      control.Sync
		maxOffset string
		met       bool
	}{
		{master, "5ms", true},
		{master, "4ms", true},
		{master, "3500us", false}, // the offset alone is within, not with its bound
		{slaveSynced, "2ms", true},
		{slaveSynced, "1ms", false},
		{control.Sync{State: control.Synchronised, Reason: "synchronised, nothing known", Basis: "none"}, "1s", false},
	} {
		sock := filepath.Join(t.TempDir(), "timed.sock")
		syncingDaemon(t, sock, 0, "system", c.sync)
		out, err := run(t, "--control-socket", sock, "--timeout", "300ms", "waitsync", "--interval", "100ms", "--max-offset", c.maxOffset)
		if c.met {
			if err != nil || !strings.HasPrefix(out, "synchronised after ") {
				t.Errorf("%s, --max-offset %s: %v %q", c.sync.Reason, c.maxOffset, err, out)
			}
			continue
		}
		if exitCode(err) != exitNotSynced || !strings.Contains(err.Error(), "not synchronised after ") ||
			!(strings.Contains(err.Error(), "beyond --max-offset "+mustDuration(t, c.maxOffset).String()) || strings.Contains(err.Error(), "not known yet")) {
			t.Errorf("%s, --max-offset %s: exit %d: %v", c.sync.Reason, c.maxOffset, exitCode(err), err)
		}
	}
}

// TestWaitsyncFails: each way of not getting there has its exit code and
// says why: timed out with the daemon's last reason (2), a dry-run clock
// at once (2), no daemon (3), bad flags (1).
func TestWaitsyncFails(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "timed.sock")
	asked := syncingDaemon(t, sock, 1<<30, "system", slaveSynced)
	out, err := run(t, "--json", "--control-socket", sock, "--timeout", "350ms", "waitsync", "--interval", "100ms")
	var res []map[string]any
	if exitCode(err) != exitNotSynced || !strings.Contains(err.Error(), "not synchronised after ") ||
		!strings.HasSuffix(err.Error(), ": unsynchronised: slave waiting for a master on peers") || asked.Load() < 2 ||
		json.Unmarshal([]byte(out), &res) != nil || len(res) != 1 || res[0]["synchronised"] != false || res[0]["error"] == nil ||
		res[0]["reason"] != "unsynchronised: slave waiting for a master on peers" {
		t.Errorf("timeout: exit %d, asked %d: %v\n%s", exitCode(err), asked.Load(), err, out)
	}

	dry := filepath.Join(t.TempDir(), "timed.sock")
	asked = syncingDaemon(t, dry, 1<<30, "dry-run", slaveSynced)
	_, err = run(t, "--control-socket", dry, "waitsync")
	if exitCode(err) != exitNotSynced || !strings.Contains(err.Error(), "dry-run clock") || asked.Load() != 1 {
		t.Errorf("dry-run: exit %d, asked %d: %v", exitCode(err), asked.Load(), err)
	}

	none := filepath.Join(t.TempDir(), "none.sock")
	_, err = run(t, "--control-socket", none, "--timeout", "300ms", "waitsync", "--interval", "100ms")
	if exitCode(err) != exitNoDaemon || !strings.Contains(err.Error(), "no answer from timed after ") || !strings.Contains(err.Error(), "is timed running?") {
		t.Errorf("no daemon: exit %d: %v", exitCode(err), err)
	}

	for _, args := range [][]string{{"waitsync", "--interval", "1ms"}, {"waitsync", "--max-offset", "-1s"}, {"--timeout", "-1s", "waitsync"}} {
		if _, err := run(t, append([]string{"--control-socket", sock}, args...)...); exitCode(err) != exitFailed || err == nil {
			t.Errorf("%v: exit %d: %v", args, exitCode(err), err)
		}
	}
}

// TestWaitsyncDaemonLate: a daemon that does not answer yet (as at
// boot) is waited for: here the socket's first connection is closed
// unanswered, then the daemon comes up.
func TestWaitsyncDaemonLate(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "timed.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	done := make(chan error, 1)
	go func() {
		root := newRoot(&options{out: &out, port: 525})
		root.SetArgs([]string{"--json", "--control-socket", sock, "waitsync", "--interval", "100ms"})
		done <- root.Execute()
	}()
	conn, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	l.Close() // removes the socket
	asked := syncingDaemon(t, sock, 0, "system", slaveSynced)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var res []map[string]any
	if json.Unmarshal([]byte(out.String()), &res) != nil || len(res) != 1 || res[0]["synchronised"] != true ||
		res[0]["polls"].(float64) < 2 || asked.Load() != 1 {
		t.Errorf("asked %d: %s", asked.Load(), out.String())
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

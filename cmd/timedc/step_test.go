package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/timed/control"
)

// fakeControl serves a control socket that answers step and status as a
// daemon in alarm would, and reports each request.
func fakeControl(t *testing.T) (string, <-chan control.Request) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "timed.sock")
	got := make(chan control.Request, 4)
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	alarm := &control.Alarm{Since: since, OffsetSecs: 4000, Refused: 2, MaxStepSecs: 1000}
	srv, err := control.Listen(path, func(_ context.Context, req control.Request) control.Response {
		got <- req
		switch req.Cmd {
		case control.CmdStatus:
			return control.Response{OK: true, Status: &control.Status{Hostname: "n3", State: "slave", Alarm: alarm}}
		case control.CmdStep:
			before, after := 5000.0, 1000.0
			return control.Response{OK: true, Step: &control.StepResult{
				Correction: control.Correction{Kind: "step", Secs: -4000, At: since.Add(time.Minute)},
				AlarmWas:   alarm, OffsetBeforeSecs: &before, OffsetAfterSecs: &after}}
		}
		return control.Response{Error: "unexpected " + req.Cmd}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return path, got
}

// runMain runs timedc as main does, negative durations included.
func runMain(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return run(t, negativesAsArguments(args)...)
}

func TestStep(t *testing.T) {
	sock, got := fakeControl(t)
	out, err := runMain(t, "--control-socket", sock, "step", "-4000s")
	if err != nil {
		t.Fatal(err)
	}
	if req := <-got; req.Cmd != control.CmdStep || req.Step != "-1h6m40s" || req.ToNetwork {
		t.Fatalf("sent %+v, want step by -4000s", req)
	}
	for _, want := range []string{"clock stepped by -4000.000000 s", "alarm since 2026-01-01T00:00:00Z ended (2 corrections refused)",
		"simulated clock offset +5000.000000 s -> +1000.000000 s"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	out, err = runMain(t, "--control-socket", sock, "step", "--to-network", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if req := <-got; req.Cmd != control.CmdStep || req.Step != "" || !req.ToNetwork {
		t.Fatalf("sent %+v, want step to network", req)
	}
	var res []control.StepResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 1 || res[0].Correction.Secs != -4000 || res[0].AlarmWas == nil {
		t.Fatalf("json %q: %v", out, err)
	}
}

// TestStepRefusedLocally: what no operator means never reaches the daemon.
func TestStepRefusedLocally(t *testing.T) {
	sock, got := fakeControl(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "give a DURATION"},
		{[]string{"0s"}, "nothing to do"},
		{[]string{"-876001h"}, "100 years"},
		{[]string{"-5"}, "not a Go duration"},
		{[]string{"soon"}, "not a Go duration"},
		{[]string{"1s", "--to-network"}, "not both"},
	} {
		_, err := runMain(t, append([]string{"--control-socket", sock, "step"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("step %v: %v, want an error containing %q", c.args, err, c.want)
		}
	}
	select {
	case req := <-got:
		t.Fatalf("sent %+v", req)
	default:
	}
}

func TestNegativesAsArguments(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"step", "-4995s", "--json"}, []string{"step", "--json", "--", "-4995s"}},
		{[]string{"step", "-.5s"}, []string{"step", "--", "-.5s"}},
		{[]string{"status", "--json"}, []string{"status", "--json"}},
		{[]string{"step", "--", "-1s"}, []string{"step", "--", "-1s"}},
	} {
		if got := negativesAsArguments(c.in); !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.in, got, c.want)
		}
	}
}

func TestStatusShowsAlarm(t *testing.T) {
	sock, _ := fakeControl(t)
	out, err := run(t, "--control-socket", sock, "status")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(first, "ALARM since 2026-01-01T00:00:00Z: clock +4000.000 s from network time") ||
		!strings.Contains(first, "2 corrections refused") || !strings.Contains(first, "timedc step --to-network") {
		t.Fatalf("first line %q, want the alarm", first)
	}
}

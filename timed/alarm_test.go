package timed

import (
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/timed/control"
)

// manualTime is a TimeSource the test advances by hand.
type manualTime struct {
	mu  sync.Mutex
	now time.Time
}

func (m *manualTime) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

func (m *manualTime) advance(d time.Duration) {
	m.mu.Lock()
	m.now = m.now.Add(d)
	m.mu.Unlock()
}

// alarmDaemon is the part of a Daemon that corrections and the step
// command use: a simulated clock offset by off from src's true time, with
// a max-step of 1000 s. Nothing touches the host clock.
func alarmDaemon(t *testing.T, off time.Duration) (*Daemon, *manualTime, *clocksync.SimClock, *test.Hook) {
	t.Helper()
	src := &manualTime{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	clk := clocksync.NewSimClock(src, clocksync.SimConfig{Offset: off})
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	d := &Daemon{clock: clk, log: log, hostname: "here"}
	d.applier = &clocksync.Applier{Clock: clk, StepThreshold: clocksync.SlewStepThreshold, MaxStep: 1000 * time.Second,
		RecoveryInterval: 750 * time.Millisecond, Log: log}
	return d, src, clk, hook
}

func warnings(hook *test.Hook, msg string) int {
	n := 0
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel && e.Message == msg {
			n++
		}
	}
	return n
}

// TestAlarmRecoveryMoves: the master's SETTIME beyond max-step is refused
// the first time, then moves the clock by max-step once a round, each move
// logged once at Warn, until it is within max-step and the alarm ends.
func TestAlarmRecoveryMoves(t *testing.T) {
	d, src, clk, hook := alarmDaemon(t, 3500*time.Second)
	d.applySetTime(src.Now(), 0, "master")
	a := d.alarmStatus(d.applier.Alarm())
	if a == nil || a.Refused != 1 || a.OffsetSecs != 3500 || a.MaxStepSecs != 1000 {
		t.Fatalf("after the first SETTIME: alarm %+v, want on, 3500 s off, 1 refused", a)
	}
	if clk.Offset() != 3500*time.Second {
		t.Fatalf("a refused correction moved the clock to %v", clk.Offset())
	}
	// The last from 500 s: within max-step, an ordinary step.
	for i, want := range []time.Duration{2500 * time.Second, 1500 * time.Second, 500 * time.Second, 0} {
		src.advance(time.Second) // the next round
		d.applySetTime(src.Now(), 0, "master")
		if got := clk.Offset(); got != want {
			t.Fatalf("round %d: clock %v off, want %v", i+1, got, want)
		}
		if n := warnings(hook, "alarm: moving towards network time by max-step"); n != min(i+1, 3) {
			t.Fatalf("round %d: %d recovery moves logged, want %d", i+1, n, min(i+1, 3))
		}
	}
	if a := d.alarmStatus(d.applier.Alarm()); a != nil {
		t.Fatalf("alarm %+v after coming within max-step", a)
	}
	// A SETTIME re-sent within the recovery interval does not move it again.
	d2, src2, clk2, _ := alarmDaemon(t, 3500*time.Second)
	d2.applySetTime(src2.Now(), 0, "master")
	d2.applySetTime(src2.Now(), 0, "master")
	d2.applySetTime(src2.Now(), 0, "master")
	if got := clk2.Offset(); got != 2500*time.Second {
		t.Fatalf("three copies at once: clock %v off, want one move to 2500s", got)
	}
	if a := d2.alarmStatus(d2.applier.Alarm()); a == nil || a.Refused != 2 || a.OffsetSecs != 2500 {
		t.Fatalf("alarm %+v, want 2 refused, 2500 s off", a)
	}
}

func step(d *Daemon, req control.Request) control.Response {
	req.Cmd = control.CmdStep
	return d.control(req)
}

// TestStepToNetwork: `timedc step --to-network` steps by the alarm's
// offset, ends the alarm and says what it did.
func TestStepToNetwork(t *testing.T) {
	d, src, clk, _ := alarmDaemon(t, 5000*time.Second)
	d.applySetTime(src.Now(), 0, "master")
	r := step(d, control.Request{ToNetwork: true})
	if !r.OK || r.Step == nil {
		t.Fatalf("step --to-network: %+v", r)
	}
	s := r.Step
	if s.AlarmWas == nil || s.AlarmWas.OffsetSecs != 5000 || s.AlarmWas.Refused != 1 {
		t.Errorf("alarm_was %+v, want the 5000 s alarm", s.AlarmWas)
	}
	if s.Correction.Kind != "step" || s.Correction.Secs != -5000 {
		t.Errorf("correction %+v, want a step of -5000 s", s.Correction)
	}
	if s.OffsetBeforeSecs == nil || *s.OffsetBeforeSecs != 5000 || s.OffsetAfterSecs == nil || *s.OffsetAfterSecs != 0 {
		t.Errorf("offsets before/after %v/%v, want 5000/0", s.OffsetBeforeSecs, s.OffsetAfterSecs)
	}
	if clk.Offset() != 0 || d.applier.Alarm().On {
		t.Fatalf("after the step: clock %v off, alarm %+v", clk.Offset(), d.applier.Alarm())
	}
	// No alarm: nothing to step to.
	if r := step(d, control.Request{ToNetwork: true}); r.OK || !strings.Contains(r.Error, "no alarm") {
		t.Fatalf("--to-network without alarm: %+v", r)
	}
}

// TestStepByDuration: any step the operator gives, beyond max-step too;
// nothing, a century or a typo are refused and leave the clock alone.
func TestStepByDuration(t *testing.T) {
	d, _, clk, _ := alarmDaemon(t, 0)
	if r := step(d, control.Request{Step: "-4995s"}); !r.OK || r.Step.Correction.Secs != -4995 || r.Step.AlarmWas != nil {
		t.Fatalf("step -4995s: %+v", r)
	}
	if clk.Offset() != -4995*time.Second {
		t.Fatalf("clock %v off, want -4995s", clk.Offset())
	}
	for _, c := range []struct {
		req  control.Request
		want string
	}{
		{control.Request{Step: "0s"}, "nothing to do"},
		{control.Request{Step: "876001h"}, "100 years"},
		{control.Request{Step: "-876001h"}, "100 years"},
		{control.Request{Step: "soon"}, "Go duration"},
		{control.Request{}, "Go duration"},
		{control.Request{Step: "1s", ToNetwork: true}, "not both"},
	} {
		if r := step(d, c.req); r.OK || !strings.Contains(r.Error, c.want) {
			t.Errorf("%+v: %+v, want an error containing %q", c.req, r, c.want)
		}
	}
	if clk.Offset() != -4995*time.Second {
		t.Fatalf("a refused step moved the clock to %v", clk.Offset())
	}
}

func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		t.Fatal(err)
	}
	if pb.Gauge != nil {
		return pb.Gauge.GetValue()
	}
	return pb.Counter.GetValue()
}

// TestAlarmMetrics: timed_alarm follows the alarm, and refusals are
// counted.
func TestAlarmMetrics(t *testing.T) {
	d, src, _, _ := alarmDaemon(t, 5000*time.Second)
	var err error
	if d.metrics, err = newMetrics("127.0.0.1:0", d); err != nil {
		t.Fatal(err)
	}
	defer d.metrics.close()
	if v := metricValue(t, d.metrics.alarm); v != 0 {
		t.Fatalf("timed_alarm %v before any correction", v)
	}
	d.applySetTime(src.Now(), 0, "master") // refused: alarm on
	d.applySetTime(src.Now(), 0, "master") // moves by max-step
	d.applySetTime(src.Now(), 0, "master") // refused: too soon after the move
	if a, r := metricValue(t, d.metrics.alarm), metricValue(t, d.metrics.refusedCorr); a != 1 || r != 2 {
		t.Fatalf("timed_alarm %v, timed_corrections_refused_total %v; want 1, 2", a, r)
	}
	step(d, control.Request{ToNetwork: true})
	if v := metricValue(t, d.metrics.alarm); v != 0 {
		t.Fatalf("timed_alarm %v after the operator's step", v)
	}
}

// TestAlarmInSystemdStatus: systemd's status line says ALARM while the
// alarm is on, with the offset of the last correction, and no more once
// it is off.
func TestAlarmInSystemdStatus(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	next := func() string {
		t.Helper()
		if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no status sent: %v", err)
		}
		return string(buf[:n])
	}
	d, src, _, _ := alarmDaemon(t, 5000*time.Second)
	d.applySetTime(src.Now(), 0, "master")
	if got := next(); !strings.Contains(got, "ALARM: clock +5000.000s from network time") {
		t.Fatalf("status %q, want the alarm", got)
	}
	src.advance(time.Second)
	d.applySetTime(src.Now(), 0, "master") // moved: the offset changed
	if got := next(); !strings.Contains(got, "ALARM: clock +4000.000s") {
		t.Fatalf("status %q, want the alarm at 4000 s", got)
	}
	step(d, control.Request{ToNetwork: true})
	if got := next(); strings.Contains(got, "ALARM") {
		t.Fatalf("status %q after the step, want no alarm", got)
	}
}

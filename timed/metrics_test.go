package timed

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/election"
)

// gather collects c's metrics by name: their gauge values.
func gather(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
	}
	return out
}

// TestSyncMetrics: timed_synchronised and the ages and estimates are
// judged at scrape time from the facts the loop published: a slave whose
// master falls silent turns unsynchronised with no event; the alarm
// makes it 0; what is unknown is absent.
func TestSyncMetrics(t *testing.T) {
	d := &Daemon{applier: &clocksync.Applier{}}
	c := syncCollector{d}
	if got := gather(t, c); len(got) != 0 {
		t.Fatalf("before the loop published anything: %v", got)
	}
	now := time.Now()
	f := &syncFacts{interval: time.Second, nets: []netFacts{{name: "lan", state: election.Slave, master: "m"}},
		applied: now.Add(-500 * time.Millisecond), from: "m",
		basis: &basis{kind: "correction", from: "m", at: now.Add(-500 * time.Millisecond), before: -time.Millisecond, moved: time.Millisecond, bound: -1}}
	d.syncPub.Store(f)
	got := gather(t, c)
	if got["timed_synchronised"] != 1 || got["timed_last_correction_age_seconds"] < 0.5 || got["timed_last_correction_age_seconds"] > 60 ||
		math.Abs(got["timed_estimated_offset_seconds"]) > 1e-9 {
		t.Errorf("a slave corrected 0.5 s ago: %v", got)
	}
	if _, ok := got["timed_estimated_error_bound_seconds"]; ok {
		t.Errorf("a slave's error bound exported: %v (its master alone knows it)", got)
	}
	late := *f
	late.applied = now.Add(-3 * time.Second)
	d.syncPub.Store(&late)
	if got := gather(t, c); got["timed_synchronised"] != 0 || got["timed_last_correction_age_seconds"] < 3 {
		t.Errorf("a slave corrected 3 s ago, interval 1 s: %v", got)
	}
	master := &syncFacts{interval: time.Second, nets: []netFacts{{name: "lan", state: election.Master, slaves: 1,
		round: roundInfo{at: now, slaves: 1, measured: 1}}},
		basis: &basis{kind: "round", at: now, bound: time.Millisecond}}
	d.syncPub.Store(master)
	if got := gather(t, c); got["timed_synchronised"] != 1 || got["timed_estimated_error_bound_seconds"] < 0.001 {
		t.Errorf("a master after a round: %v", got)
	}
	if _, ok := gather(t, c)["timed_kernel_synchronised"]; ok {
		t.Error("the kernel's state exported where it is left alone")
	}
	// What the kernel was last told, where it is told.
	for _, told := range []bool{true, false} {
		master.kernelTold = &told
		want := 0.0
		if told {
			want = 1
		}
		if got := gather(t, c); got["timed_kernel_synchronised"] != want {
			t.Errorf("kernel told %v: %v", told, got)
		}
	}

	// In alarm: 0, whatever else holds.
	d, src, _, _ := alarmDaemon(t, 5000*time.Second)
	d.syncPub.Store(f)
	d.applySetTime(src.Now(), 0, "m") // refused: alarm on
	if got := gather(t, syncCollector{d}); got["timed_synchronised"] != 0 || got["timed_estimated_offset_seconds"] != 5000 {
		t.Errorf("in alarm: %v", got)
	}
}

// TestUTCMetrics: a slave of a claiming reference exports its bound on
// its distance from UTC (the reference's maxerror, plus its offset and
// the least measurement error grown since its correction) and the
// reference's maxerror, and says so in its reason; unsynchronised, or
// following a master that does not claim, neither is exported. A
// reference host exports its claim.
func TestUTCMetrics(t *testing.T) {
	d := &Daemon{applier: &clocksync.Applier{}}
	c := syncCollector{d}
	now := time.Now()
	f := &syncFacts{interval: time.Second, nets: []netFacts{{name: "lan", state: election.Slave, master: "ref"}},
		applied: now.Add(-100 * time.Millisecond), from: "ref", utcVia: "ref", utcErr: 4 * time.Millisecond,
		basis: &basis{kind: "correction", from: "ref", at: now.Add(-100 * time.Millisecond), before: -time.Millisecond, moved: time.Millisecond, bound: -1}}
	d.syncPub.Store(f)
	got := gather(t, c)
	b := got["timed_utc_bound_seconds"]
	if got["timed_reference_maxerror_seconds"] != 0.004 || b < 0.004+clocksync.DefaultMinErrorBound.Seconds() || b > 0.005+clocksync.DefaultMinErrorBound.Seconds() {
		t.Errorf("slave of a reference: %v", got)
	}
	if _, ok := got["timed_reference_claiming"]; ok {
		t.Errorf("a plain host exports a claim: %v", got)
	}
	if v := f.view(now, clocksync.AlarmState{}); !strings.HasPrefix(v.Reason, "synchronised to UTC via ref") || v.UTCVia != "ref" {
		t.Errorf("reason %q, via %q", v.Reason, v.UTCVia)
	}
	late := *f
	late.applied = now.Add(-3 * time.Second)
	d.syncPub.Store(&late)
	if got := gather(t, c); got["timed_synchronised"] != 0 || got["timed_utc_bound_seconds"] != 0 {
		t.Errorf("unsynchronised slave of a reference: %v", got)
	}
	claiming := true
	ref := &syncFacts{interval: time.Second, nets: []netFacts{{name: "lan", state: election.Master}}, utcVia: "here", utcErr: 2 * time.Millisecond, claiming: &claiming}
	d.syncPub.Store(ref)
	if got := gather(t, c); got["timed_reference_claiming"] != 1 || got["timed_utc_bound_seconds"] != 0.002 {
		t.Errorf("a claiming reference alone: %v", got)
	}
}

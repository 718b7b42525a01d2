package limit

import (
	"io"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// Lines per key per interval; the next line after suppressed ones says
// how many.
func TestLogLimiterSuppressedCount(t *testing.T) {
	l := NewLogLimiter(LogConfig{Lines: 2, Interval: time.Minute, Total: 100})
	a := Key{Msg: "refused", Source: addr(1).Addr()}
	b := Key{Msg: "refused", Source: addr(2).Addr()}
	steps := []struct {
		at         time.Duration
		k          Key
		ok         bool
		suppressed uint64
	}{
		{0, a, true, 0},
		{time.Second, a, true, 0},
		{2 * time.Second, a, false, 0},
		{3 * time.Second, a, false, 0},
		{3 * time.Second, b, true, 0}, // its own count
		{59 * time.Second, a, false, 0},
		{time.Minute, a, true, 3}, // a new interval: says what the last one suppressed
		{time.Minute, a, true, 0},
		{time.Minute + time.Second, a, false, 0},
		{10 * time.Minute, a, true, 1},
	}
	for i, s := range steps {
		ok, n := l.Allow(s.k, t0.Add(s.at))
		if ok != s.ok || n != s.suppressed {
			t.Fatalf("step %d: %v %d, want %v %d", i, ok, n, s.ok, s.suppressed)
		}
	}
	if st := l.Stats(); st.Logged != 6 || st.Suppressed != 4 || st.Keys != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// A flood of lines from ever-new sources: Total lines an interval, and the
// keys tracked stay bounded.
func TestLogLimiterFloodBounded(t *testing.T) {
	cfg := LogConfig{Interval: time.Minute, Total: 60, MaxKeys: 1024}
	l := NewLogLimiter(cfg)
	logged := 0
	for i := range 100_000 { // 10 s at 10k lines/s
		if ok, _ := l.Allow(Key{Msg: "bad packet", Source: addr(i).Addr()}, t0.Add(time.Duration(i)*100*time.Microsecond)); ok {
			logged++
		}
		if i%997 == 0 && l.Stats().Keys > cfg.MaxKeys {
			t.Fatalf("%d keys tracked, cap %d", l.Stats().Keys, cfg.MaxKeys)
		}
	}
	if logged != cfg.Total {
		t.Fatalf("%d lines logged in one interval, cap %d", logged, cfg.Total)
	}
	// What is left to report: Total keys at most, the rest summed.
	pending, others := l.Flush(t0.Add(time.Hour))
	var sum uint64
	for _, p := range pending {
		sum += p.N
	}
	if len(pending) > cfg.Total || sum+others != 100_000-uint64(cfg.Total) {
		t.Fatalf("flush: %d keys, %d + %d lines", len(pending), sum, others)
	}
	if p, o := l.Flush(t0.Add(2 * time.Hour)); len(p) != 0 || o != 0 {
		t.Fatalf("second flush reported again: %v %d", p, o)
	}
}

// Once: a key logs once, then is only counted; Flush says the count at
// most once an interval.
func TestLogLimiterOnce(t *testing.T) {
	l := NewLogLimiter(LogConfig{Once: true, Interval: time.Minute})
	k := Key{Msg: "refused ADJTIME from a host that is not our master", Source: addr(7).Addr()}
	if ok, _ := l.Allow(k, t0); !ok {
		t.Fatal("first line suppressed")
	}
	for i := range 100 {
		if ok, _ := l.Allow(k, t0.Add(time.Duration(i)*time.Hour)); ok {
			t.Fatalf("logged again after %d h", i)
		}
	}
	if p, _ := l.Flush(t0.Add(30 * time.Second)); len(p) != 0 {
		t.Fatalf("flushed within the interval: %v", p)
	}
	p, _ := l.Flush(t0.Add(time.Minute))
	if len(p) != 1 || p[0].Key != k || p[0].N != 100 {
		t.Fatalf("flush %v", p)
	}
	if p, _ := l.Flush(t0.Add(2 * time.Minute)); len(p) != 0 {
		t.Fatalf("nothing new, flushed %v", p)
	}
}

func TestLogger(t *testing.T) {
	log, hook := test.NewNullLogger()
	log.SetOutput(io.Discard)
	lg := NewLogger(log, LogConfig{Interval: time.Minute})
	k := Key{Msg: "refused SETTIME", Source: addr(9).Addr()}
	for i := range 5 {
		if e := lg.Entry(k, t0.Add(time.Duration(i)*time.Second)); e != nil {
			e.Warn(k.Msg)
		}
	}
	if len(hook.Entries) != 1 || hook.LastEntry().Data["source"] != "10.0.0.9" || hook.LastEntry().Data["suppressed"] != nil {
		t.Fatalf("entries %+v", hook.AllEntries())
	}
	e := lg.Entry(k, t0.Add(time.Minute))
	if e == nil {
		t.Fatal("suppressed after the interval")
	}
	e.Warn(k.Msg)
	if got := hook.LastEntry().Data["suppressed"]; got != uint64(4) {
		t.Fatalf("suppressed field %v", got)
	}
	// A key that went quiet gets its count said by Flush.
	lg.Entry(k, t0.Add(time.Minute+time.Second))
	hook.Reset()
	lg.Flush(t0.Add(3*time.Minute), logrus.InfoLevel)
	if len(hook.Entries) != 1 || hook.LastEntry().Message != k.Msg || hook.LastEntry().Data["suppressed"] != uint64(1) {
		t.Fatalf("flush entries %+v", hook.AllEntries())
	}
	if st := lg.Limiter().Stats(); st.Logged != 2 || st.Suppressed != 5 {
		t.Fatalf("stats %+v", st)
	}
}

package limit

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func addr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 525)
}

// One source: its burst, then refusals, then one datagram per 1/rate.
func TestLimiterBurstRefuseRefill(t *testing.T) {
	l := NewLimiter(Config{Rate: 2, Burst: 3, GlobalRate: 1000, GlobalBurst: 1000})
	a, b := addr(1), addr(2)
	steps := []struct {
		at   time.Duration
		src  netip.AddrPort
		want bool
	}{
		{0, a, true}, {0, a, true}, {0, a, true}, // the burst
		{0, a, false}, {100 * time.Millisecond, a, false}, // empty
		{0, b, true},                      // another source has its own bucket
		{500 * time.Millisecond, a, true}, // one token per 500 ms
		{500 * time.Millisecond, a, false},
		{999 * time.Millisecond, a, false},
		{time.Second, a, true},
		{time.Hour, a, true}, {time.Hour, a, true}, {time.Hour, a, true}, // refilled to the burst, no more
		{time.Hour, a, false},
	}
	for i, s := range steps {
		if got := l.Allow(s.src, t0.Add(s.at)); got != s.want {
			t.Fatalf("step %d (%v after start, %v): %v, want %v", i, s.at, s.src, got, s.want)
		}
	}
	st := l.Stats()
	if st.Allowed != 9 || st.DeniedSource != 5 || st.DeniedGlobal != 0 || st.Sources != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// The table never holds more than MaxSources, whatever the number of
// sources; the one seen most recently is kept.
func TestLimiterTableBounded(t *testing.T) {
	const size = 4096
	l := NewLimiter(Config{Rate: 1, Burst: 1, GlobalRate: rate.Inf, GlobalBurst: 1, MaxSources: size})
	busy := addr(1 << 20)
	l.Allow(busy, t0) // its only token: further datagrams are refused while it is tracked
	for i := range 100_000 {
		now := t0.Add(time.Duration(i) * time.Microsecond)
		if !l.Allow(addr(i), now) {
			t.Fatalf("new source %d refused", i)
		}
		if i%1000 == 0 && l.Allow(busy, now) {
			t.Fatalf("busy source allowed at %d: it was forgotten although seen recently", i)
		}
		if n := l.Stats().Sources; n > size {
			t.Fatalf("%d sources tracked after %d, cap %d", n, i+1, size)
		}
	}
	st := l.Stats()
	if st.Sources != size || st.Evicted != 100_000+1-size {
		t.Fatalf("stats %+v", st)
	}
}

// A flood from spoofed sources, each new and with a full bucket, gets no
// more than the aggregate through, and does not churn the table faster.
func TestLimiterGlobalCapsSpoofedFlood(t *testing.T) {
	cfg := Config{Rate: 16, Burst: 64, GlobalRate: 1000, GlobalBurst: 2000, MaxSources: 4096}
	l := NewLimiter(cfg)
	const pps, secs = 10_000, 10
	for i := range pps * secs {
		l.Allow(addr(i), t0.Add(time.Duration(i)*time.Second/pps))
	}
	st := l.Stats()
	limit := uint64(cfg.GlobalBurst) + uint64(cfg.GlobalRate)*secs
	if st.Allowed > limit || st.Allowed < limit-2 {
		t.Fatalf("allowed %d of the flood, want about %d", st.Allowed, limit)
	}
	if st.DeniedGlobal != pps*secs-st.Allowed || st.DeniedSource != 0 {
		t.Fatalf("stats %+v", st)
	}
	if st.Evicted != st.Allowed-uint64(cfg.MaxSources) {
		t.Fatalf("evicted %d, allowed %d: refused sources entered the table", st.Evicted, st.Allowed)
	}
}

// A datagram refused by the aggregate takes nothing from its source.
func TestLimiterRefusalSpendsNoToken(t *testing.T) {
	l := NewLimiter(Config{Rate: 1, Burst: 2, GlobalRate: 1, GlobalBurst: 1})
	a := addr(1)
	if !l.Allow(a, t0) || l.Allow(a, t0) {
		t.Fatal("the aggregate's single token")
	}
	// A second later the aggregate has one token, and a still has its
	// second (the refused datagram took none).
	if !l.Allow(a, t0.Add(time.Second)) {
		t.Fatal("refused after refill")
	}
	if st := l.Stats(); st.DeniedGlobal != 1 || st.DeniedSource != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestLimiterDefaults(t *testing.T) {
	c := NewLimiter(Config{}).Config()
	if c.Rate != DefaultRate || c.Burst != DefaultBurst || c.GlobalRate != DefaultGlobalRate ||
		c.GlobalBurst != DefaultGlobalBurst || c.MaxSources != DefaultMaxSources {
		t.Fatalf("%+v", c)
	}
}

func TestLimiterConcurrent(t *testing.T) {
	l := NewLimiter(Config{MaxSources: 64})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				l.Allow(addr(g*1000+i%100), t0.Add(time.Duration(i)*time.Millisecond))
				_ = l.Stats()
			}
		})
	}
	wg.Wait()
	if st := l.Stats(); st.Allowed+st.DeniedSource+st.DeniedGlobal != 8000 || st.Sources > 64 {
		t.Fatalf("stats %+v", st)
	}
}

func TestCounter(t *testing.T) {
	type reason uint8
	var c Counter[reason]
	c.Add(3)
	c.Add(3)
	c.Add(255)
	if c.Load(3) != 2 || c.Load(0) != 0 {
		t.Fatalf("loads %d %d", c.Load(3), c.Load(0))
	}
	if s := c.Snapshot(); len(s) != 2 || s[3] != 2 || s[255] != 1 {
		t.Fatalf("snapshot %v", s)
	}
}

// BenchmarkAllowFlood is the cost of a datagram in a 10k/s flood, from one
// source and from ever-new spoofed sources.
func BenchmarkAllowFlood(b *testing.B) {
	srcs := make([]netip.AddrPort, 1<<16)
	for i := range srcs {
		srcs[i] = addr(i)
	}
	for _, bc := range []struct {
		name string
		src  func(i int) netip.AddrPort
	}{
		{"one-source", func(int) netip.AddrPort { return srcs[0] }},
		{"spoofed", func(i int) netip.AddrPort { return srcs[i%len(srcs)] }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := NewLimiter(Config{})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l.Allow(bc.src(i), t0.Add(time.Duration(i)*100*time.Microsecond))
				i++
			}
		})
	}
}

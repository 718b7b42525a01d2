package clocksync

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// userOnly hides a connection's transmit stamps: the user-space path.
type userOnly struct{ PacketConn }

// BenchmarkProbeStamps measures a slave 3 ms ahead over real loopback
// sockets, on the simulated clocks the daemon's tests use, with the
// kernel's transmit stamps and with readings in user space only, idle and
// with busy threads competing for the CPUs (GOMAXPROCS raised above them,
// so that the kernel, not Go's scheduler, preempts, as it does daemons). It prints the error of the
// measured offset (p50, p99, max), its error bound, and how many errors
// exceeded their bound (an honest bound: none). The anchor: the
// issue measured user-space stamps landing up to about 1 ms in the offsets
// of 50 daemons on 2 cores.
func BenchmarkProbeStamps(b *testing.B) {
	for _, load := range []int{0, 8} {
		for _, kernel := range []bool{true, false} {
			name := "user"
			if kernel {
				name = "kernel"
			}
			b.Run(fmt.Sprintf("load=%d/%s", load, name), func(b *testing.B) {
				errs, bounds, stamps, beyond := probeStampRun(b, kernel, load)
				slices.Sort(errs)
				slices.Sort(bounds)
				p := func(s []time.Duration, q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
				b.ReportMetric(float64(p(errs, 0.5).Nanoseconds()), "err-p50-ns")
				b.ReportMetric(float64(p(errs, 0.99).Nanoseconds()), "err-p99-ns")
				b.Logf("| load %d | %-6s (%s) | error p50 %9v p99 %9v max %9v | bound p50 %9v | %d measurements, %d beyond their bound |",
					load, name, stamps, p(errs, 0.5), p(errs, 0.99), errs[len(errs)-1], p(bounds, 0.5), len(errs), beyond)
			})
		}
	}
}

func probeStampRun(b *testing.B, kernel bool, load int) (errs, bounds []time.Duration, stamps string, beyond int) {
	src := NewMonotonicSource()
	const ahead = 3 * time.Millisecond
	mc, sc := loopbackPair(b)
	var mconn, sconn PacketConn = mc, sc
	if !kernel {
		mconn, sconn = userOnly{mc}, userOnly{sc}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	client := NewProbeClient(mconn, NewSimClock(src, SimConfig{}), "master", ProbeConfig{})
	wg.Add(2)
	go func() { defer wg.Done(); _ = Serve(ctx, mconn, client, nil, nil) }()
	go func() {
		defer wg.Done()
		_ = Serve(ctx, sconn, nil, NewProbeResponder(NewSimClock(src, SimConfig{Offset: ahead}), "slave"), nil)
	}()
	var stop atomic.Bool
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), load+2)))
	for range load {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for !stop.Load() {
				x++
			}
			_ = x
		}()
	}
	defer func() { stop.Store(true); cancel(); wg.Wait() }()
	for b.Loop() {
		m, err := client.Measure(ctx, sc.LocalAddr())
		if err != nil {
			b.Fatal(err)
		}
		errs = append(errs, absDur(m.Offset-ahead))
		if errs[len(errs)-1] > m.ErrorBound {
			beyond++
		}
		bounds = append(bounds, m.ErrorBound)
		stamps = m.Stamps
	}
	return errs, bounds, stamps, beyond
}

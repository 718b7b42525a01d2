package timed

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/timed-project/timed/clocksync"
)

// countingMeasurer answers for the hosts in ok and counts every call.
type countingMeasurer struct {
	ok    map[netip.AddrPort]bool
	calls map[netip.AddrPort]int
}

func (c *countingMeasurer) Measure(_ context.Context, h netip.AddrPort) (clocksync.Measurement, error) {
	c.calls[h]++
	if c.ok[h] {
		return clocksync.Measurement{}, nil
	}
	return clocksync.Measurement{}, errors.New("no answer")
}

// TestFallbackMeasurerRemembers: a host that ignores the probe but
// answers ICMP (a BSD daemon) is measured by ICMP from then on, with the
// probe tried again every reprobeEvery measurements; a host that answered
// the probe once is never measured by ICMP.
func TestFallbackMeasurerRemembers(t *testing.T) {
	bsd, ours := netip.MustParseAddrPort("10.0.0.2:525"), netip.MustParseAddrPort("10.0.0.3:525")
	probe := &countingMeasurer{ok: map[netip.AddrPort]bool{ours: true}, calls: map[netip.AddrPort]int{}}
	icmp := &countingMeasurer{ok: map[netip.AddrPort]bool{bsd: true, ours: true}, calls: map[netip.AddrPort]int{}}
	f := newFallbackMeasurer(probe, icmp)
	const rounds = 2 * reprobeEvery
	for range rounds {
		if _, err := f.Measure(context.Background(), bsd); err != nil {
			t.Fatal(err)
		}
	}
	if want := 2 + (rounds-2)/reprobeEvery; probe.calls[bsd] != want {
		t.Errorf("BSD host probed %d times in %d rounds, want %d (first, second, then every %d)", probe.calls[bsd], rounds, want, reprobeEvery)
	}
	if icmp.calls[bsd] != rounds {
		t.Errorf("BSD host measured by ICMP %d times, want every round (%d)", icmp.calls[bsd], rounds)
	}
	f.Measure(context.Background(), ours)
	if b, o, n := f.method(bsd), f.method(ours), f.method(netip.MustParseAddrPort("10.0.0.4:525")); b != "icmp" || o != "probe" || n != "" {
		t.Errorf("methods: BSD host %q, ours %q, unmeasured %q; want icmp, probe, none", b, o, n)
	}
	probe.ok[ours] = false // its probe answers get lost now
	if _, err := f.Measure(context.Background(), ours); err == nil || icmp.calls[ours] != 0 {
		t.Fatalf("our daemon fell back to ICMP (%d calls, err %v): the kernel's clock is not the one synchronised", icmp.calls[ours], err)
	}
}

// silentMeasurer never answers: it waits until the measurement's time is
// up, as the probe does for a host that drops version 2 unread.
type silentMeasurer struct{}

func (silentMeasurer) Measure(ctx context.Context, _ netip.AddrPort) (clocksync.Measurement, error) {
	<-ctx.Done()
	return clocksync.Measurement{}, ctx.Err()
}

// TestFallbackMeasurerLeavesTimeForICMP: a BSD host, which never answers
// the probe, is still measured by ICMP within the round's time (here the
// fast profile's 500 ms): the first probe is a short try, not the whole
// round.
func TestFallbackMeasurerLeavesTimeForICMP(t *testing.T) {
	bsd := netip.MustParseAddrPort("10.0.0.2:525")
	icmp := &countingMeasurer{ok: map[netip.AddrPort]bool{bsd: true}, calls: map[netip.AddrPort]int{}}
	f := newFallbackMeasurer(silentMeasurer{}, icmp)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := f.Measure(ctx, bsd); err != nil || icmp.calls[bsd] != 1 {
		t.Fatalf("BSD host: err %v, %d ICMP measurements; want one, within the round", err, icmp.calls[bsd])
	}
	if f.useICMP(bsd) {
		t.Error("BSD host not probed once more at its second measurement")
	}
	if !f.useICMP(bsd) {
		t.Error("BSD host not remembered as measured by ICMP")
	}
}

// TestFallbackMeasurerLateProbeReply: a daemon whose probe answer came
// too late for the discovery wait (a loaded host) was measured by ICMP;
// once its reply is seen, it is measured by the probe from the next
// measurement on, never by ICMP again.
func TestFallbackMeasurerLateProbeReply(t *testing.T) {
	slow := netip.MustParseAddrPort("10.0.0.5:525")
	probe := &countingMeasurer{ok: map[netip.AddrPort]bool{}, calls: map[netip.AddrPort]int{}}
	icmp := &countingMeasurer{ok: map[netip.AddrPort]bool{slow: true}, calls: map[netip.AddrPort]int{}}
	f := newFallbackMeasurer(probe, icmp)
	if _, err := f.Measure(context.Background(), slow); err != nil || f.method(slow) != "icmp" {
		t.Fatalf("probe unanswered in time: %v, method %q; want icmp", err, f.method(slow))
	}
	f.sawProbeReply(slow) // its answer arrives after all
	probe.ok[slow] = true
	for range 3 {
		if _, err := f.Measure(context.Background(), slow); err != nil {
			t.Fatal(err)
		}
	}
	if icmp.calls[slow] != 1 || probe.calls[slow] != 4 || f.method(slow) != "probe" {
		t.Fatalf("after its late reply: %d ICMP, %d probe measurements, method %q; want 1, 4, probe", icmp.calls[slow], probe.calls[slow], f.method(slow))
	}
}

// replyDuring is an ICMP measurer during whose measurement the probe's
// late reply is seen (sawProbeReply).
type replyDuring struct{ f *fallbackMeasurer }

func (r replyDuring) Measure(_ context.Context, h netip.AddrPort) (clocksync.Measurement, error) {
	r.f.sawProbeReply(h)
	return clocksync.Measurement{}, nil
}

// TestFallbackMeasurerReplyDuringICMP: a late probe reply seen while the
// host is measured by ICMP keeps it ours: the ICMP answer does not make
// it a BSD host again.
func TestFallbackMeasurerReplyDuringICMP(t *testing.T) {
	slow := netip.MustParseAddrPort("10.0.0.6:525")
	probe := &countingMeasurer{ok: map[netip.AddrPort]bool{}, calls: map[netip.AddrPort]int{}}
	f := newFallbackMeasurer(probe, nil)
	f.icmp = replyDuring{f}
	if _, err := f.Measure(context.Background(), slow); err != nil {
		t.Fatal(err)
	}
	probe.ok[slow] = true
	if _, err := f.Measure(context.Background(), slow); err != nil || probe.calls[slow] != 2 || f.method(slow) != "probe" {
		t.Fatalf("after a reply during ICMP: %v, %d probe calls, method %q; want the probe", err, probe.calls[slow], f.method(slow))
	}
}

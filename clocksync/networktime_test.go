package clocksync

import (
	"slices"
	"testing"
	"time"
)

const ms = time.Millisecond

func hosts(offsets ...time.Duration) []HostOffset {
	h := make([]HostOffset, len(offsets))
	for i, o := range offsets {
		h[i] = HostOffset{Offset: o, Trusted: true, Responsive: true, ErrorBound: 50 * time.Microsecond}
	}
	return h
}

func TestMedian(t *testing.T) {
	cases := []struct {
		in   []time.Duration
		want time.Duration
	}{
		{[]time.Duration{0}, 0},
		{[]time.Duration{5 * ms, 0, -3 * ms}, 0},
		{[]time.Duration{0, 10 * ms}, 5 * ms},
		{[]time.Duration{0, 10 * ms, 4 * ms, 100 * ms}, 7 * ms},
		{[]time.Duration{-1, -1, -1, 1000}, -1},
	}
	for _, c := range cases {
		if got := median(append([]time.Duration(nil), c.in...)); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestNetworkTimeBSDCases(t *testing.T) {
	cases := []struct {
		name  string
		hosts []HostOffset
		want  time.Duration
	}{
		{"only self", nil, 0},
		// Unresponsive and untrusted hosts do not vote: only self is left.
		{"only self left", []HostOffset{{Offset: 50 * ms, Trusted: true}, {Offset: 40 * ms, Responsive: true}}, 0},
		// Votes {0, 10, 12}: median 10; all within 14 ms; median 10.
		{"all kept", hosts(10*ms, 12*ms), 10 * ms},
		// Votes {0, 2, 4, 1000, 2000}: median 4; kept {0, 2, 4}: median 2.
		// The faulty clocks do not pull the result.
		{"faulty clocks excluded", hosts(2*ms, 4*ms, time.Second, 2*time.Second), 2 * ms},
		// Window edge: votes {0, 14, 14}: median 14; 0 is exactly 14 ms
		// away and kept; median of {0, 14, 14} = 14.
		{"window edge kept", hosts(14*ms, 14*ms), 14 * ms},
		// Votes {0, 14.001, 14.001, 14.001}: median 14.001; 0 is beyond
		// 14 ms and dropped.
		{"window edge excluded", hosts(14*ms+time.Microsecond, 14*ms+time.Microsecond, 14*ms+time.Microsecond), 14*ms + time.Microsecond},
		// Votes {0, 100, 200}: median 100, only that host kept: its value.
		{"one kept", hosts(100*ms, 200*ms), 100 * ms},
		// Votes {0, 100, 300, 500}: median 200, none within 14 ms: the median.
		{"none kept", hosts(100*ms, 300*ms, 500*ms), 200 * ms},
	}
	for _, c := range cases {
		if got := NetworkTimeBSD(c.hosts); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// Untrusted hosts do not vote, but join the second stage within 6 ms.
func TestNetworkTimeUntrustedWindow(t *testing.T) {
	h := hosts(10*ms, 10*ms)                                              // votes {0, 10, 10}: median 10
	near := HostOffset{Offset: 16 * ms, Responsive: true}                 // 6 ms away: kept
	far := HostOffset{Offset: 16*ms + time.Microsecond, Responsive: true} // just beyond: dropped
	dead := HostOffset{Offset: 11 * ms, Trusted: true, Responsive: false} // unresponsive: dropped
	r := NetworkTime(append(h, near, far, dead), NetworkOptions{BSD: true})
	if r.Voters != 3 || r.Median != 10*ms || r.Kept != 4 || r.Offset != 10*ms {
		t.Fatalf("%+v", r)
	}
	if want := []bool{true, true, true, false, false}; !slices.Equal(r.Used, want) {
		t.Fatalf("used %v, want %v (the far and the dead host left out)", r.Used, want)
	}
	r = NetworkTime(append(h, near, near, near), NetworkOptions{BSD: true})
	// Kept {0, 10, 10, 16, 16, 16}: median 13.
	if r.Kept != 6 || r.Offset != 13*ms {
		t.Fatalf("with three untrusted: %+v", r)
	}
}

// Ours: same stages, weighted mean of the kept hosts.
func TestNetworkTimeWeighted(t *testing.T) {
	// Kept {0 (self), 3, 6}, equal weights at the floor: mean 3.
	if r := NetworkTime(hosts(3*ms, 6*ms, time.Second), NetworkOptions{}); r.Offset != 3*ms || r.Kept != 3 || !slices.Equal(r.Used, []bool{true, true, false}) {
		t.Fatalf("equal weights: %+v", r)
	}
	// Only the master votes: nobody is used.
	if r := NetworkTime([]HostOffset{{Offset: ms}}, NetworkOptions{}); r.Used != nil && r.Used[0] {
		t.Fatalf("an unresponsive host used: %+v", r)
	}
	// A host measured over a slow path (error bound 10 ms) counts for
	// (0.1/10)² = 1e-4 of the others.
	h := hosts(2*ms, 4*ms)
	h = append(h, HostOffset{Offset: 12 * ms, ErrorBound: 10 * ms, Trusted: true, Responsive: true})
	r := NetworkTime(h, NetworkOptions{})
	if r.Offset < 2*ms || r.Offset > 2*ms+5*time.Microsecond {
		t.Fatalf("slow path pulled the mean to %v", r.Offset)
	}
	// The faulty clock, far from the majority, does not pull it at all.
	base := NetworkTime(hosts(1*ms, 2*ms, 3*ms, 4*ms), NetworkOptions{}).Offset
	withFaulty := NetworkTime(hosts(1*ms, 2*ms, 3*ms, 4*ms, 10*time.Second), NetworkOptions{}).Offset
	if base != withFaulty {
		t.Fatalf("faulty clock moved network time from %v to %v", base, withFaulty)
	}
}

package clocksync

import (
	"math/rand/v2"
	"testing"
	"time"
)

const bound = DefaultMaxSourceInfluence

// One slave far off, in networks where it is a large share of the vote or
// not: it moves the network time by at most the bound.
func TestNetworkTimeOneHostBounded(t *testing.T) {
	liar := hosts(990 * time.Second)[0]
	asleep := HostOffset{Offset: time.Millisecond, Trusted: true} // not responsive this round
	cases := []struct {
		name      string
		honest    []HostOffset
		unbounded time.Duration // what the two stages alone give
		want      time.Duration
	}{
		// Votes {0, 990 s}: the midpoint, kept by no one.
		{"master and the liar", nil, 495 * time.Second, bound},
		{"the other slave asleep", []HostOffset{asleep}, 495 * time.Second, bound},
		// Votes {0, 1, 2, 3, 990 s}: the median already ignores it.
		{"network of 5", hosts(1*ms, 2*ms, 3*ms), 1500 * time.Microsecond, 1500 * time.Microsecond},
	}
	for _, c := range cases {
		all := append(append([]HostOffset(nil), c.honest...), liar)
		r := NetworkTime(all, NetworkOptions{})
		if r.Unbounded != c.unbounded || r.Offset != c.want || r.Bounded != (c.want != c.unbounded) {
			t.Errorf("%s: %+v, want %v (unbounded %v)", c.name, r, c.want, c.unbounded)
		}
		without := NetworkTime(c.honest, NetworkOptions{}).Offset
		if d := absDur(r.Offset - without); d > bound {
			t.Errorf("%s: the liar moved network time by %v", c.name, d)
		}
		// BSD's median, bounded on request.
		if r := NetworkTime(all, NetworkOptions{BSD: true, MaxSourceInfluence: bound}); absDur(r.Offset-without) > bound {
			t.Errorf("%s, BSD: %+v, without the liar %v", c.name, r, without)
		}
	}
}

// Three of five agree (the master and two slaves), two collude: the answer
// is the three's. Removing one of the honest ones would swing the median to
// the liars, which must not count against the honest hosts.
func TestNetworkTimeHonestMajority(t *testing.T) {
	for _, liars := range [][]time.Duration{
		{990 * time.Second, 990 * time.Second},
		{990 * time.Second, -500 * time.Second},
		{40 * ms, 40 * ms}, // near enough to tempt the window, too far to be kept
	} {
		r := NetworkTime(hosts(1*ms, 2*ms, liars[0], liars[1]), NetworkOptions{})
		if r.Offset != 1*ms || r.Bounded {
			t.Errorf("liars at %v: %+v, want the honest mean 1ms", liars, r)
		}
	}
}

func TestNetworkTimeInfluenceOptions(t *testing.T) {
	h := hosts(990 * time.Second)
	if r := NetworkTime(h, NetworkOptions{MaxSourceInfluence: -1}); r.Offset != 495*time.Second || r.Bounded {
		t.Errorf("unbounded on request: %+v", r)
	}
	if r := NetworkTime(h, NetworkOptions{MaxSourceInfluence: time.Second}); r.Offset != time.Second {
		t.Errorf("1 s bound: %+v", r)
	}
	if got := NetworkTimeBSD(h); got != 495*time.Second {
		t.Errorf("BSD: %v", got)
	}
	// Offsets at the ends of the Durations' range overflow nothing.
	for _, far := range []time.Duration{maxDuration, -maxDuration - 1} {
		r := NetworkTime(hosts(far), NetworkOptions{})
		if absDur(r.Offset) != bound {
			t.Errorf("slave at %v: %+v", far, r)
		}
	}
}

// Random networks of up to 9 honest slaves within ±5 ms (some asleep or
// untrusted) and one liar anywhere: the liar never moves the network time
// by more than the bound. (Checked once with two million cases and other
// seeds; this many keeps the test quick.)
func TestNetworkTimeOneLiarProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 4))
	for i := range 20_000 {
		n := rng.IntN(10)
		hs := make([]HostOffset, 0, n+1)
		for range n {
			hs = append(hs, HostOffset{
				Offset:     time.Duration(rng.Int64N(int64(10*ms))) - 5*ms,
				ErrorBound: time.Duration(rng.Int64N(int64(ms))),
				Trusted:    rng.IntN(5) > 0,
				Responsive: rng.IntN(5) > 0,
			})
		}
		scale := []time.Duration{20 * ms, time.Second, 1000 * time.Second}[rng.IntN(3)]
		liar := HostOffset{
			Offset:     time.Duration(rng.Int64N(int64(2*scale))) - scale,
			ErrorBound: time.Duration(rng.Int64N(int64(ms))),
			Trusted:    rng.IntN(5) > 0,
			Responsive: true,
		}
		without := NetworkTime(hs, NetworkOptions{}).Offset
		at := rng.IntN(len(hs) + 1)
		with := append(append(append([]HostOffset(nil), hs[:at]...), liar), hs[at:]...)
		r := NetworkTime(with, NetworkOptions{})
		if d := absDur(r.Offset - without); d > bound {
			t.Fatalf("case %d: liar %+v among %+v moved network time by %v: %+v", i, liar, hs, d, r)
		}
	}
}

package limit

import (
	"testing"
	"time"
)

// A flood from many sources, none over its own rate, empties the
// aggregate bucket: other new sources are refused, but a known one (a
// configured peer) is still heard, at its own rate and no faster.
func TestKnownSourcePastEmptyAggregate(t *testing.T) {
	l := NewLimiter(Config{Rate: 16, Burst: 64, GlobalRate: 1000, GlobalBurst: 4000, MaxSources: 4096})
	peer, stranger := addr(1<<20), addr(1<<20+1)
	const pps, secs = 10_000, 2
	heard, past := 0, 0
	for i := range pps * secs {
		now := t0.Add(time.Duration(i) * time.Second / pps)
		l.Allow(addr(i%640), now) // 640 sources at 15.6/s each
		if i%100 == 0 {           // the peer: 100/s, over its own rate
			if l.AllowKnown(peer, now) {
				heard++
			}
			if l.Allow(stranger, now) {
				past++
			}
		}
	}
	st := l.Stats()
	if st.DeniedGlobal == 0 {
		t.Fatalf("the flood never emptied the aggregate bucket: %+v", st)
	}
	// Its burst and 16/s for 2 s, give or take a token.
	if want := 64 + 16*secs; heard < want-1 || heard > want+1 {
		t.Errorf("known source heard %d times, want about %d (its own bucket)", heard, want)
	}
	if st.KnownPastGlobal == 0 {
		t.Errorf("no known datagram went past the empty aggregate: %+v", st)
	}
	// The stranger, sending as the peer does, got through only while the
	// aggregate's burst lasted (under half a second).
	if past >= heard/2 {
		t.Errorf("an unknown source got %d datagrams through, the known one %d", past, heard)
	}
}

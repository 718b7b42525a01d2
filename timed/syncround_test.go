package timed

import (
	"testing"
	"time"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/config"
)

// TestMaxSourceInfluenceSetting: the configured bound reaches the network
// time, and 0 in the configuration means no bound (not clocksync's
// default). The master and one slave 990 s off: BSD's midpoint unbounded.
func TestMaxSourceInfluenceSetting(t *testing.T) {
	liar := []clocksync.HostOffset{{Offset: 990 * time.Second, ErrorBound: time.Millisecond, Trusted: true, Responsive: true}}
	for _, c := range []struct {
		bound, want time.Duration
	}{
		{50 * time.Millisecond, 50 * time.Millisecond},
		{10 * time.Millisecond, 10 * time.Millisecond},
		{0, 495 * time.Second},
	} {
		cfg := &config.Config{Sync: config.Sync{MaxSourceInfluence: c.bound}}
		if got := clocksync.NetworkTime(liar, networkOptions(cfg)).Offset; got != c.want {
			t.Errorf("max-source-influence %v: network time %v, want %v", c.bound, got, c.want)
		}
	}
}

package election

import (
	"testing"
	"time"
)

// TestAnswerDelayFor: the answer delay spreads N answers AnswerSpacing
// apart; it never shortens the configured delay (BSD's 100 ms already
// spreads NHOSTS), counts hosts up to MaxSlaves, stays within half the
// candidate wait, and the result is a valid configuration.
func TestAnswerDelayFor(t *testing.T) {
	fast, bsd := FastConfig("m"), DefaultConfig("m")
	for _, c := range []struct {
		name  string
		cfg   Config
		hosts int
		want  time.Duration
	}{
		{"fast, 20 hosts: the profile's 2 ms", fast, 20, 2 * time.Millisecond},
		{"fast, 500 hosts", fast, 500, 25 * time.Millisecond},
		{"fast, 5000 hosts: half the 100 ms candidate wait", fast, 5000, 50 * time.Millisecond},
		{"fast, none", fast, -1, 2 * time.Millisecond},
		{"BSD, 65536 hosts: MaxSlaves' 50.65 ms < 100 ms", bsd, 1 << 16, 100 * time.Millisecond},
	} {
		got := c.cfg.AnswerDelayFor(c.hosts)
		if got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		cfg := c.cfg
		cfg.AnswerDelay = got
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

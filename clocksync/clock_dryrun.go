package clocksync

import (
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// DryRunClock reads a clock and reports every change it is asked to make,
// without making it. Measurements and network time work as usual; the clock
// itself is never touched, whatever the process's capabilities.
type DryRunClock struct {
	read func() time.Time
	log  logrus.FieldLogger

	mu      sync.Mutex
	freq    float64
	actions []string
}

// maxDryRunActions bounds the action log kept for State and Actions.
const maxDryRunActions = 64

// NewDryRunClock returns a dry-run clock reading read (nil: the host clock)
// and logging would-be changes at info level to log (nil: the standard
// logrus logger).
func NewDryRunClock(read func() time.Time, log logrus.FieldLogger) *DryRunClock {
	if read == nil {
		read = func() time.Time { return time.Now().Round(0) }
	}
	if log == nil {
		log = logrus.StandardLogger()
	}
	return &DryRunClock{read: read, log: log}
}

func (c *DryRunClock) record(msg string) {
	c.mu.Lock()
	c.actions = append(c.actions, msg)
	if len(c.actions) > maxDryRunActions {
		c.actions = c.actions[len(c.actions)-maxDryRunActions:]
	}
	c.mu.Unlock()
	c.log.WithField("clock", "dry-run").Info(msg)
}

// Now reads the underlying clock.
func (c *DryRunClock) Now() time.Time { return c.read() }

// nowWithSource: the clock read is never moved, so its readings are the
// real time they are of (pairedClock), as the system clock's are.
func (c *DryRunClock) nowWithSource() (clock, source time.Time) {
	t := c.read()
	return t, t
}

// Adjust reports the slew it would make.
func (c *DryRunClock) Adjust(d time.Duration) error {
	c.record(fmt.Sprintf("would slew by %v", d))
	return nil
}

// Step reports the step it would make.
func (c *DryRunClock) Step(t time.Time) error {
	c.record(fmt.Sprintf("would step by %v to %s", t.Sub(c.read()), t.UTC().Format(time.RFC3339Nano)))
	return nil
}

// SetFrequency reports the frequency it would set.
func (c *DryRunClock) SetFrequency(ppm float64) error {
	if err := checkFrequency(ppm); err != nil {
		return err
	}
	c.mu.Lock()
	c.freq = ppm
	c.mu.Unlock()
	c.record(fmt.Sprintf("would set frequency %+.3f ppm", ppm))
	return nil
}

// State reports the frequency last asked for (never applied) and the last
// would-be action.
func (c *DryRunClock) State() (ClockState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := ClockState{Kind: "dry-run", Now: c.read(), FrequencyPPM: c.freq, Detail: "never changes the clock"}
	if n := len(c.actions); n > 0 {
		s.Detail += "; last: " + c.actions[n-1]
	}
	return s, nil
}

// Actions returns the would-be changes recorded so far (the last 64).
func (c *DryRunClock) Actions() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.actions...)
}

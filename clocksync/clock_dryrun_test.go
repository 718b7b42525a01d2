package clocksync

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

func TestDryRunNeverChanges(t *testing.T) {
	fixed := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	log := logrus.New()
	log.SetOutput(io.Discard)
	c := NewDryRunClock(func() time.Time { return fixed }, log)
	if err := c.Adjust(5 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := c.Step(fixed.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := c.SetFrequency(12.5); err != nil {
		t.Fatal(err)
	}
	if !c.Now().Equal(fixed) {
		t.Fatalf("dry-run clock moved: %v", c.Now())
	}
	acts := c.Actions()
	if len(acts) != 3 || !strings.Contains(acts[0], "slew by 5ms") || !strings.Contains(acts[1], "step by 1h0m0s") || !strings.Contains(acts[2], "+12.500 ppm") {
		t.Fatalf("actions = %q", acts)
	}
	st, _ := c.State()
	if st.Kind != "dry-run" || st.FrequencyPPM != 12.5 || !strings.Contains(st.Detail, "would set frequency") {
		t.Fatalf("state = %+v", st)
	}
	if err := c.SetFrequency(600); err == nil {
		t.Fatal("dry-run accepted 600 ppm")
	}
	for range 100 {
		_ = c.Adjust(time.Millisecond)
	}
	if n := len(c.Actions()); n != maxDryRunActions {
		t.Fatalf("kept %d actions, want %d", n, maxDryRunActions)
	}
}

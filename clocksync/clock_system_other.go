//go:build !linux

package clocksync

import (
	"fmt"
	"time"
)

// SystemClock is the host clock. Only Linux is supported: elsewhere it reads
// the time and every change returns ErrUnsupported.
type SystemClock struct{}

// NewSystemClock returns the host clock.
func NewSystemClock() *SystemClock { return &SystemClock{} }

func (c *SystemClock) Now() time.Time { return time.Now().Round(0) }
func (c *SystemClock) Adjust(d time.Duration) error {
	return fmt.Errorf("system clock: slew: %w; use --clock=dry-run or --clock=sim:...", ErrUnsupported)
}
func (c *SystemClock) Step(t time.Time) error {
	return fmt.Errorf("system clock: step: %w; use --clock=dry-run or --clock=sim:...", ErrUnsupported)
}
func (c *SystemClock) SetFrequency(ppm float64) error {
	return fmt.Errorf("system clock: frequency: %w; use --clock=dry-run or --clock=sim:...", ErrUnsupported)
}
func (c *SystemClock) State() (ClockState, error) {
	return ClockState{Kind: "system", Now: c.Now(), Detail: "read-only: " + ErrUnsupported.Error()}, nil
}

// CheckPermission: changing the clock is not supported here at all.
func (c *SystemClock) CheckPermission() error {
	return fmt.Errorf("system clock: %w; use --clock=dry-run or --clock=sim:...", ErrUnsupported)
}

package limit

import "sync/atomic"

// Counter counts events by reason, a small enumeration such as why a
// datagram was dropped. Its size is fixed (one counter for each of the 256
// values a uint8 reason can take), so no input grows it; the zero value is
// ready to use and it must not be copied after first use.
type Counter[R ~uint8] struct {
	n [256]atomic.Uint64
}

// Add counts one event for r.
func (c *Counter[R]) Add(r R) { c.n[r].Add(1) }

// Load is r's count.
func (c *Counter[R]) Load(r R) uint64 { return c.n[r].Load() }

// Snapshot returns the non-zero counts, for status and metrics.
func (c *Counter[R]) Snapshot() map[R]uint64 {
	m := map[R]uint64{}
	for i := range c.n {
		if v := c.n[i].Load(); v != 0 {
			m[R(i)] = v
		}
	}
	return m
}

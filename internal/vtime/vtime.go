// Package vtime is virtual time for deterministic simulations: a clock that
// moves only when the next scheduled event runs. Events due at the same
// instant run in the order they were scheduled, so a run is a pure function
// of its inputs and seed. It is not safe for concurrent use: a simulation
// runs on one goroutine.
package vtime

import (
	"container/heap"
	"time"
)

// Epoch is the virtual time at which schedulers start unless told otherwise.
// A fixed, recognisable date keeps simulation logs comparable across runs.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Scheduler holds virtual now and the queue of pending events.
type Scheduler struct {
	now   time.Time
	queue eventHeap
	seq   uint64
}

// Event is a scheduled callback; Cancel stops it from running.
type Event struct {
	at       time.Time
	seq      uint64
	fn       func()
	index    int // position in the heap, −1 once run or cancelled
	canceled bool
}

// New returns a scheduler whose clock reads start.
func New(start time.Time) *Scheduler { return &Scheduler{now: start} }

// Now is the current virtual time.
func (s *Scheduler) Now() time.Time { return s.now }

// Since is the virtual time elapsed since t.
func (s *Scheduler) Since(t time.Time) time.Duration { return s.now.Sub(t) }

// At schedules fn at t; a time in the past runs at the next Step, at now.
func (s *Scheduler) At(t time.Time, fn func()) *Event {
	if t.Before(s.now) {
		t = s.now
	}
	s.seq++
	e := &Event{at: t, seq: s.seq, fn: fn}
	heap.Push(&s.queue, e)
	return e
}

// After schedules fn d from now.
func (s *Scheduler) After(d time.Duration, fn func()) *Event { return s.At(s.now.Add(d), fn) }

// Cancel removes the event if it has not run yet. Cancelling twice, or
// after it ran, does nothing.
func (e *Event) Cancel(s *Scheduler) {
	if e == nil || e.canceled || e.index < 0 {
		return
	}
	e.canceled = true
	heap.Remove(&s.queue, e.index)
}

// When is the time the event is (or was) due.
func (e *Event) When() time.Time { return e.at }

// Pending is the number of events not yet run.
func (s *Scheduler) Pending() int { return len(s.queue) }

// Next is the due time of the earliest pending event.
func (s *Scheduler) Next() (time.Time, bool) {
	if len(s.queue) == 0 {
		return time.Time{}, false
	}
	return s.queue[0].at, true
}

// Step runs the earliest pending event, moving the clock to its time. It
// reports false when nothing is pending.
func (s *Scheduler) Step() bool {
	if len(s.queue) == 0 {
		return false
	}
	e := heap.Pop(&s.queue).(*Event)
	s.now = e.at
	e.fn()
	return true
}

// RunUntil runs every event due at or before t, then sets the clock to t.
func (s *Scheduler) RunUntil(t time.Time) {
	for len(s.queue) > 0 && !s.queue[0].at.After(t) {
		s.Step()
	}
	if t.After(s.now) {
		s.now = t
	}
}

// RunFor runs the events of the next d of virtual time.
func (s *Scheduler) RunFor(d time.Duration) { s.RunUntil(s.now.Add(d)) }

type eventHeap []*Event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *eventHeap) Push(x any) {
	e := x.(*Event)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*h = old[:len(old)-1]
	return e
}

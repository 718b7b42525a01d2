package vtime

import (
	"reflect"
	"testing"
	"time"
)

func TestEventsRunInTimeThenScheduleOrder(t *testing.T) {
	s := New(Epoch)
	var got []string
	s.After(2*time.Second, func() { got = append(got, "b") })
	s.After(time.Second, func() { got = append(got, "a1") })
	s.After(time.Second, func() { got = append(got, "a2") })
	s.After(3*time.Second, func() {
		got = append(got, "c")
		s.After(0, func() { got = append(got, "c-now") })
	})
	s.RunFor(10 * time.Second)
	want := []string{"a1", "a2", "b", "c", "c-now"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
	if d := s.Since(Epoch); d != 10*time.Second {
		t.Fatalf("clock advanced %v, want 10s", d)
	}
}

func TestCancel(t *testing.T) {
	s := New(Epoch)
	ran := 0
	e := s.After(time.Second, func() { ran++ })
	s.After(2*time.Second, func() { ran += 10 })
	e.Cancel(s)
	e.Cancel(s) // twice is harmless
	s.RunFor(time.Minute)
	if ran != 10 {
		t.Fatalf("ran = %d, want only the uncancelled event (10)", ran)
	}
	e.Cancel(s) // after the queue drained: harmless
	if s.Pending() != 0 {
		t.Fatalf("pending = %d, want 0", s.Pending())
	}
}

func TestPastTimeRunsNow(t *testing.T) {
	s := New(Epoch)
	s.RunFor(time.Minute)
	var at time.Time
	s.At(Epoch, func() { at = s.Now() })
	s.Step()
	if !at.Equal(Epoch.Add(time.Minute)) {
		t.Fatalf("past event ran at %v, want now %v", at, Epoch.Add(time.Minute))
	}
}

package clocksync

import (
	"fmt"
	"testing"
	"time"
)

func TestRTTHistoryMinimumOverRecentRounds(t *testing.T) {
	h := NewRTTHistory(0)
	if got := h.Observe("a", 300*time.Microsecond); got != 300*time.Microsecond {
		t.Fatalf("first round: %v", got)
	}
	if got := h.Observe("a", 500*time.Microsecond); got != 300*time.Microsecond {
		t.Fatalf("second round: %v", got)
	}
	// The minimum is forgotten after RTTRounds rounds: a path that became
	// slower for good is the new normal.
	for range RTTRounds - 1 {
		h.Observe("a", 500*time.Microsecond)
	}
	if got := h.Observe("a", 600*time.Microsecond); got != 500*time.Microsecond {
		t.Fatalf("after %d rounds: %v, want 500µs", RTTRounds, got)
	}
	if got := h.Observe("b", -time.Second); got != 0 {
		t.Fatalf("negative RTT: %v", got)
	}
}

// The table is bounded: the host seen least recently goes.
func TestRTTHistoryBounded(t *testing.T) {
	h := NewRTTHistory(3)
	for i := range 10 {
		h.Observe(fmt.Sprint(i), time.Millisecond)
		h.Observe("kept", time.Millisecond) // seen every time
	}
	if h.Len() != 3 {
		t.Fatalf("%d hosts held, bound 3", h.Len())
	}
	if got := h.Observe("kept", 5*time.Millisecond); got != time.Millisecond {
		t.Fatalf("a host seen every round was evicted: min %v", got)
	}
}

func TestJudge(t *testing.T) {
	h := NewRTTHistory(0)
	us := time.Microsecond
	m := func(rtt time.Duration) Measurement { return Measurement{RTT: rtt, ErrorBound: rtt / 2} }
	if j := h.Judge("s", m(200*us)); j.Outlier || j.Excess != 0 || j.Slack != 0 {
		t.Fatalf("first sample judged %+v", j)
	}
	// Above the minimum but within the jitter: votes, corrected in full.
	if j := h.Judge("s", m(380*us)); j.Outlier || j.Excess != 90*us || j.Slack != 0 {
		t.Fatalf("380 µs against 200 µs: %+v", j)
	}
	// Twice the minimum and 1.8 ms above it: an outlier.
	if j := h.Judge("s", m(2*time.Millisecond)); !j.Outlier || j.Slack != 900*us || j.MinRTT != 200*us {
		t.Fatalf("2 ms against 200 µs: %+v", j)
	}
	// A nil history (BSD) judges nothing.
	var none *RTTHistory
	if j := none.Judge("s", m(time.Second)); j.Outlier || j.Slack != 0 {
		t.Fatalf("nil history: %+v", j)
	}
}

// A slave whose first rounds were all delayed has its floor at the delay;
// the round's other slaves show the network's typical path, and a young
// host is judged against it too. A host old in the history is judged by
// its own rounds alone: a far slave is not an outlier for being far.
func TestJudgeRoundYoungHost(t *testing.T) {
	us := time.Microsecond
	m := func(rtt time.Duration) Measurement { return Measurement{RTT: rtt, ErrorBound: rtt / 2} }
	hosts := []string{"a", "b", "c", "busy"}
	ok := []bool{true, true, true, true}
	h := NewRTTHistory(0)
	round := []Measurement{m(200 * us), m(210 * us), m(190 * us), m(3 * time.Millisecond)}
	j := h.JudgeRound(hosts, round, ok)
	if !j[3].Outlier || j[3].MinRTT != 210*us {
		t.Fatalf("a first reading 3 ms against the round's 210 µs: %+v", j[3])
	}
	if j[0].Outlier || j[1].Outlier || j[2].Outlier {
		t.Fatalf("the typical slaves judged outliers: %+v", j[:3])
	}
	// Fewer than three measured: no median to go by.
	if j := NewRTTHistory(0).JudgeRound(hosts[2:], round[2:], ok[2:]); j[1].Outlier {
		t.Fatalf("judged against a median of two: %+v", j[1])
	}
	// A host far away for good: once its history is old, its own floor
	// decides.
	far := NewRTTHistory(0)
	for range RTTRounds {
		far.JudgeRound(hosts, round, ok)
	}
	if j := far.JudgeRound(hosts, round, ok); j[3].Outlier {
		t.Fatalf("a host 3 ms away for %d rounds still an outlier: %+v", RTTRounds, j[3])
	}
	// Not measured: not judged, nothing recorded.
	if j := h.JudgeRound(hosts, round, []bool{true, true, true, false}); j[3] != (Judged{}) || h.Floor("busy") != 3*time.Millisecond {
		t.Fatalf("an unmeasured host judged %+v, floor %v", j[3], h.Floor("busy"))
	}
}

// Justify never goes past the true correction by more than the path's own
// error: a delay d on the reply's way makes the measured offset d/2 low
// and the RTT d high; the correction sent is then at most the true one.
func TestJustifyNeverOvercorrects(t *testing.T) {
	us := time.Microsecond
	for _, trueCorr := range []time.Duration{-3 * time.Millisecond, -300 * us, 0, 40 * us, 2 * time.Millisecond} {
		for _, d := range []time.Duration{0, 300 * us, time.Millisecond, 5 * time.Millisecond} {
			// The slave's offset reads d/2 low, so network − slave reads
			// d/2 high; the sample's excess is d/2.
			measured := trueCorr + d/2
			got := Justify(measured, d/2)
			if trueCorr >= 0 && (got < 0 || got > trueCorr) || trueCorr < 0 && (got > 0 || got < trueCorr) {
				t.Errorf("true %v, delay %v: sent %v", trueCorr, d, got)
			}
		}
	}
	if Justify(5*time.Millisecond, 0) != 5*time.Millisecond || Justify(-5*time.Millisecond, time.Millisecond) != -4*time.Millisecond {
		t.Fatal("justify")
	}
}

func TestPlanJustified(t *testing.T) {
	// Within the excess: nothing to send (an ADJTIME of 0).
	c := PlanJustified(0, -800*time.Microsecond, time.Millisecond, false, t0, CorrectOptions{})
	if c.Type.String() != "ADJTIME" || c.Adjust != 0 {
		t.Fatalf("%+v", c)
	}
	c = PlanJustified(0, -3*time.Millisecond, time.Millisecond, false, t0, CorrectOptions{})
	if c.Adjust != 2*time.Millisecond {
		t.Fatalf("%+v", c)
	}
	// A new slave is set whatever the excess.
	if c := PlanJustified(time.Second, 0, time.Millisecond, true, t0, CorrectOptions{}); c.SetTo != t0.Add(time.Second) {
		t.Fatalf("%+v", c)
	}
}

package tests

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/timed/control"
)

// TestMaxStepAlarm: slaves whose clocks start 5000 s off, beyond
// max-step, among two daemons on time. The master's first SETTIME to
// each is refused (alarm); its next ones, each round, move the clock
// towards network time by max-step: neither slave is wedged.
//
//   - n3 (max-step 1000 s) comes back by itself in about five rounds: a
//     recovery that status shows move by move, by max-step each.
//   - n4 (max-step 100 s, 50 rounds to come back) is stepped by the
//     operator, `timedc step --to-network`, after two moves.
//
// Two far-off slaves on opposite sides keep the median of the master's
// vote on the two clocks that agree.
func TestMaxStepAlarm(t *testing.T) {
	t.Parallel()
	metricsAddr := freeTCPAddr(t)
	c := newCluster(t, make([]time.Duration, 4), func(i int) []string {
		switch i {
		case 2:
			return []string{"--clock", "sim:offset=+5000s,drift=0ppm", "--max-step", "1000s"}
		case 3:
			return []string{"--clock", "sim:offset=-5000s,drift=0ppm", "--max-step", "100s", "--metrics-listen", metricsAddr}
		}
		return []string{"-M", "--clock", "sim:offset=0us,drift=0ppm"}
	})
	n3, n4 := c.nodes[2], c.nodes[3]
	master := c.awaitOneMaster()

	// offsetFrom is n's clock offset from the master's, with n's status.
	offsetFrom := func(n *node) (float64, *control.Status, error) {
		ms, err := c.status(master)
		if err != nil {
			return 0, nil, err
		}
		st, err := c.status(n)
		if err != nil {
			return 0, nil, err
		}
		return st.OffsetSecs - ms.OffsetSecs, st, nil
	}
	// stepsOf checks that off is start less whole max-steps, within the
	// measurements' noise (a second, generously).
	stepsOf := func(off, start, maxStep float64) bool {
		k := math.Round((start - off) / maxStep)
		return k >= 0 && math.Abs(start-k*maxStep-off) < 1
	}
	rounds := func(n int) time.Duration { return electionBound + time.Duration(n)*syncInterval + 10*time.Second }

	// n3 recovers by itself. (No subtests: the cluster's helpers fail
	// the test they were made for.)
	{
		var seen []float64
		alarmSeen := false
		c.await("n3 in alarm, then back within 1 s of the master", rounds(10), func() (bool, string) {
			off, st, err := offsetFrom(n3)
			if err != nil {
				return false, err.Error()
			}
			if len(seen) == 0 || seen[len(seen)-1] != math.Round(off) {
				seen = append(seen, math.Round(off)+0)
			}
			if st.Alarm != nil {
				alarmSeen = true
				if st.Alarm.MaxStepSecs != 1000 || math.Abs(st.Alarm.OffsetSecs-off) > 1 {
					t.Errorf("alarm %+v, clock %+.3f s from the master's", st.Alarm, off)
				}
			}
			return alarmSeen && st.Alarm == nil && math.Abs(off) < 1,
				fmt.Sprintf("alarm seen %v, now %+v, %+.3f s from the master", alarmSeen, st.Alarm, off)
		})
		t.Logf("n3's offsets from the master, as seen: %v", seen)
		// Down by max-steps, never up, and not in one go.
		intermediate := false
		for i, off := range seen {
			if !stepsOf(off, 5000, 1000) || (i > 0 && off > seen[i-1]) {
				t.Fatalf("n3's offsets from the master %v: not 5000 s less max-steps of 1000 s, in order", seen)
			}
			intermediate = intermediate || (off > 500 && off < 4500)
		}
		if !intermediate {
			t.Errorf("n3's offsets from the master %v: no move by max-step seen", seen)
		}
	}

	// n4 is stepped by the operator. It has been moving by 100 s a round
	// meanwhile, and needs 50 rounds to come back.
	{
		var seen []float64
		last := 0.0
		c.await("n4 in alarm, two max-step moves made", rounds(10), func() (bool, string) {
			off, st, err := offsetFrom(n4)
			if err != nil {
				return false, err.Error()
			}
			if !stepsOf(-off, 5000, 100) {
				seen = append(seen, off)
			}
			last = off
			return st.Alarm != nil && off > -4801, fmt.Sprintf("alarm %+v, %+.3f s from the master", st.Alarm, off)
		})
		if len(seen) > 0 {
			t.Fatalf("n4's offsets %v: not -5000 s plus max-steps of 100 s", seen)
		}
		out, err := timedc(t, "--control-socket", n4.socket(), "status")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out, "ALARM since ") || !strings.Contains(out, "timedc step --to-network") {
			t.Errorf("timedc status does not start with the alarm:\n%s", out)
		}
		if m := scrape(t, metricsAddr); !strings.Contains(m, "\ntimed_alarm 1\n") || strings.Contains(m, "\ntimed_corrections_refused_total 0\n") {
			t.Errorf("metrics during the alarm: want timed_alarm 1 and refusals counted:\n%s", grepLines(m, "timed_alarm", "timed_corrections_refused"))
		}

		out, err = timedc(t, "--control-socket", n4.socket(), "--json", "step", "--to-network")
		if err != nil {
			t.Fatal(err)
		}
		var res control.StepResult
		if err := oneAnswer(out, &res); err != nil {
			t.Fatalf("timedc step --json: %q: %v", out, err)
		}
		// By what the alarm said, which may be a few moves on from last.
		if s := res.Correction.Secs; res.AlarmWas == nil || res.Correction.Kind != "step" || s > -last+1 || s < -last-301 {
			t.Errorf("step: %+v, want one of about %+.0f s (less up to 3 moves) ending the alarm", res, -last)
		}
		t.Logf("n4 %+.3f s from the master, then timedc step --to-network: %s", last, out)
		stepped := time.Now()
		off, st, err := offsetFrom(n4)
		if err != nil {
			t.Fatal(err)
		}
		if st.Alarm != nil || math.Abs(off) > 1 {
			t.Fatalf("after timedc step --to-network: alarm %+v, %+.3f s from the master", st.Alarm, off)
		}
		// The master's next correction finds it on time: no alarm again.
		c.await("n4 corrected after the step, still on time", 10*syncInterval, func() (bool, string) {
			off, st, err := offsetFrom(n4)
			if err != nil {
				return false, err.Error()
			}
			if st.Alarm != nil || math.Abs(off) > 1 {
				t.Fatalf("after the step: alarm %+v, %+.3f s from the master", st.Alarm, off)
			}
			lc := st.LastCorrection
			return lc != nil && lc.At.After(stepped), fmt.Sprintf("last correction %+v", lc)
		})
		if m := scrape(t, metricsAddr); !strings.Contains(m, "\ntimed_alarm 0\n") {
			t.Errorf("metrics after the step: want timed_alarm 0:\n%s", grepLines(m, "timed_alarm"))
		}
	}

	// The master and the other on-time daemon were never pulled.
	for _, n := range c.nodes[:2] {
		if st, err := c.status(n); err != nil || math.Abs(st.OffsetSecs) > 0.1 || st.Alarm != nil {
			t.Errorf("%s: %v, %+v", n.name, err, st)
		}
	}
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// grepLines keeps the lines of s that contain one of words.
func grepLines(s string, words ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

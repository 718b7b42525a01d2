package tests

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/timed-project/timed/bench/netbench"
)

// TestAdaptiveRounds: with sync-interval 8s and sync-interval-min 1s the
// master's first rounds come a second apart, doubling as the corrections
// stay small: at least 5 rounds in the 16 s after its first, where fixed
// 8 s rounds make at most 3; its status shows the interval they run at.
func TestAdaptiveRounds(t *testing.T) {
	t.Parallel()
	addrs := make([]string, 3)
	for i := range addrs {
		addrs[i] = freeTCPAddr(t)
	}
	c := newCluster(t, fiveOffsets[:3], func(i int) []string {
		return []string{"-M", "--metrics-listen", addrs[i], "--sync-interval", "8s", "--sync-interval-min", "1s",
			"--election-timeout-min", "12s", "--election-timeout-max", "20s"}
	})
	master := c.awaitOneMaster()
	addr := addrs[slices.Index(c.nodes, master)]
	rounds := func() (float64, string) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err.Error()
		}
		n, _ := netbench.CounterSum(b, "timed_sync_rounds_total")
		return n, fmt.Sprintf("%g rounds", n)
	}
	var first float64
	c.await("the master's first round", 10*time.Second, func() (bool, string) {
		n, why := rounds()
		first = n
		return n >= 1, why
	})
	c.await("5 rounds more, adaptive (fixed 8 s rounds: at most 3 in 16 s)", 16*time.Second, func() (bool, string) {
		n, why := rounds()
		return n >= first+5, why
	})
	st, err := c.status(master)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Networks) != 1 || st.Networks[0].RoundIntervalSecs < 1 || st.Networks[0].RoundIntervalSecs > 8 {
		t.Fatalf("master's networks %+v: want one, its rounds every 1 s to 8 s", st.Networks)
	}
}

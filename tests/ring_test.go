package tests

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/election/ring"
	"github.com/timed-project/timed/election/ring/live"
	"github.com/timed-project/timed/tests/internal/ringcheck"
)

// TestRingElectEveryAlgorithm runs every algorithm that can run over the
// network among five live daemons with `timedc ring elect`: one leader
// that every node agrees on (the coordinator checks, as the simulator
// does), the extremum the algorithm elects, and messages within the
// paper's bound. The clocks start together (offset 0), so the
// synchronous algorithms' rounds line up from the first election.
func TestRingElectEveryAlgorithm(t *testing.T) {
	t.Parallel()
	c := newCluster(t, make([]time.Duration, 5), func(int) []string { return []string{"-M"} })
	coordinator := "127.0.0.1:" + strconv.Itoa(c.nodes[0].port)
	c.await("control sockets up", 10*time.Second, func() (bool, string) {
		_, err := c.statuses()
		return err == nil, "waiting"
	})
	ran := 0
	for _, alg := range ring.All() {
		if alg.HalfDuplex {
			out, err := timedc(t, "ring", "elect", coordinator, "--algorithm", alg.Name, "--timeout", "10s")
			if err == nil || !strings.Contains(err.Error(), "half-duplex") {
				t.Errorf("%s: %q %v, want a refusal naming half-duplex links", alg.Name, out, err)
			}
			continue
		}
		ran++
		out, err := timedc(t, "--json", "ring", "elect", coordinator, "--algorithm", alg.Name, "--timeout", "30s")
		if err != nil {
			t.Errorf("%s: %v", alg.Name, err)
			continue
		}
		var res live.Result
		if err := oneAnswer(out, &res); err != nil {
			t.Fatalf("%s: %v in %q", alg.Name, err, out)
		}
		if err := ringcheck.Result(alg, res, 5); err != nil {
			t.Error(err)
			continue
		}
		t.Logf("%-20s leader %s (id %d), %3d messages (bound %4.0f), %5d bits, %.3f s",
			alg.Name, res.Leader, res.LeaderID, res.Messages, res.Bound, res.Bits, res.Seconds)
	}
	if ran < 10 {
		t.Fatalf("only %d algorithms ran live", ran)
	}
	if _, err := timedc(t, "ring", "elect", coordinator, "--algorithm", "nosuch"); err == nil || !strings.Contains(err.Error(), "unknown algorithm") {
		t.Errorf("unknown algorithm: %v", err)
	}
}

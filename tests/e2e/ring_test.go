//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/timed-project/timed/deploy/compose"
	"github.com/timed-project/timed/election/ring"
	"github.com/timed-project/timed/election/ring/live"
	"github.com/timed-project/timed/tests/internal/ringcheck"
)

// TestRingElectionsEightHosts runs every ring algorithm that can run over
// the network among eight daemons on the bridge (broadcast mode: the
// roll call is a broadcast, the ring order the sorted addresses), started
// with `timedc ring elect` inside one container. Each must end with one
// leader every node agrees on (the coordinator checks), the extremum the
// algorithm elects, and messages within the paper's bound. The clocks are
// left to converge first: the synchronous algorithms' rounds are aligned
// on the network time the daemons keep.
func TestRingElectionsEightHosts(t *testing.T) {
	c := newCluster(t, compose.Default(8))
	c.start()
	c.awaitOneMaster(coldStartBound + slack)
	c.awaitConverged(convergeBound, convergeTime)
	var rows []string
	for _, alg := range ring.All() {
		if alg.HalfDuplex {
			continue // needs half-duplex links; refused live (see the loopback test)
		}
		out, err := c.timedc("host1", "--json", "ring", "elect", "--algorithm", alg.Name, "--timeout", "60s")
		if err != nil {
			t.Errorf("%s: %v", alg.Name, err)
			continue
		}
		// timedc's JSON is an array of answers, one here.
		var answers []live.Result
		if err := json.Unmarshal([]byte(out), &answers); err != nil || len(answers) != 1 {
			t.Errorf("%s: want one answer: %v in %q", alg.Name, err, out)
			continue
		}
		res := answers[0]
		if err := ringcheck.Result(alg, res, 8); err != nil {
			t.Error(err)
			continue
		}
		rows = append(rows, fmt.Sprintf("%s %d/%.0f msgs %d bits %.3fs", alg.Name, res.Messages, res.Bound, res.Bits, res.Seconds))
	}
	report(t, "ring elections among 8 hosts (messages/bound, bits, time)", "%s", strings.Join(rows, "; "))
}

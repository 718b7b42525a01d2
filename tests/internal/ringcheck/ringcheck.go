// Package ringcheck checks a live ring election's result the way the
// simulator checks a run, for the loopback and end-to-end tests alike.
package ringcheck

import (
	"fmt"

	"github.com/timed-project/timed/election/ring"
	"github.com/timed-project/timed/election/ring/live"
)

// Result reports what is wrong with res for algorithm alg among n
// daemons: an error, a missing leader, messages above the paper's bound,
// or a leader that is not the extremum the algorithm elects. (Agreement
// on the leader is checked by the coordinating daemon, which reports a
// disagreement as res.Error.)
func Result(alg ring.Algorithm, res live.Result, n int) error {
	if res.Error != "" {
		return fmt.Errorf("%s: %s", alg.Name, res.Error)
	}
	if res.N != n || res.Leader == "" || len(res.Members) != n {
		return fmt.Errorf("%s: %d members, leader %q; want one leader among %d", alg.Name, res.N, res.Leader, n)
	}
	if float64(res.Messages) > res.Bound {
		return fmt.Errorf("%s: %d messages, above the bound %.0f (%s)", alg.Name, res.Messages, res.Bound, res.BoundText)
	}
	lo, hi := res.Members[0].ID, res.Members[0].ID
	for _, m := range res.Members {
		lo, hi = min(lo, m.ID), max(hi, m.ID)
	}
	if (alg.Elects == ring.Max && res.LeaderID != hi) || (alg.Elects == ring.Min && res.LeaderID != lo) {
		return fmt.Errorf("%s elected id %d; ids run from %d to %d", alg.Name, res.LeaderID, lo, hi)
	}
	return nil
}

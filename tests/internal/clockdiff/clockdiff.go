// Package clockdiff is `timedc --json clockdiff`'s answer for one host, as
// the e2e suites read it (tests/e2e, tests/vm; docs/operating.md, "timedc's JSON").
package clockdiff

// Answer is one host's: its clock's offset from the asking host's
// (positive: the host is ahead), the measurement's error bound and round
// trip, the method (probe or icmp), or the error.
type Answer struct {
	Host   string  `json:"host"`
	Offset float64 `json:"offset_seconds"`
	Bound  float64 `json:"error_bound_seconds"`
	RTT    float64 `json:"rtt_seconds"`
	Method string  `json:"method"`
	Error  string  `json:"error"`
}

// Package timed is the daemon: it wires the TSP transport, the election
// state machine, clock synchronisation and the timers together, and serves
// the control socket and metrics.
//
// One goroutine owns all of the daemon's state (Run's loop). Packets,
// timer firings, the results of sync rounds, control requests and reloads
// reach it over channels; the only other goroutines are the transport's
// reader, the sync rounds' measurements (which report back over a
// channel), the control socket's connections (which ask the loop and wait
// for its answer) and the metrics server (which reads counters that are
// safe for concurrent use). So the election machine, which is not safe for
// concurrent use, is only ever touched by the loop.
//
// Files: daemon.go builds and runs it; loop.go carries out the election
// machine's actions and dispatches packets; syncround.go is the master's
// measure-average-correct round; date.go the date path; ext.go our
// version-2 extensions (clock probes, ring elections); ring.go hosts
// election/ring/live's runner of live ring elections (timedc ring elect);
// status.go, control.go, metrics.go and notify.go are what the daemon
// tells timedc, Prometheus and systemd; reload.go is SIGHUP.
package timed

// Package timed is the daemon: it wires the TSP transport (tsp/udp), the
// election state machine, clock synchronisation and the timers together,
// and serves the control socket and metrics.
//
// # One runtime per network
//
// As BSD keeps one state per network (master on some, slave on at most
// one), the daemon keeps a netRuntime per network: its election machine,
// the machine's timers, its sync rounds, its date requests and its part
// of the status; it sends its machine's packets, broadcasting on its
// network. What belongs to the host stays on the Daemon: the transport,
// the clock and the corrections applied to it, the clock probe and ICMP,
// the control socket, metrics, the ring runner, tracing, the check of
// admin packets' sources and the -F list (handed to every runtime's
// machine). A packet goes to the runtime of
// the network it came from (udp.Received.Network; those from no served
// network go to the first); timer firings and sync results carry their
// runtime.
//
// Only the first network is served until multi-network support lands:
// the others are logged as ignored and their packets go to the first
// runtime, as they did to the one machine before; `timedc status`, the
// systemd status and ring elections show the first network.
//
// # One goroutine
//
// One goroutine owns all of the daemon's state (Run's loop). Packets,
// timer firings, the results of sync rounds, control requests and reloads
// reach it over channels; the only other goroutines are the transport's
// reader, the sync rounds' measurements (which report back over a
// channel), the control socket's connections (which ask the loop and wait
// for its answer) and the metrics server (which reads counters that are
// safe for concurrent use). So the election machines, which are not safe
// for concurrent use, are only ever touched by the loop.
//
// # Files
//
// daemon.go builds and runs it; runtime.go is a network's runtime and
// picks the one a packet belongs to; loop.go carries out a runtime's
// machine actions and timers and dispatches packets; syncround.go is a
// master's measure-average-correct round; correct.go applies corrections
// to the host clock; alarm.go shows the max-step alarm and steps the
// clock at the operator's request (timedc step); date.go the date path;
// ext.go our version-2 extensions (clock probes, ring elections); ring.go
// hosts election/ring/live's runner of live ring elections (timedc ring
// elect);
// status.go, control.go, metrics.go and notify.go are what the daemon
// tells timedc, Prometheus and systemd; admin.go decides who may send
// admin packets; reload.go is SIGHUP; trust.go resolves the -F list;
// logging.go builds the logger.
package timed

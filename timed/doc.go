// Package timed is the daemon: it wires the TSP transport (tsp/udp), the
// election state machine, clock synchronisation and the timers together,
// and serves the control socket and metrics.
//
// # Every network: one Host, a runtime per network
//
// The daemon serves every network the transport serves (the interface
// template and -n/-i choose them; peers mode is one network) with one
// election.Host: a Machine per network and BSD's rules across them
// (election/doc.go, "Several networks"). A host is slave on at most one
// network, its slavenet, whose master's corrections alone reach the
// clock; master (a submaster) of the networks where no master answers,
// passing its master's LOOPs on; and it ignores (BSD IGNORE) a network
// that another master of the same tree serves. With one network the Host
// is its Machine.
//
// The daemon drives the Host as its documentation says:
//
//   - Every event names its network: a packet's is the network it came
//     from (udp.Received.Network), a timer's the one it was set on (timers
//     are per network and TimerID, TimerLook included), a round's the one
//     that asked for it. Each action is carried out by the runtime of the
//     network it is tagged with (netRuntime: its timers, sync rounds, date
//     state and part of the status), broadcasting on that network.
//   - The Host's now is the kernel's monotonic time, so that a stepped
//     clock does not move its windows; SETTIME's stamp, the one place
//     that time goes on the wire, is moved to the disciplined clock when
//     sent.
//   - Config.Addr is the daemon's address on each network, so that the
//     Host drops its own LOOPs, those it forwarded included (none in peers
//     mode, where daemons share 127.0.0.1).
//   - A SyncRound with Dictate (a submaster's rounds, or those of a
//     network other than the first the host masters) corrects the slaves
//     towards the host's clock, takes no vote and answers Own = 0; so do
//     the rounds after a date change. A voting round's Own is applied only
//     if the network still votes when the round ends.
//   - AskSource and TellSource (a gateway asking a master which time
//     source it serves, and the answer) go out as our version-2
//     tsp.ExtSourceReq and tsp.ExtSource, unicast; those received come
//     back to the Host as SourceQuery and SourceAnswer on the network
//     they came from (ext.go).
//   - TellReference, TellSpan and TellResign (a reference's claim; a
//     --family both daemon's word that it serves both families of the
//     link; a master giving its network up) are broadcast as
//     tsp.ExtReference, tsp.ExtSpan and tsp.ExtResign; those received go
//     to the Host as ReferenceHeard, SpanHeard and ResignHeard.
//   - Ignored and CycleDetected are logged (a few lines a minute per
//     network or source) and, with LOOPs from a second master on a network
//     the host masters, counted: loops_detected in the status,
//     timed_loops_detected_total.
//
// What belongs to the host stays on the Daemon: the transport, the clock
// and the corrections applied to it, the clock probe and ICMP, the control
// socket, metrics, the ring runner (ring elections run on the first
// network), tracing, the check of admin packets' sources, the -F list
// (handed to every machine) and the date requests forwarded to the
// master. A packet from no served network is one of the types BSD takes
// from anywhere (TRACEON, TRACEOFF, TEST, MSITE, SETDATE: local tools);
// the host answers it itself: TEST goes to every network, MSITE names the
// master the host's clock follows. MSITE from a network names the master
// there; the date path is the host's (date.go): with a slavenet it asks
// that master (a submaster passes its slaves' SETDATEREQ up), else where
// it masters it changes the time for every network it masters.
//
// `timedc status` shows each network's state ("ignore" for one the Host
// put out of use), master, slaves and whether it is the slavenet; the
// top-level state and master are the slavenet's, else the first mastered
// network's, else the first network's (Daemon.primary). Metrics of a
// network carry a network label (its prefix, or "peers").
//
// --bsd-compat (Options.BSDCompat, hidden, for tests) makes the daemon
// BSD's on the wire: version 2 is dropped unread and never sent, so it
// measures by ICMP and is measured so, and neither asks masters for their
// time sources nor answers (LOOPs tell them, a round later).
//
// # One goroutine
//
// One goroutine owns all of the daemon's state (Run's loop). Packets,
// timer firings, the results of sync rounds, control requests and reloads
// reach it over channels; the only other goroutines are the transport's
// reader, the sync rounds' measurements (which report back over a
// channel), the control socket's connections (which ask the loop and wait
// for its answer) and the metrics server (which reads counters that are
// safe for concurrent use). So the Host and its machines, which are not
// safe for concurrent use, are only ever touched by the loop.
//
// # Files
//
// daemon.go builds and runs it; runtime.go is a network's runtime and
// picks the one a packet belongs to; loop.go feeds the Host, carries out
// its actions and timers on each network and dispatches packets;
// syncround.go is a master's measure-average-correct round; correct.go
// applies corrections to the host clock; alarm.go shows the max-step
// alarm and steps the clock at the operator's request (timedc step);
// date.go the date path; ext.go our version-2 extensions (clock probes,
// ring elections, questions for time sources, references' claims); measure.go measures a slave by probe or ICMP and
// remembers which it answers; ring.go hosts election/ring/live's runner
// of live ring elections (timedc ring elect); status.go, control.go,
// metrics.go and notify.go are what the daemon tells timedc, Prometheus
// and systemd; sync.go judges whether the host is synchronised,
// estimates its offset from network time and lists its sources;
// kernelsync.go tells the kernel that judgement (STA_UNSYNC, maxerror)
// with the system clock; reference.go is --reference kernel (a host
// whose clock chrony or ntpd keeps: never changed, its claim judged
// from the kernel's state and told to the election); drift.go
// keeps the frequency estimate across restarts (--drift-file); admin.go
// decides who may send admin packets; reload.go is SIGHUP; trust.go
// resolves the -F list; logging.go builds the logger.
package timed

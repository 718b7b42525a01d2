// Package live runs the election/ring algorithms live among timed daemons
// (`timedc ring elect`). Their messages travel in tsp.ExtRing packets and
// the coordination in tsp.ExtRingCtl packets (JSON, Ctl), so BSD daemons
// ignore all of it.
//
// # Driving it
//
// A daemon holds one Runner and is its Host: it sends and broadcasts the
// runner's packets, reads its network clock for it (the clock the daemons
// keep synchronised), and calls back, on its own loop, the functions the
// runner asks it to call at a time of that clock (Host.At). The runner
// starts no goroutine and no timer and never reads the system clock, so it
// runs the same on a daemon's loop and on a virtual clock in the tests.
// Into it go:
//
//   - Receive(from, packet) for every RING and RINGCTL packet, timedc's
//     ELECT included: the runner answers it with a RESULT packet echoing
//     its seq;
//   - Elect(algorithm, unit, reply), the same request from inside the host;
//   - the callbacks it scheduled.
//
// # The protocol
//
// The coordinator is the daemon timedc asks. It calls the roll (HELLO,
// broadcast, answered by HERE), orders the members (the configured peer
// list's order, else by address), gives them the ids 1…n in a random
// order, and sends START with a start time T0 on the network clock: every
// node starts at T0 and its ticks (two units) are aligned to it, which is
// what the synchronous algorithms need. Each ring message carries its
// sender, its out-port, a per-link counter (the receiver restores the
// link's order if UDP reorders) and its send time since T0: it is read at
// send + unit, as the simulator reads it, so clocks a little apart and
// links faster than a unit do not change the run. Nodes REPORT their
// decisions; once the leader is known the coordinator waits for the ring
// to fall quiet, COLLECTs every node's counts and answers with a Result,
// checked as the simulator checks a run (one leader, every node naming it
// where the algorithm announces). An election not finished within a minute
// fails.
//
// # Hostile packets
//
// Packets come from anyone. Malformed ones, STARTs that could not have
// come from a coordinator, ring messages for another election or from no
// member, and what would outgrow the bounded tables (roll call, messages
// held per link, a node's queue) are dropped, logged at debug level and
// counted (Runner.Drops).
//
// The package imports no socket package (net/netip only), nor the daemon;
// timedc imports it for the wire types and ElectPacket/ResultOf.
package live

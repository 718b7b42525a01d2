// Package election is the TEMPO election of 4.3BSD timed (Gusella and
// Zatti, "An Election Algorithm for a Distributed Clock Synchronization
// Program", 1985) as a pure state machine: one Machine per daemon per
// network.
//
// The machine owns the protocol and nothing else. It never touches a
// socket or a clock, starts no goroutine, and takes its randomness from
// the *rand.Rand given to New, so that a run replays from a seed. It is
// modelled on etcd-io/raft: events in, actions out.
//
// # Driving it
//
// A runtime (the daemon, or the simulator in election/simnet) loops:
//
//	rd := m.Step(now, ev) // ev: Start, Stop, Recv, TimerFired, ForceElection, SyncResult
//	for _, a := range rd.Actions { carry out a, in order }
//
// where now is the time of the event (the host clock is fine: the machine
// stamps SETTIME with it; its timers are durations the runtime runs, so a
// stepped clock does not move them). The actions:
//
//   - Send: transmit the packet once (broadcast on this network, or to
//     To). The machine does its own retransmission; the runtime never
//     repeats a packet.
//   - SetTimer / CancelTimer: one timer per TimerID, re-setting replaces.
//     When it runs out, Step(TimerFired{ID}). Never report the expiry of a
//     replaced setting (keep a generation per ID); a cancelled timer's
//     expiry that raced with the cancel is ignored.
//   - StateChange: log it.
//   - SlaveList: the master's slaves changed (for MSITE, status, timedc).
//   - SyncRound: ask the clock layer to measure these slaves; when done,
//     Step(SyncResult{Round, Own, Corrections}). The machine sends each
//     slave its ADJTIME (or SETTIME), reliably, and drops a slave after
//     LostHost failed rounds. A slave missing from Corrections could not
//     be measured and counts as a failed round. Every round must be
//     answered (ZeroResult when there is no clock layer): the ADJTIMEs
//     are what keep the slaves' election timers from running out.
//   - AdjustClock / SetClock: a slave's master sent ADJTIME / SETTIME (new
//     sequence number): slew by Delta, or set to Time.
//
// Packets of the election types go to Step as Recv with their source
// address (TEST too: it is ForceElection). The runtime answers TRACEON,
// TRACEOFF, MSITE (Machine.Master gives the answer), SETDATE, SETDATEREQ
// and DATEACK itself; the machine ignores them.
//
// # Several networks
//
// BSD serves every network of a multi-homed host from one process, as
// master on some ("submaster") and slave on at most one. Here each network
// gets its own Machine, with Config.Network naming it: the daemon keeps
// one runtime per network (package timed), each driving its own Machine.
// For now it serves only the first network. Once it serves several, the
// host layer is to keep the rule "slave on at most one network": when one
// machine becomes Slave it stops the machines of the other networks where
// the host would be a slave (Stop) and restarts them later, and it
// forwards the slave network's corrections to the networks it masters, as
// BSD's submaster does. LOOP carries a hop count for that forwarding;
// with one network served, a master drops LOOPs with its own name and
// treats any other as a second master.
//
// # Departures from the paper and from FreeBSD, and why
//
// Fixed BSD quirks (facts §7):
//   - CONFLICT is acknowledged. FreeBSD's slave waits for an ACK no code
//     sends, so every CONFLICT was retransmitted five times and logged as
//     an error.
//   - A master's LOOP case does not fall through into TEST: FreeBSD, on
//     a foreign LOOP, also forced an immediate sync round.
//   - Every packet the machine originates takes the next sequence number
//     (global u16 starting from the random source, as BSD). FreeBSD left
//     ELECTION's unset and sent MASTERUP and SLAVEUP with 0; we set them
//     so that duplicates can be recognised.
//
// Departures from the paper:
//   - The election timer is drawn afresh at every reset. The paper draws
//     once and reuses the value; two slaves with close values would then
//     collide at every election, whereas fresh draws make each election
//     an independent trial, as the appendix's analysis assumes.
//   - Backoff: the paper's "exponential backoff" is 4.3BSD's: after a
//     withdrawn candidacy (REFUSE or QUIT) the width R of the election
//     range doubles, up to BackoffCap·R; it returns to R when a master is
//     seen (MASTERUP, ADJTIME, SETTIME). FreeBSD dropped the backoff.
//   - The candidate wait restarts at each new ACCEPT (the paper restarts
//     it after every ACCEPT; FreeBSD has one fixed 3 s deadline). Counting
//     only new senders keeps retransmitted ACCEPTs from extending the
//     state, so its length is bounded (Config.StateTimeout).
//   - Start-up also ends on MASTERUP (follow that master at once) and, if
//     it saw MASTERREQ or ELECTION from another daemon while probing,
//     goes to Slave instead of No Master (FreeBSD): daemons started
//     together then elect one master instead of each becoming one.
//   - Two masters: besides the paper's CONFLICT path, a master treats a
//     LOOP, MASTERUP, ADJTIME or SETTIME from another trusted master as a
//     second master (the healed-partition rule, after BSD's LOOP).
//     Of the two, the lower name QUITs the higher, which answers a LOOP or
//     MASTERUP with a LOOP of its own so that the lower one learns of it
//     at once. BSD QUITs every foreign LOOP's sender, so two masters
//     whose LOOPs cross both step down and nobody is master until an
//     election. If two masters still QUIT each other, the lower name
//     ignores the QUIT it gets while its own is outstanding.
//   - After a rival master ACKs its QUIT on that path, the survivor
//     broadcasts MASTERUP to collect the rival's slaves, as the paper does
//     after CONFLICT; BSD left them to time out and start elections.
//   - A master or candidate that obeys QUIT follows the sender at once
//     (and a former master sends it SLAVEUP); BSD became a slave without
//     a master and waited for the next ADJTIME or MASTERUP.
//   - Trust binds to source addresses, never to the name in a packet:
//     the -F list is resolved to addresses (Config.Trusted). BSD compared
//     names, so a forged name from any address passed.
//   - ADJTIME and SETTIME are taken only from the address of the master
//     followed (or of the candidate accepted, whose MASTERUP may be lost),
//     and acknowledged only then; elsewhere they are Refused. A daemon in
//     Start-up takes none: its probe finds the master. BSD took them from
//     any packet carrying a trusted name, so one forged ADJTIME moved a
//     slave's clock.
//   - A candidate or master obeys QUIT only from an address that acted as
//     a master (MASTERUP, LOOP, RESOLVE, a MASTERACK to our own question,
//     the master followed) or, with a -F list, from a trusted address
//     (slaves suppress an untrusted candidate that way). Any other QUIT is
//     Refused, unacknowledged, and answered once with a unicast MASTERREQ:
//     a real master answers MASTERACK and its next copy is obeyed. BSD's
//     candidate obeyed any QUIT, so a QUIT storm kept a network without a
//     master.
//   - A slave that follows a master does not pull its election in when an
//     untrusted daemon acts as master or candidate (BSD's FASTTOUT): its
//     master suppresses the impostor, and one forged MASTERUP would
//     otherwise start an election among all eligible slaves.
//   - The slave table is bounded (MaxSlaves, BSD's NHOSTS 1013) and an
//     entry keeps the address it was listed with: a SLAVEUP carrying a
//     listed slave's name from another address is Refused (BSD replaced
//     the address, so a forger could divert a slave's corrections).
//   - A candidate that receives ADJTIME or SETTIME from the master it
//     followed before gives up and follows it again (BSD ignored them in
//     the candidate loop).
//   - Conflict ends after ResolveRounds RESOLVE rounds (BSD: 3), each
//     ended by its first MASTERACK or by the retransmit schedule running
//     out, then MASTERUP; a MASTERACK to any RESOLVE of this conflict gets
//     a QUIT. The paper only says "after the conflict timeout".
//
// Departures from FreeBSD:
//   - The 4.3BSD exponential backoff is back (above).
//   - The paper's No Master state and timer (NoMasterWait) are kept;
//     FreeBSD became master at once when nobody answered.
//   - A slave does not restart its election timer on MASTERREQ (FreeBSD
//     does). A host that may not be master and has no master polls with
//     MASTERREQ every election period; with FreeBSD's rule each poll
//     would postpone the election that could give it a master.
//   - QUIT is sent reliably on the full schedule (FreeBSD: one copy). A
//     lost QUIT left a second master or an untrusted one in place for a
//     whole round.
//   - Masters do not postpone their own sync round by 240 s on RESOLVE,
//     they only answer it with MASTERACK: the QUIT that follows is what
//     matters.
//   - An untrusted QUIT is never obeyed; its sender is suppressed (told
//     to QUIT) and the master stays. FreeBSD "sulked" (quit_count): the
//     second untrusted QUIT made it give up the network.
//   - An untrusted MASTERACK during start-up is suppressed and probing
//     goes on (FreeBSD went to NOMASTER at once).
//   - A new slave that found its master through MASTERREQ sends SLAVEUP to
//     the master, unicast (FreeBSD broadcast SLAVEUP when slave() began).
//   - ELECTION, ACCEPT, REFUSE, QUIT and CONFLICT are acted upon once per
//     (type, sender, sequence number) within twice the retransmit span: a
//     duplicated or retransmitted copy is acknowledged again but changes
//     nothing.
//   - The answer delay before ACCEPT and SLAVEUP (delay1) is drawn for
//     each answer, not once per daemon.
//   - The automatic answers of readmsg (ACK, MASTERACK) are sent by the
//     state handlers of the election types, MSITEREQ's included; TRACEON,
//     TRACEOFF, MSITE and SETDATE are the runtime's. Replies is the whole
//     table, BSD's answer beside ours.
package election

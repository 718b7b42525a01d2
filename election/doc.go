// Package election is the TEMPO election of 4.3BSD timed (Gusella and
// Zatti, "An Election Algorithm for a Distributed Clock Synchronization
// Program", 1985) as a pure state machine: one Machine per daemon per
// network, and a Host that holds the machines of a daemon on several
// networks and applies BSD's rules across them.
//
// The machine owns the protocol and nothing else. It never touches a
// socket or a clock, starts no goroutine, and takes its randomness from
// the *rand.Rand given to New, so that a run replays from a seed. It is
// modelled on etcd-io/raft: events in, actions out. The Host is pure in
// the same way.
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
//     SyncResult.Next, when set, starts the next round that long after
//     this one began (adaptive rounds; at most SyncInterval); a slave's
//     correction of an earlier round still unanswered is then cancelled,
//     lest a retransmission land after the newer one.
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
// BSD serves every network of a multi-homed host from one process: slave
// on at most one (its slavenet), master on others (a "submaster", through
// which time flows from one network to the next), out of use (IGNORE) on
// the rest. Here a Host holds one Machine per network (NewHost, one Config
// each, all with the host's Name) and applies those rules on top of them.
// With one network a Host is its Machine (TestHostOneNetworkIsMachine),
// unless a gateway passes LOOPs on to that network: then it weighs time
// sources too, as the rules below say.
//
// A runtime drives a Host as it drives a Machine, naming the network of
// every event (the index of its Config):
//
//	for _, a := range h.Step(now, net, ev) { carry out a.Action on network a.Net }
//
// Host.Start and Host.Stop start and stop every network. Timers are per
// network: the same TimerID on two networks is two timers, and the host
// has one of its own, TimerLook, on the networks it ignores; run them like
// the machine's. Packets from the host's own address are its own
// broadcasts and must be dropped, or Config.Addr set so that the host
// drops them (a LOOP it forwarded carries another host's name). Host.Machine
// gives a network's machine for queries (Trusted, IsSlaveAt) and
// SetTrusted; never Step it directly. Besides the machine's actions a Host
// emits Ignored (a network put out of use, or back into use) and
// CycleDetected, to log; and it sets SyncRound.Dictate:
//
//   - Dictate false: the round votes. The clock layer computes the network
//     time from the slaves and this host, corrects the slaves towards it
//     and applies Own to the host's clock, as with one network.
//   - Dictate true: the host's clock is the truth. The clock layer measures
//     the slaves, corrects each towards the host's clock, takes no vote
//     and answers Own = 0 (BSD's dictate). A network dictates where the
//     host is master and either follows a master on its slavenet (its
//     clock takes that master's corrections: it is a submaster) or masters
//     a network of lower index, whose rounds vote: the host's clock gets
//     one correction a round, from one place.
//
// The rules, for a host with several networks:
//
//   - Slave on at most one network. The first network on which the host
//     follows a master is its slavenet; only the slavenet's corrections
//     (AdjustClock, SetClock) reach the runtime. When another network's
//     machine would follow a master too, that network is put out of use
//     (its machine stopped, answering nothing), or the host takes it over,
//     or it becomes the slavenet, by the time sources below.
//   - Submaster. A host that may be master runs its other networks'
//     machines as usual: where no master answers, the machine's own
//     start-up or election makes it master (it dictates there).
//   - LOOP. A master broadcasts a LOOP (hop count LoopHops) every round. A
//     host passes each LOOP it gets on its slavenet from the master it
//     follows on to every network it masters, hop count − 1 (none that
//     would reach 0), under its originator's name and sequence number; and
//     when it comes to master a network, or follows a new master, it passes
//     on at once those it heard from that master in the last round and a
//     half.
//   - Time sources. A master's LOOPs, its own and those it passes on, name
//     the masters above it; the farthest (lowest hop count) is the top of
//     its tree, its time source (Host.Source; its own name for a master
//     that follows nobody). Where two trees meet, the lower time source
//     (by name) wins. On one network, of two masters the one whose source
//     is outranked follows the other at once, and the winner refuses the
//     loser's QUIT (Refused, RefusedOutranked); the names decide as before
//     when both are their own source or both serve the same one. In a
//     host, a network that would follow a master serving the host's own
//     source is ignored (one tree, one way in: BSD IGNORE); one serving a
//     higher source is taken over (the host becomes master there, passes
//     its LOOPs on, and QUITs the master); one serving a lower source
//     becomes the slavenet, and the former slavenet is taken over. The
//     sources are known once each master has been heard for a whole round
//     (every LOOP it passes on comes by once a round); until then such a
//     decision waits, the network ignored, and is taken as soon as they
//     are. A host that may not be master keeps its first slavenet.
//   - Asking for time sources. Rather than wait that round, a host whose
//     decision waits asks the masters whose sources it does not know
//     (the network's, and its slavenet's): AskSource, our version-2
//     tsp.ExtSourceReq, unicast. A master answers with the source it
//     serves and how many gateways away (TellSource, tsp.ExtSource): its
//     own name, or, as a submaster that knows it, its master's source one
//     hop further; nothing where it is not master or does not know. An
//     answer counts only from the address asked, with the sequence number
//     asked, within a round of asking (SourceAnswer), and stands for the
//     master's LOOPs until they have told the source themselves, for a
//     round and a half at most; the decision is taken at the answers, a
//     round trip after the question. Taking a network over on an answer,
//     before any LOOP of the slavenet's master has come, the host passes
//     on the LOOP of the source it was told of (sequence number 0), as it
//     would have forwarded it. At most four questions are outstanding per
//     network. BSD's daemons drop version 2 and never answer, and ours
//     with --bsd-compat neither ask nor answer: the LOOPs decide then.
//   - Cycles. A LOOP carrying the host's own name, received on its
//     slavenet from the master it follows, went round a cycle of gateways:
//     time goes round with no source. The host stops following that master
//     (the slavenet is ignored; CycleDetected) and so becomes the cycle's
//     time source. A master whose source is the host's own name is never
//     followed.
//   - Ignored networks are watched, not probed: the host keeps hearing
//     their LOOPs. It looks at each again every election period (a fresh
//     draw from [ElectionMin, ElectionMax], BSD's looktime) and takes it
//     back into use (its machine starts afresh, and the rules above
//     decide) when no master has been heard for two and a half rounds,
//     when the host has no time source elsewhere, or when the network's
//     master (the sender of its latest LOOP, heard for a round, or whose
//     answer told it) serves a source other than the host's and its own
//     name. A master not yet known is asked, and the network decided at
//     its answer.
//
// Why it converges, once faults stop (TestRandomMultiNet checks it on
// random sites, and that every clock then equals its time source's):
//
//  1. Each network settles to one master among the machines running on
//     it, by the single-network argument (Config.ConvergenceBound).
//  2. One time source per site. Let R be the lowest-named source of a
//     site (networks joined by hosts that may be master on both). Nobody
//     outranks R, so R never yields, and a network never leaves R's tree
//     (leaving needs a lower source). A network next to R's tree through
//     such a gateway G joins it: if G is in R's tree it takes the network
//     over at its next look (or at once, if its machine there follows the
//     other master); if G is in the other tree, it meets R's tree on a
//     shared network and yields there. By induction on the distance from
//     R, every network of the site joins R's tree, each within a look
//     period and a few rounds.
//  3. No cycle. With current LOOPs a host never follows a master whose
//     LOOPs carry its own name, so no following closes a cycle: cycles
//     come only from lost or outdated LOOPs (the random sites show them
//     after partitions). A cycle of fewer than LoopHops gateways is found
//     within a round, since every master in it sends its own LOOP each
//     round and the others pass it round; its finder becomes a source and
//     point 2 applies. Its former master, downstream of it, serves the
//     finder's own name, so the finder leaves that network ignored for good.
//  4. No flapping. Once the LOOPs heard are those of the settled trees
//     (a round and a half), every decision is a function of two names that
//     no longer change: a look that finds the same source keeps the
//     network ignored without a packet, a master that outranks its rival
//     keeps outranking it.
//
// Limits: a tree deeper than LoopHops − 1 gateways hides its source from
// the hosts below that (the farthest origin heard stands for it), and a
// longer cycle is not found (BSD's limit too). The merging of trees needs
// the masters of a shared network to be Hosts (a daemon on one network
// runs a Host too): a BSD daemon, or a lone Machine, goes by the names, so
// a gateway whose source outranks it but whose own name does not may fail
// to take its network over, which is then ignored, as BSD does.
//
// Departures from BSD, and why:
//
//   - Trees merge. BSD ignores a network whose master is not its own
//     master's for good, leaving a site with several time sources; a
//     gateway restored after a failure never brings its networks back
//     together. Ours compares the time sources and the lower one takes
//     over.
//   - A gateway asks masters for their time sources (version 2, which BSD
//     drops unread) rather than waiting a round of their LOOPs: a gateway
//     restored after a failure brings its networks together within its
//     start-up poll and a round trip, where the LOOPs alone take two
//     rounds.
//   - A cycle is broken by the finder alone: it stops following its
//     master. BSD answers its own LOOP with RESOLVE and QUIT rounds and an
//     immediate election, which QUITs masters elsewhere in the cycle and
//     may rebuild it; ours changes nobody else's state, so the cycle has a
//     root at once and the site converges as in point 2.
//   - Looks are passive: BSD's looktime probes each ignored network with
//     MASTERREQ and, finding its master, follows it long enough to be
//     listed as its slave. Ours listens to LOOPs, which every master sends
//     each round anyway, and starts the machine only when a change is due.
//   - Only LOOPs from the master followed on the slavenet are passed on
//     (BSD: any foreign LOOP on the slavenet); a master sends LOOPs only
//     on networks it masters (BSD: on every network, ignored ones too).
//   - A submaster's rounds run on their own timer and dictate the host's
//     clock; BSD's submaster measured and corrected its slaves when its
//     own ADJTIME came, with that correction. Time from the top reaches a
//     network d gateways down within d rounds.
//   - With several networks and no slavenet one round votes (the lowest
//     index); BSD's master voted once for all its networks, with every
//     slave in one table.
//
// # References
//
// A host whose clock another program keeps on UTC (Config.Reference;
// timed's --reference kernel) may be master only while its runtime says
// it claims to be a reference (Host.SetReference). Its claim, announced
// in our version-2 tsp.ExtReference (TellReference, ReferenceHeard),
// orders masters before time sources and names: a claiming reference
// outranks a host that does not claim, and of two the smaller kernel
// maxerror (by powers of two of a millisecond), then the lower name,
// wins. It takes over a network whose master it outranks, and gives up
// what it masters when its claim ends, saying so (TellResign, our
// tsp.ExtResign; ResignHeard): its slaves drop it and its claim at once,
// and the eligible ones draw the cold start's delay, the first to run
// out taking over (Machine.masterResigned). reference.go has the rules;
// election/simnet's reference tests check preference, two references,
// step-down and return, and peers that drop version 2, with the
// invariants. BSD's daemons see an ordinary master.
//
// # One master per link
//
// A link that has both families carries two TSP networks that no datagram
// crosses: IPv4 broadcasts never reach an IPv6-only host, nor the IPv6
// group an IPv4-only one. A dual-stack daemon that serves both (timed's
// --family both) runs them as two networks of its Host, with one
// Config.Link: it spans the link (span.go). The rules:
//
//   - Rank. Masters are ordered by a reference's claim first, then by
//     spanning (a host that announced tsp.ExtSpan in the last two and a
//     half rounds, as long as its LOOPs keep it alive, outranks one that
//     did not), then by time sources and names as
//     between gateways. A spanning host that follows a master it
//     outranks takes its network over, as a reference does; one that
//     masters a family of its link and meets on the other a master it
//     outranks by sources or names (a submaster of its own tree among
//     them) takes that family over too.
//   - Spanning slaves. Another spanning host follows the master on one
//     family (its slavenet) and ignores the other (BSD IGNORE: the same
//     tree, one way in), so it is measured and corrected once a round.
//
// Why it cannot leave two masters on the link once settled while a
// spanning host that may be master is up. Call S the set of such hosts.
// A host not in S cannot hold a family on which a member of S is
// running: the member outranks it, and either follows it (and takes the
// family over at once), or is master there too (and QUITs it, which it
// obeys, having heard the span that comes before every QUIT and
// MASTERUP), or ignores the family, which it does only while it follows
// or masters the other side of the same tree, and its look at the family
// brings it back (a master it outranks). So every master on the link is
// in S. Two members of S that are both masters somewhere on the link
// share the family each masters with the other's (each runs a machine on
// both families, or ignores one while mastering the other), where the
// rank, equal on spanning, falls to sources and names, the same for both
// sides: the loser follows, and the winner, master of one family, takes
// the other family over (linkOutranks). What is left is one member of S,
// master of both families, every other host its slave on the one family
// it has (or on one of its two). A member of S that is a slave on one
// family takes the other over only from a master not in S, which the
// settled link has none of (linkOutranks needs it to master a family of
// the link), and it does not take back a family its spanning master
// holds for a quiet spell of LOOPs there (followsSpanner): so the order
// is stable, and the simulations check that nothing flaps (election/simnet: TestDualStackLink, TestRandomDualStackLink,
// with crashes, restarts and partitions).
//
// Transiently there are two: a single-family master that was elected
// while the spanning hosts were down, or partitioned, is master until a
// spanning host follows it or hears its LOOP, then taken over within the
// round trip of a QUIT; a spanning daemon that restarts takes its side
// back within its start-up probe and an election period at most. When
// every spanning host is gone, nothing joins the families: each elects a
// master of its own, and no protocol could do otherwise, the two sets of
// hosts having no family in common. The next spanning host to start
// takes both over again. A claiming reference outranks spanning, so a
// reference on one family only is master there beside a spanning master
// on the other: give references both families too.
//
// BSD's daemons (and ours with --bsd-compat) are IPv4-only and drop
// version 2 unread: they never hear a span, see a spanning master as an
// ordinary one, and obey its QUIT (BSD's doquit makes a master a slave).
// One that QUITs a spanning master first is refused (RefusedOutranked),
// acknowledged all the same, and told to QUIT in turn, as a reference
// does; ours, which would otherwise keep its own QUIT pending and ignore
// the answer as the lower name, finds its QUIT answered and obeys.
// Corrections stay on one family for a host: a master of both families
// votes on the family of lower index and dictates on the other (Host
// Dictates), and a spanning slave that ignores one family stops
// answering there, so the master drops it from that family's list after
// LostHost rounds (until then it measures it twice, the second a dictated
// round whose correction the slave never applies).
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
//   - Cold start (Config.ColdStartDelay): a daemon that may be master and
//     sees others probing does not wait for an election timer, which made
//     daemons started together (a power cut) masterless for 6–15 minutes,
//     in BSD too. When its first probe copy has gone unanswered it draws
//     a delay from [0, ColdStartDelay·k], k the daemons seen starting, and
//     becomes master when it runs out, unless a master showed itself
//     (MASTERACK, MASTERUP) or, once out of Start-up, it accepted a
//     candidate. The first draw, about ColdStartDelay after the first
//     probe timeout whatever k, wins and the others follow its MASTERUP;
//     two draws within a latency δ (probability about δ/ColdStartDelay)
//     make two masters, which merge as below. Datagrams until the master
//     lists everyone: about 2N MASTERREQ copies, MASTERUP and N−1
//     SLAVEUPs, where BSD sends 5N MASTERREQ copies and then the
//     election's 3N−1. The election proper is unchanged (3N−1).
//   - A daemon in Consistency follows a MASTERUP (the paper waits for a
//     second MASTERACK only): the master that answered its probe may have
//     quit to the sender, and following it would leave the daemon a slave
//     of a slave until its election timer ran out.
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
//     after CONFLICT, and in Conflict too (a rival that already quit does
//     not answer RESOLVE); BSD left them to time out and start elections.
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
//   - Orphans find the live master without an election (issue 20: 150
//     daemons started together on a loaded host). A slave whose master
//     has sent it nothing for a whole SyncInterval takes a correction
//     from another address heard acting as master (MASTERUP or LOOP)
//     and follows it, and follows the master whose own LOOP it hears;
//     while its master is heard, corrections from others stay refused,
//     so a slave listed by two masters does not flip between them. A
//     master that gets an ELECTION from a trusted slave it does not list
//     broadcasts MASTERUP (at most once an ElectionMin), and a master
//     that QUITs a rival broadcasts MASTERUP even when the QUIT goes
//     unacknowledged. Before, a slave that followed a MASTERUP delayed
//     past its sender's QUIT refused its real master's corrections until
//     dropped from its list, and then waited out an election timer that
//     every other orphan's ELECTION reset: one orphan taken on per
//     election period, minutes at N = 150.
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
//   - A slave not set yet (new to this master: after a master change,
//     every slave) that the round measured near the network time
//     (Correction.Near) is sent the measured ADJTIME, not SETTIME, whose
//     time carries no transit-delay correction; and a SLAVEUP later than
//     SetTimeGuard from a slave listed before the MASTERUP and not set
//     since (it accepted the candidacy) brings a round forward instead of
//     a SETTIME at once.
//     FreeBSD sets every new slave (need_set), which moved synchronised
//     slaves by the transit delay at each master change.
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

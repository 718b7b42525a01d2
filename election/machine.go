package election

import (
	"cmp"
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/timed-project/timed/tsp"
)

// LoopHops is the hop count a master's LOOP starts with (MAX_HOPCNT).
const LoopHops = 10

// Machine is the election of one daemon on one network. It is a pure state
// machine: Step takes the current time and one event and returns the
// actions to carry out. It never reads a clock, sleeps, or starts a
// goroutine, and all its randomness comes from the *rand.Rand given to
// New, so a run replays exactly from a seed. It is not safe for concurrent
// use.
type Machine struct {
	cfg     Config
	trusted []netip.AddrPort // -F sources (port 0: any); nil trusts everyone
	rng     *rand.Rand

	running    bool
	state      State
	stateSince time.Time
	now        time.Time
	out        []Action
	seq        uint16

	timers   map[TimerID]time.Time // armed timers and their deadlines
	sends    map[TimerID]*outgoing
	pending  [roleCount]int // len(sends) by role, for their bounds (reliable.go)
	bySeq    map[uint16]*outgoing
	nextSend TimerID

	// master followed by a slave (valid when haveMaster).
	master     Peer
	haveMaster bool
	lastAdj    uint16 // seq of the last ADJTIME applied
	lastSet    uint16 // seq of the last SETTIME applied
	adjSeen    bool
	setSeen    bool
	backoff    int
	seen       map[seenKey]seenSeq // last seq acted upon, per (type, sender)
	seenSwept  time.Time           // last sweep of expired entries from seen

	// Start-up and Consistency.
	probeSeq  uint16
	sawOther  bool
	coldDrawn bool                        // the cold-start timer runs its drawn delay
	coldWhy   string                      // why it makes the daemon master
	starting  map[netip.AddrPort]struct{} // daemons seen probing or electing, by address (bounded: maxStarting)
	first     Peer

	// Accept.
	candidate Peer

	// Candidate and Master.
	slaves     map[string]*slave
	slavesNew  bool // the slave list changed: a SlaveList ends what take returns
	masterUpAt time.Time
	round      uint64
	roundDone  bool
	roundAt    time.Time // when the current round began

	// Addresses seen acting as masters (trusted.go): only they may make
	// this daemon QUIT. askSeqs are our MASTERREQs asking an unknown
	// QUIT sender whether it is a master.
	knownMasters map[netip.AddrPort]time.Time
	askSeqs      map[uint16]netip.AddrPort
	// masterHeard is when a packet last came from the master followed
	// (any type: its LOOP every round, a correction, an ACK).
	masterHeard time.Time
	// otherLoops counts the LOOPs (its own, one a round) of the master
	// at otherAt heard in a row, since the master followed was last heard.
	otherLoops int
	otherAt    netip.AddrPort

	// Conflict.
	resolveRound int
	resolveSeqs  map[uint16]bool
	quitSent     map[string]bool

	// rank, set by a Host, orders this master against another master on
	// the network by the time sources they follow (host.go); nil, or 0
	// from it, leaves the decision to the names.
	rank func(from netip.AddrPort, name string) int
}

type seenKey struct {
	t    tsp.Type
	name string
}

type seenSeq struct {
	seq uint16
	at  time.Time
}

type slave struct {
	Peer
	noAnswer int
	needSet  bool
	listedAt time.Time // when the machine listed it
}

// ErrNoRand is returned by New when no random source is given.
var ErrNoRand = errors.New("election: nil random source")

// New returns a stopped machine; Step it with Start. rng supplies every
// random choice (the first sequence number, election timers, answer
// delays): seed it to replay a run.
func New(cfg Config, rng *rand.Rand) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rng == nil {
		return nil, ErrNoRand
	}
	cfg.Retransmit = slices.Clone(cfg.Retransmit)
	m := &Machine{cfg: cfg, rng: rng}
	m.SetTrusted(cfg.Trusted)
	m.seq = uint16(rng.Uint32()) // BSD: sequence = random()
	m.reset()
	return m, nil
}

func (m *Machine) reset() {
	m.timers = map[TimerID]time.Time{}
	m.sends = map[TimerID]*outgoing{}
	m.pending = [roleCount]int{}
	m.bySeq = map[uint16]*outgoing{}
	m.seen = map[seenKey]seenSeq{}
	m.slaves = map[string]*slave{}
	m.haveMaster = false
	m.adjSeen, m.setSeen = false, false
	m.backoff = 1
	m.sawOther = false
	m.starting = nil
	m.resolveSeqs = nil
	m.quitSent = nil
	m.knownMasters = nil
	m.askSeqs = nil
}

// State is the current state.
func (m *Machine) State() State { return m.state }

// StateSince is when the machine entered its current state.
func (m *Machine) StateSince() time.Time { return m.stateSince }

// Master returns the master this daemon follows, if it knows one; a master
// returns itself.
func (m *Machine) Master() (Peer, bool) {
	if m.state.IsMaster() {
		return Peer{Name: m.cfg.Name}, true
	}
	return m.master, m.haveMaster
}

// Slaves returns the master's slave list, sorted by name.
func (m *Machine) Slaves() []Peer {
	out := make([]Peer, 0, len(m.slaves))
	for _, s := range m.slaves {
		out = append(out, s.Peer)
	}
	slices.SortFunc(out, func(a, b Peer) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// IsSlave reports whether the master lists name as a slave.
func (m *Machine) IsSlave(name string) bool { return m.slaves[name] != nil }

// IsSlaveAt reports whether the master lists name as a slave at address
// from: what the slave asks (SETDATEREQ) is taken from its own address
// only, not from any packet carrying its name.
func (m *Machine) IsSlaveAt(name string, from netip.AddrPort) bool {
	s := m.slaves[name]
	return s != nil && s.Addr == from
}

// Backoff is the current election backoff factor (1 = none).
func (m *Machine) Backoff() int { return m.backoff }

// Config returns the machine's configuration.
func (m *Machine) Config() Config { return m.cfg }

// Step feeds one event to the machine at time now and returns what to do.
// now must not go backwards between calls.
func (m *Machine) Step(now time.Time, ev Event) Ready {
	m.now = now
	switch e := ev.(type) {
	case Start:
		m.start()
	case Stop:
		m.stop()
	case Recv:
		if m.running {
			m.recv(e.Packet, e.From)
		}
	case TimerFired:
		if m.running {
			m.timer(e.ID)
		}
	case ForceElection:
		if m.running {
			m.forceElection()
		}
	case SyncResult:
		if m.running {
			m.syncResult(e)
		}
	case ResignHeard:
		if m.running {
			m.masterResigned(e)
		}
	}
	return Ready{Actions: m.take()}
}

// take returns the actions emitted since it was last called, ending with
// the slave list if that changed (emitSlaves), once.
func (m *Machine) take() []Action {
	if m.slavesNew {
		m.slavesNew = false
		m.emit(SlaveList{Slaves: m.Slaves()})
	}
	out := m.out
	m.out = nil
	return out
}

func (m *Machine) emit(a Action) { m.out = append(m.out, a) }

func (m *Machine) nextSeq() uint16 {
	m.seq++
	return m.seq
}

func (m *Machine) packet(t tsp.Type, seq uint16) tsp.Packet {
	return tsp.Packet{Type: t, Version: tsp.Version, Seq: seq, Name: m.cfg.Name}
}

func (m *Machine) setTimer(id TimerID, d time.Duration) {
	m.timers[id] = m.now.Add(d)
	m.emit(SetTimer{ID: id, After: d})
}

func (m *Machine) cancelTimer(id TimerID) {
	if _, ok := m.timers[id]; ok {
		delete(m.timers, id)
		m.emit(CancelTimer{ID: id})
	}
}

// become moves to state s, cancelling the timers and sends that belong to
// the state left.
func (m *Machine) become(s State, reason string) {
	old := m.state
	if old == s {
		return
	}
	m.state, m.stateSince = s, m.now
	switch old {
	case StartUp:
		m.cancelSends(roleProbe)
	case Candidate:
		m.cancelTimer(TimerCandidate)
	case Accept:
		m.cancelTimer(TimerAccept)
	case Consistency:
		m.cancelTimer(TimerConsistency)
	case NoMaster:
		m.cancelTimer(TimerNoMaster)
	}
	if old.IsMaster() && !s.IsMaster() {
		m.cancelTimer(TimerSync)
		m.cancelSends(roleMaster)
		m.cancelSends(roleRival)
		if len(m.slaves) > 0 {
			m.slaves = map[string]*slave{}
			m.emit(SlaveList{})
			m.slavesNew = false
		}
	}
	if s == Candidate || s.IsMaster() || s == NoMaster {
		m.cancelTimer(TimerElection)
	}
	if s != Slave {
		// Only a probe that failed (Slave, no master yet) keeps the cold
		// start pending; every other state has a master or an election.
		m.cancelTimer(TimerColdStart)
	}
	if old == Candidate && !s.IsMaster() && len(m.slaves) > 0 {
		m.slaves = map[string]*slave{}
	}
	m.emit(StateChange{From: old, To: s, Reason: reason})
}

// ---- start, stop, timers -------------------------------------------------

func (m *Machine) start() {
	if m.running {
		m.stop()
	}
	m.running = true
	m.state, m.stateSince = StartUp, m.now
	m.emit(StateChange{From: StartUp, To: StartUp, Reason: "started"})
	m.probe()
}

func (m *Machine) stop() {
	if !m.running {
		return
	}
	for _, id := range sortedTimers(m.timers) {
		m.emit(CancelTimer{ID: id})
	}
	if len(m.slaves) > 0 && m.state.IsMaster() {
		m.emit(SlaveList{})
	}
	m.slavesNew = false
	m.emit(StateChange{From: m.state, To: StartUp, Reason: "stopped"})
	m.state, m.stateSince = StartUp, m.now
	m.running = false
	m.reset()
}

func sortedTimers(t map[TimerID]time.Time) []TimerID {
	ids := make([]TimerID, 0, len(t))
	for id := range t {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// probe broadcasts MASTERREQ (reliable: waits for MASTERACK).
func (m *Machine) probe() {
	m.sawOther = false
	m.starting = nil
	m.probeSeq = m.nextSeq()
	m.send(&outgoing{
		pkt: m.packet(tsp.MasterReq, m.probeSeq), bcast: true,
		want: tsp.MasterAck, role: roleProbe, onFail: m.probeFailed,
	}, 0)
}

func (m *Machine) probeFailed() {
	if m.state != StartUp {
		return
	}
	switch {
	case m.sawOther:
		// FreeBSD: another daemon is probing or electing: stay a slave and
		// let the election timers decide.
		m.become(Slave, "no MASTERACK, other daemons seen")
		m.armElection()
	case m.cfg.MayBeMaster:
		m.become(NoMaster, "no MASTERACK")
		m.setTimer(TimerNoMaster, m.cfg.NoMasterWait)
	default:
		// Not allowed to be master: poll again later.
		m.armElection()
	}
}

func (m *Machine) timer(id TimerID) {
	// The runtime's word is taken for the expiry, not now versus the
	// deadline: now may be a host clock that the clock layer has just
	// stepped, and a timer must not move with it.
	if _, ok := m.timers[id]; !ok {
		return // cancelled, or already fired
	}
	delete(m.timers, id)
	if id >= firstSendTimer {
		if o := m.sends[id]; o != nil {
			if o.sent == 0 {
				m.sendCopy(o) // the answer delay is over
			} else {
				m.sendTimer(o)
			}
		}
		return
	}
	switch id {
	case TimerElection:
		m.electionTimeout()
	case TimerCandidate:
		if m.state == Candidate {
			m.becomeMaster("election won")
		}
	case TimerAccept:
		if m.state == Accept {
			m.become(Slave, "accept window over")
		}
	case TimerConsistency:
		if m.state == Consistency {
			m.followMaster(m.first, "one master")
		}
	case TimerNoMaster:
		if m.state == NoMaster {
			m.becomeMaster("no master found")
		}
	case TimerColdStart:
		m.coldStart()
	case TimerSync:
		if m.state.IsMaster() {
			m.syncRound()
		}
	}
}

func (m *Machine) electionTimeout() {
	switch m.state {
	case Slave, Accept:
		if m.cfg.MayBeMaster {
			m.becomeCandidate("election timer expired")
			return
		}
		m.haveMaster = false
		m.become(StartUp, "no master, polling")
		m.probe()
	case StartUp:
		m.probe() // a host that may not be master polls again
	}
}

// armElection (re)starts the election timer with a fresh draw from
// [ElectionMin, ElectionMin + (ElectionMax−ElectionMin)·backoff].
func (m *Machine) armElection() {
	width := (m.cfg.ElectionMax - m.cfg.ElectionMin) * time.Duration(m.backoff)
	d := m.cfg.ElectionMin
	if width > 0 {
		d += time.Duration(m.rng.Int64N(int64(width) + 1))
	}
	m.setTimer(TimerElection, d)
}

// maxStarting bounds the addresses a starting daemon counts
// (sawStarting): packets from ever new addresses must not grow the table,
// and beyond it the cold start's range is at ElectionMin anyway with BSD's
// timers.
const maxStarting = 1024

// sawStarting counts the sender of a MASTERREQ or ELECTION seen while
// starting, by its address: one sender under many names (an outsider's
// made-up ones) counts once, so that it cannot stretch the cold start's
// draw to ElectionMin.
func (m *Machine) sawStarting(from netip.AddrPort) {
	if m.starting == nil {
		m.starting = map[netip.AddrPort]struct{}{}
	}
	if len(m.starting) < maxStarting {
		m.starting[from] = struct{}{}
	}
}

// armColdStart counts the daemon seen starting (sawStarting) and starts
// the cold start (Config.ColdStartDelay) the first time a starting daemon
// sees another. It runs in two steps on one timer: first Retransmit[0],
// in which a live master answers our probe (its MASTERACK cancels the
// timer, and nothing was drawn) and the MASTERREQs of the daemons started
// with us come in; then a uniform draw from [0, ColdStartDelay·k], k the
// daemons seen starting, this one included (at most ElectionMin). Of k
// draws the first falls at about ColdStartDelay whatever k, and another
// falls within a latency δ of it with probability about δ/ColdStartDelay:
// the others follow its MASTERUP.
//
// An ELECTION seen meanwhile does not stop it: a starting daemon does not
// ACCEPT, and the candidate follows our MASTERUP if we are first; waiting
// for the candidate instead would leave the network without a master for
// an election timer whenever two candidates collide.
func (m *Machine) armColdStart(from netip.AddrPort) {
	if m.cfg.ColdStartDelay <= 0 || !m.cfg.MayBeMaster || m.haveMaster {
		return
	}
	m.sawStarting(from)
	if _, ok := m.timers[TimerColdStart]; ok {
		return
	}
	m.coldDrawn, m.coldWhy = false, "cold start: others starting, no master"
	m.setTimer(TimerColdStart, m.cfg.Retransmit[0])
}

// coldStart is the cold-start timer: after the first step it draws the
// delay, after the second the daemon becomes master, if it still has
// neither a master nor an election of its own.
func (m *Machine) coldStart() {
	if (m.state != StartUp && m.state != Slave) || m.haveMaster || !m.cfg.MayBeMaster {
		return
	}
	if !m.coldDrawn {
		m.coldDrawn = true
		k := time.Duration(len(m.starting) + 1)
		span := min(m.cfg.ColdStartDelay*k, m.cfg.ElectionMin)
		m.setTimer(TimerColdStart, time.Duration(m.rng.Int64N(int64(span)+1)))
		return
	}
	m.becomeMaster(m.coldWhy)
}

// masterResigned: the master followed gives the network up (a reference
// whose claim ended: TellResign). Its slaves would otherwise have no
// master, and no corrections, until their election timers ran out (6 to
// 15 minutes with BSD's). Each that may be master draws a delay from the
// cold start's range for k = the master's slave count (at least 1), and
// becomes master when it runs out with still no master: of k draws the
// first falls at about ColdStartDelay, and the others follow its MASTERUP
// (which cancels their draws, as does an ELECTION they ACCEPT). Only from
// the master followed, by address: anyone else's is ignored. With the
// cold start off (ColdStartDelay 0, BSD) the election timer decides.
func (m *Machine) masterResigned(e ResignHeard) {
	if m.state != Slave || !m.haveMaster || e.From != m.master.Addr {
		return
	}
	m.haveMaster = false
	if m.cfg.ColdStartDelay <= 0 || !m.cfg.MayBeMaster {
		return
	}
	k := time.Duration(max(1, min(e.Slaves, m.cfg.MaxSlaves)))
	span := min(m.cfg.ColdStartDelay*k, m.cfg.ElectionMin)
	m.coldDrawn, m.coldWhy = true, "master "+e.Name+" resigned, none took over"
	m.setTimer(TimerColdStart, time.Duration(m.rng.Int64N(int64(span)+1)))
}

func (m *Machine) answerDelay() time.Duration {
	if m.cfg.AnswerDelay <= 0 {
		return 0
	}
	return time.Duration(m.rng.Int64N(int64(m.cfg.AnswerDelay) + 1))
}

func (m *Machine) forceElection() {
	switch m.state {
	case Slave, Accept, StartUp:
		if m.cfg.MayBeMaster && m.state != StartUp {
			m.becomeCandidate("forced election")
		}
	case Master:
		m.syncRound()
	}
}

// resign gives up being master or candidate (a reference that no longer
// claims, reference.go): the machine becomes a slave with no master, its
// slaves dropped, its election timer armed (not eligible, it then polls).
func (m *Machine) resign(reason string) {
	if m.state.IsMaster() {
		// Tell the slaves, lest they wait out their election timers.
		m.emit(TellResign{Slaves: len(m.slaves)})
	}
	if m.state.IsMaster() || m.state == Candidate {
		m.become(Slave, reason)
		m.haveMaster = false
		m.armElection()
	}
}

// ---- small senders -------------------------------------------------------

// reply answers p with type t, echoing its seq (BSD's automatic ACKs).
func (m *Machine) reply(t tsp.Type, p tsp.Packet, to netip.AddrPort) {
	m.emit(Send{Packet: m.packet(t, p.Seq), To: to})
}

// sendReliable sends a new packet of type t to one peer and waits for ACK.
func (m *Machine) sendReliable(t tsp.Type, to Peer, r role, delay time.Duration, onAck func(), onFail func()) {
	o := &outgoing{pkt: m.packet(t, m.nextSeq()), to: to.Addr, want: tsp.Ack, role: r, peer: to.Name}
	if onAck != nil {
		o.onAck = func(netip.AddrPort, tsp.Packet) { onAck() }
	}
	o.onFail = onFail
	m.send(o, delay)
}

// quit tells a peer to QUIT (reliable), unless a QUIT to it is pending.
// onAck runs when it is acknowledged, and when the retransmissions run
// out unacknowledged if alsoOnFail.
func (m *Machine) quit(to Peer, onAck func()) { m.quitThen(to, onAck, false) }

func (m *Machine) quitThen(to Peer, onAck func(), alsoOnFail bool) {
	if m.pendingTo(tsp.Quit, to.Name) {
		return
	}
	r := roleAny
	if m.state.IsMaster() {
		r = roleRival
	}
	var onFail func()
	if alsoOnFail {
		onFail = onAck
	}
	m.sendReliable(tsp.Quit, to, r, 0, onAck, onFail)
}

// suppress is BSD's suppress(): an untrusted daemon acting as master or
// candidate is told to QUIT.
func (m *Machine) suppress(to Peer) { m.quit(to, nil) }

func (m *Machine) slaveUp(to Peer) {
	m.send(&outgoing{pkt: m.packet(tsp.SlaveUp, m.nextSeq()), to: to.Addr, peer: to.Name}, m.answerDelay())
}

// dup reports whether p repeats the last packet of its type acted upon from
// its sender (same seq) within the duplicate window, and records it
// otherwise. Copies of one packet (retransmissions, network duplicates)
// arrive within one retransmit span; the window is twice that, so that a
// BSD daemon, which leaves ELECTION's seq unset and may repeat the same
// garbage value, is still heard at its next election.
//
// The table is bounded (maxSeen): packets under ever new names must not
// grow it without end. When it is full, expired entries go; if none has
// expired the packet is not recorded, so a later copy of it is acted upon
// again, which is harmless, rather than the table growing.
func (m *Machine) dup(p tsp.Packet) bool {
	k := seenKey{p.Type, p.Name}
	window := 2 * m.cfg.RetransmitSpan()
	if s, ok := m.seen[k]; ok && s.seq == p.Seq && m.now.Sub(s.at) <= window {
		return true
	}
	if _, ok := m.seen[k]; !ok && len(m.seen) >= maxSeen {
		// Sweep at most every quarter window: under a flood a sweep per
		// packet would cost the whole table each time.
		if m.now.Sub(m.seenSwept) >= window/4 {
			m.seenSwept = m.now
			for key, s := range m.seen {
				if m.now.Sub(s.at) > window {
					delete(m.seen, key)
				}
			}
		}
		if len(m.seen) >= maxSeen {
			return false
		}
	}
	m.seen[k] = seenSeq{seq: p.Seq, at: m.now}
	return false
}

// maxSeen bounds the duplicate table: a few packet types from each of
// NHOSTS senders.
const maxSeen = 4096

// ---- receive ---------------------------------------------------------------

func (m *Machine) recv(p tsp.Packet, from netip.AddrPort) {
	if p.Type == tsp.Test {
		// timedc election: under this host's own name when run here, which
		// BSD's readmsg lets through too.
		m.forceElection()
		return
	}
	if p.Name == m.cfg.Name {
		return // our own broadcast, looped back
	}
	m.matchAnswer(p, from)
	peer := Peer{Name: p.Name, Addr: from}
	m.noteMaster(p, from)
	if m.haveMaster && from == m.master.Addr {
		m.masterHeard, m.otherLoops = m.now, 0
	} else if p.Type == tsp.Loop && p.HopCount == LoopHops && m.isKnownMaster(from) {
		if from != m.otherAt {
			m.otherAt, m.otherLoops = from, 0
		}
		m.otherLoops++
	}
	switch m.state {
	case StartUp:
		m.recvStartUp(p, peer)
	case Consistency:
		m.recvConsistency(p, peer)
	case NoMaster:
		m.recvNoMaster(p, peer)
	case Slave, Accept:
		m.recvSlave(p, peer)
	case Candidate:
		m.recvCandidate(p, peer)
	case Master, Conflict:
		m.recvMaster(p, peer)
	}
}

// ackSlaveSide sends the ACKs a non-master daemon owes (BSD slaveack and
// ignoreack, plus CONFLICT, which BSD never acknowledged). ADJTIME and
// SETTIME are acknowledged only when taken from the master followed
// (slaveClock), and a candidate's QUIT only when obeyed: an ACK tells the
// sender it was obeyed, which a forger must not learn.
func (m *Machine) ackSlaveSide(p tsp.Packet, from netip.AddrPort) {
	switch p.Type {
	case tsp.Accept, tsp.Refuse, tsp.Conflict:
		m.reply(tsp.Ack, p, from)
	case tsp.Quit:
		if m.state != Candidate {
			m.reply(tsp.Ack, p, from)
		}
	}
}

// noteMaster records the senders that act as masters: MASTERUP, LOOP and
// RESOLVE broadcasts, and MASTERACKs answering one of our own MASTERREQs
// to an unknown QUIT sender (askIfMaster).
func (m *Machine) noteMaster(p tsp.Packet, from netip.AddrPort) {
	if !m.isTrusted(from) {
		return
	}
	switch p.Type {
	case tsp.MasterUp, tsp.Loop, tsp.Resolve:
		m.sawMaster(from)
	case tsp.MasterAck:
		if a, ok := m.askSeqs[p.Seq]; ok && a == from {
			delete(m.askSeqs, p.Seq)
			m.sawMaster(from)
		}
	}
}

// maxAsks bounds the MASTERREQs outstanding to unknown QUIT senders.
const maxAsks = 8

// askIfMaster answers a QUIT from a sender not known as a master with a
// MASTERREQ of its own: a real master answers MASTERACK, is recorded, and
// its next copy of the QUIT is obeyed; a forger's QUIT changes nothing.
func (m *Machine) askIfMaster(p tsp.Packet, peer Peer) {
	m.refused(p, peer.Addr, RefusedNotMaster)
	if m.askSeqs == nil {
		m.askSeqs = map[uint16]netip.AddrPort{}
	}
	for _, a := range m.askSeqs {
		if a == peer.Addr {
			return
		}
	}
	if len(m.askSeqs) >= maxAsks {
		return
	}
	seq := m.nextSeq()
	m.askSeqs[seq] = peer.Addr
	m.emit(Send{Packet: m.packet(tsp.MasterReq, seq), To: peer.Addr})
}

func (m *Machine) refused(p tsp.Packet, from netip.AddrPort, why RefuseReason) {
	m.emit(Refused{Type: p.Type, From: from, Reason: why})
}

// fromFollowed: a correction is taken only from the address of the master
// this daemon follows, or of the candidate it accepted (whose MASTERUP may
// have been lost), never from a packet that merely carries its name.
func (m *Machine) fromFollowed(from netip.AddrPort) bool {
	return (m.haveMaster && from == m.master.Addr) || (m.state == Accept && from == m.candidate.Addr)
}

func (m *Machine) recvStartUp(p tsp.Packet, peer Peer) {
	m.ackSlaveSide(p, peer.Addr)
	switch p.Type {
	case tsp.MasterAck:
		if p.Seq != m.probeSeq {
			return
		}
		if !m.isTrusted(peer.Addr) {
			m.suppress(peer)
			return
		}
		m.first = peer
		m.sawMaster(peer.Addr)
		m.become(Consistency, "MASTERACK from "+p.Name)
		m.setTimer(TimerConsistency, m.cfg.ConflictWindow)
	case tsp.MasterUp:
		m.followMasterUp(p, peer)
	case tsp.MasterReq, tsp.Election:
		m.sawOther = true
		m.armColdStart(peer.Addr)
	case tsp.AdjTime, tsp.SetTime:
		// No master is followed yet, so no correction is taken: the
		// probe's MASTERACK names the master, from its own address.
		m.refused(p, peer.Addr, RefusedNotFollowed)
	}
}

// followMasterUp follows the master that sent MASTERUP, or suppresses it
// when it is not trusted.
func (m *Machine) followMasterUp(p tsp.Packet, peer Peer) {
	if m.isTrusted(peer.Addr) {
		m.followMaster(peer, "MASTERUP from "+p.Name)
	} else {
		m.suppress(peer)
	}
}

func (m *Machine) recvConsistency(p tsp.Packet, peer Peer) {
	m.ackSlaveSide(p, peer.Addr)
	if p.Type == tsp.MasterUp {
		// A master announcing itself now, as every other state follows
		// it: the one that answered our probe may since have quit to it
		// (two masters of a cold start merge so), and following the first
		// would leave us a slave of a slave until our election timer.
		m.followMasterUp(p, peer)
		return
	}
	if p.Type != tsp.MasterAck || p.Seq != m.probeSeq || p.Name == m.first.Name {
		return
	}
	if !m.isTrusted(peer.Addr) {
		m.suppress(peer)
		return
	}
	// Two masters: tell the first one (paper §5.3), then follow it.
	first := m.first
	m.sendReliable(tsp.Conflict, first, roleAny, 0, nil, nil)
	m.followMaster(first, "second MASTERACK from "+p.Name)
}

func (m *Machine) recvNoMaster(p tsp.Packet, peer Peer) {
	m.ackSlaveSide(p, peer.Addr)
	switch p.Type {
	case tsp.MasterReq, tsp.Election:
		m.become(Slave, p.Type.String()+" from "+p.Name)
		m.armElection()
		m.recvSlave(p, peer)
	case tsp.MasterUp:
		m.followMasterUp(p, peer)
	}
}

// followMaster makes the daemon a slave of peer and announces it with
// SLAVEUP.
func (m *Machine) followMaster(peer Peer, reason string) {
	m.sawMaster(peer.Addr)
	m.setMaster(peer)
	m.backoff = 1
	m.become(Slave, reason)
	m.armElection()
	m.slaveUp(peer)
}

func (m *Machine) setMaster(peer Peer) {
	m.cancelTimer(TimerColdStart)
	if !m.haveMaster || m.master != peer {
		m.adjSeen, m.setSeen = false, false
	}
	if !m.haveMaster || m.master != peer {
		m.masterHeard, m.otherLoops = m.now, 0
	}
	m.master, m.haveMaster = peer, true
}

// adoptedBy reports whether a correction from from, which is not the
// master followed, is taken (and its sender followed from then on): from
// acts as a master (its MASTERUP or LOOP heard: isKnownMaster) and the
// master followed has been silent for a whole sync round, in which a
// live master sends every slave a LOOP and a correction: for SyncInterval
// (the longest round), or while from went through two rounds of its own
// (two of its LOOPs in a row; adaptive rounds are far shorter than
// SyncInterval at first). The master
// that corrects this daemon lists it as its slave; the one it follows
// may have quit, or never have listed it (its MASTERUP arrived after it
// had quit, as on a loaded host when many daemons start together). Were
// the correction refused, the slave would stay unsynchronised until
// dropped from the list and its own election timer ran out, which other
// orphans' elections keep resetting. While the followed master is
// heard, corrections from others are refused: two masters listing one
// slave merge within a round, and the slave does not flip between them.
func (m *Machine) adoptedBy(from netip.AddrPort) bool {
	if !m.isKnownMaster(from) {
		return false
	}
	return !m.haveMaster || (from == m.otherAt && m.otherLoops >= 2) || m.now.Sub(m.masterHeard) > m.cfg.SyncInterval
}

// slaveClock handles an ADJTIME or SETTIME from the trusted master
// followed (fromFollowed).
func (m *Machine) slaveClock(p tsp.Packet, peer Peer) {
	m.reply(tsp.Ack, p, peer.Addr)
	m.sawMaster(peer.Addr)
	m.setMaster(peer)
	m.backoff = 1
	switch p.Type {
	case tsp.AdjTime:
		if !m.adjSeen || m.lastAdj != p.Seq {
			m.adjSeen, m.lastAdj = true, p.Seq
			m.emit(AdjustClock{Delta: p.Time.Duration(), Master: p.Name})
		}
	case tsp.SetTime:
		if !m.setSeen || m.lastSet != p.Seq {
			m.setSeen, m.lastSet = true, p.Seq
			m.emit(SetClock{Time: p.Time.Time(), Master: p.Name})
		}
	}
	m.armElection()
}

func (m *Machine) recvSlave(p tsp.Packet, peer Peer) {
	m.ackSlaveSide(p, peer.Addr)
	trusted := m.isTrusted(peer.Addr)
	switch p.Type {
	case tsp.AdjTime, tsp.SetTime:
		if !trusted {
			m.suppress(peer)
			return
		}
		if !m.fromFollowed(peer.Addr) && !m.adoptedBy(peer.Addr) {
			m.refused(p, peer.Addr, RefusedNotFollowed)
			return
		}
		m.slaveClock(p, peer)
	case tsp.Loop:
		// A live master's own LOOP (not one passed on by a gateway, which
		// carries another's name) while the master followed has been
		// silent a whole round: follow the live one, as its MASTERUP
		// would have made us do, rather than wait for an election timer
		// (adoptedBy has the reasons).
		if m.state == Slave && p.HopCount == LoopHops && !m.fromFollowed(peer.Addr) && m.adoptedBy(peer.Addr) {
			m.followMaster(peer, "LOOP from "+p.Name+", the master followed silent")
		}
	case tsp.MasterUp:
		if !trusted {
			m.suppress(peer)
			m.fastElection()
			return
		}
		m.followMaster(peer, "MASTERUP from "+p.Name)
	case tsp.Election:
		if m.dup(p) {
			return
		}
		if !trusted {
			m.suppress(peer)
			m.fastElection()
			return
		}
		m.armElection()
		if m.state == Accept {
			if peer.Name != m.candidate.Name {
				m.sendReliable(tsp.Refuse, peer, roleAny, 0, nil, nil)
			}
			return
		}
		m.candidate = peer
		m.become(Accept, "ELECTION from "+p.Name)
		m.setTimer(TimerAccept, m.cfg.AcceptWindow)
		m.sendReliable(tsp.Accept, peer, roleAny, m.answerDelay(), nil, nil)
	}
}

// fastElection pulls the election timer in after an untrusted daemon tried
// to be master, so a trusted one takes over soon (BSD).
//
// A slave that follows a master skips it: its master hears the impostor
// too and suppresses it, and pulling the election in would let one forged
// MASTERUP start an election among every eligible slave.
func (m *Machine) fastElection() {
	if !m.cfg.MayBeMaster || (m.state == Slave && m.haveMaster) {
		return
	}
	if d, ok := m.timers[TimerElection]; ok && d.Sub(m.now) <= m.cfg.FastElection {
		return
	}
	m.setTimer(TimerElection, m.cfg.FastElection)
}

// ---- candidate -------------------------------------------------------------

func (m *Machine) becomeCandidate(reason string) {
	m.slaves = map[string]*slave{}
	m.become(Candidate, reason)
	m.emit(Send{Packet: m.packet(tsp.Election, m.nextSeq()), Broadcast: true})
	m.setTimer(TimerCandidate, m.cfg.CandidateWait)
}

// withdraw ends a candidacy that was refused: back to Slave with the
// election range doubled (4.3BSD's backoff).
func (m *Machine) withdraw(reason string) {
	m.backoff = min(m.backoff*2, m.cfg.BackoffCap)
	m.become(Slave, reason)
	m.armElection()
}

func (m *Machine) recvCandidate(p tsp.Packet, peer Peer) {
	m.ackSlaveSide(p, peer.Addr)
	trusted := m.isTrusted(peer.Addr)
	switch p.Type {
	case tsp.Accept, tsp.SlaveUp:
		if m.slaves[p.Name] != nil {
			return
		}
		if len(m.slaves) >= m.cfg.MaxSlaves {
			m.refused(p, peer.Addr, RefusedTableFull)
			return
		}
		m.slaves[p.Name] = &slave{Peer: peer, needSet: true, listedAt: m.now}
		if p.Type == tsp.Accept {
			m.setTimer(TimerCandidate, m.cfg.CandidateWait)
		}
	case tsp.Refuse:
		if !m.dup(p) {
			m.withdraw("REFUSE from " + p.Name)
		}
	case tsp.Quit:
		// BSD's candidate obeys any QUIT. Ours obeys a master's, or with
		// a -F list a trusted host's (slaves suppress an untrusted
		// candidate that way); anyone else's is a forgery that would keep
		// the network without a master, and is answered by asking.
		if !m.obeysQuit(peer.Addr) {
			m.askIfMaster(p, peer)
			return
		}
		m.reply(tsp.Ack, p, peer.Addr)
		if m.dup(p) {
			return
		}
		if m.isKnownMaster(peer.Addr) {
			m.setMaster(peer)
		}
		m.withdraw("QUIT from " + p.Name)
	case tsp.Election:
		if m.dup(p) {
			return
		}
		if !trusted {
			m.suppress(peer)
			return
		}
		m.sendReliable(tsp.Refuse, peer, roleAny, 0, nil, nil)
	case tsp.MasterUp:
		if !trusted {
			m.suppress(peer)
			return
		}
		m.followMaster(peer, "MASTERUP from "+p.Name)
	case tsp.MasterReq:
		if !trusted {
			m.suppress(peer)
			return
		}
		m.become(Slave, "MASTERREQ from "+p.Name)
		m.armElection()
	case tsp.AdjTime, tsp.SetTime:
		if !trusted {
			m.suppress(peer)
			return
		}
		if !m.fromFollowed(peer.Addr) {
			m.refused(p, peer.Addr, RefusedNotFollowed)
			return
		}
		m.become(Slave, p.Type.String()+" from "+p.Name)
		m.slaveClock(p, peer)
	}
}

// ---- master ----------------------------------------------------------------

func (m *Machine) becomeMaster(reason string) {
	from := m.state
	m.become(Master, reason)
	m.haveMaster = false
	m.masterUp()
	if from != Conflict {
		m.round = 0
		m.setTimer(TimerSync, m.cfg.FirstSync)
		m.emitSlaves()
	}
}

func (m *Machine) masterUp() {
	m.masterUpAt = m.now
	m.emit(Send{Packet: m.packet(tsp.MasterUp, m.nextSeq()), Broadcast: true})
}

// emitSlaves has the slave list sent at the end of the Step, once however
// often it changed: a round that drops a thousand silent slaves (an
// outsider's made-up names) would otherwise queue a thousand copies of a
// list of a thousand, quadratic in memory within the one Step.
func (m *Machine) emitSlaves() { m.slavesNew = true }

// addSlave lists peer as a slave and returns its entry, or nil when it
// may not be listed. The table is bounded (MaxSlaves), and an entry keeps
// the address it was listed with: a packet carrying a listed slave's name
// from elsewhere would otherwise divert that slave's corrections. A slave
// that really moved is listed again from its new address once the old
// entry is dropped after LostHost failed rounds.
func (m *Machine) addSlave(p tsp.Packet, peer Peer) *slave {
	s := m.slaves[peer.Name]
	switch {
	case s != nil && s.Addr != peer.Addr:
		m.refused(p, peer.Addr, RefusedNameTaken)
		return nil
	case s != nil:
		return s
	case len(m.slaves) >= m.cfg.MaxSlaves:
		m.refused(p, peer.Addr, RefusedTableFull)
		return nil
	}
	s = &slave{Peer: peer, needSet: true, listedAt: m.now}
	m.slaves[peer.Name] = s
	m.emitSlaves()
	return s
}

func (m *Machine) recvMaster(p tsp.Packet, peer Peer) {
	trusted := m.isTrusted(peer.Addr)
	switch p.Type {
	case tsp.MasterReq, tsp.Resolve:
		m.reply(tsp.MasterAck, p, peer.Addr)
	case tsp.MSiteReq:
		// A BSD slave asking for timedc msite (BSD masterack).
		m.reply(tsp.Ack, p, peer.Addr)
	case tsp.SlaveUp:
		old := m.slaves[peer.Name]
		late := old != nil && old.needSet && !old.listedAt.After(m.masterUpAt)
		s := m.addSlave(p, peer)
		if s == nil {
			return
		}
		s.needSet = true // a (re)started slave is set before it is adjusted
		switch {
		case m.now.Sub(m.masterUpAt) < m.cfg.SetTimeGuard:
			// An answer to MASTERUP: set at the first round.
		case late:
			// A slave listed before our MASTERUP and not set since (it
			// accepted our candidacy) answering it late: it followed the
			// master before us and is most likely synchronised, and a
			// SETTIME, uncorrected for the transit delay, would step it
			// by that delay. An early round measures it, and sends it
			// ADJTIME if it is near (Correction.Near).
			m.syncWithin(m.joinOrFirstSync())
		default:
			// A new daemon, or one that restarted: BSD's newslave sets
			// it at once.
			m.setTime(s, 0)
			m.syncSoon()
		}
	case tsp.Accept:
		// A late ACCEPT (its ACK was lost): answer it, list the sender.
		m.reply(tsp.Ack, p, peer.Addr)
		m.addSlave(p, peer)
	case tsp.Refuse:
		m.reply(tsp.Ack, p, peer.Addr)
	case tsp.Election:
		if m.dup(p) {
			return
		}
		// A slave we overlooked (paper §5.3): cut its candidacy short and
		// take it on.
		m.quit(peer, nil)
		if trusted {
			listed := m.slaves[p.Name] != nil
			m.addSlave(p, peer)
			m.collectOrphans(listed)
		}
	case tsp.Conflict:
		m.reply(tsp.Ack, p, peer.Addr)
		if m.dup(p) || m.state != Master {
			return
		}
		m.become(Conflict, "CONFLICT from "+p.Name)
		m.resolveRound = 0
		m.resolveSeqs = map[uint16]bool{}
		m.quitSent = map[string]bool{}
		m.resolve()
	case tsp.MasterAck:
		if m.state == Conflict && m.resolveSeqs[p.Seq] && !m.quitSent[p.Name] {
			m.quitSent[p.Name] = true
			m.quit(peer, nil)
		}
	case tsp.Quit:
		if !trusted {
			m.reply(tsp.Ack, p, peer.Addr)
			if !m.dup(p) {
				m.suppress(peer)
			}
			return
		}
		if !m.obeysQuit(peer.Addr) {
			m.askIfMaster(p, peer)
			return
		}
		r := m.rivalRank(peer)
		if r < 0 {
			// Our time source (or claim, or span) outranks the sender's:
			// it is the one to give way. The QUIT is acknowledged all the
			// same, so that a sender that cannot hear our rank (BSD's,
			// --bsd-compat) is not left with its QUIT pending, whose
			// "both told each other to quit, the lower name stays" would
			// have it ignore ours for ever.
			m.reply(tsp.Ack, p, peer.Addr)
			m.refused(p, peer.Addr, RefusedOutranked)
			m.quitRival(peer)
			return
		}
		if r == 0 && m.pendingTo(tsp.Quit, p.Name) && m.cfg.Name < p.Name {
			// Both told each other to quit: the lower name stays. The QUIT
			// is not acknowledged: the sender retransmits it, and obeys
			// ours meanwhile (its own goes with its mastership); one that
			// refused ours (it outranks us by what we cannot hear: a
			// reference's claim, a span, to a --bsd-compat daemon)
			// acknowledges it, and its next copy finds ours answered.
			return
		}
		m.reply(tsp.Ack, p, peer.Addr)
		if m.dup(p) {
			return
		}
		m.followMaster(peer, "QUIT from "+p.Name)
	case tsp.Loop, tsp.MasterUp, tsp.AdjTime, tsp.SetTime:
		m.foreignMaster(p, peer)
	}
}

// collectOrphans broadcasts MASTERUP when a trusted slave this master
// did not list runs for election, at most once an ElectionMin. Such a
// candidate follows a master that no longer corrects it: one that quit
// (to this master or another) without its slaves being collected, or a
// MASTERUP that reached it after its sender had quit. Its fellow slaves
// are orphaned too, and every ELECTION resets their election timers, so
// that one at a time would run and be taken on, an election period
// each: at N = 150 under load, minutes. The MASTERUP takes them all on
// at once (they follow it and answer SLAVEUP).
func (m *Machine) collectOrphans(listed bool) {
	if listed || m.state != Master || m.now.Sub(m.masterUpAt) < m.cfg.ElectionMin {
		return
	}
	m.masterUp()
}

// rivalRank orders this master against the master at peer by the time
// sources they follow, as the Host sees them: −1 when ours outranks
// theirs, +1 when theirs outranks ours, 0 when the names decide (no Host,
// or both are their own time source, or both follow the same one).
func (m *Machine) rivalRank(peer Peer) int {
	if m.rank == nil {
		return 0
	}
	return m.rank(peer.Addr, peer.Name)
}

// quitRival tells another master to QUIT and, once it has, broadcasts
// MASTERUP to collect its slaves (as after a CONFLICT). It does so in
// Conflict too: a rival that quit no longer answers RESOLVE, so
// endConflict would not collect its slaves, and they would follow a
// slave until their election timers ran out.
//
// It broadcasts the MASTERUP also when the QUIT goes unacknowledged: the
// rival may have quit already (to us or to another master) while its
// ACKs were lost or late on a loaded host, and its slaves would then
// follow a master that no longer corrects them, each until its election
// timer ran out.
func (m *Machine) quitRival(peer Peer) {
	m.quitThen(peer, func() {
		if m.state.IsMaster() {
			m.masterUp()
		}
	}, true)
}

// takeOver makes the machine master of its network at once, as its Host
// decided (the master it follows, rival, serves a time source that ours
// outranks), and tells rival to QUIT. A stopped machine is started.
func (m *Machine) takeOver(rival Peer, reason string) {
	if !m.running {
		m.running = true
		m.state, m.stateSince = StartUp, m.now
		m.emit(StateChange{From: StartUp, To: StartUp, Reason: "started"})
	}
	for _, o := range sortedSends(m.sends) {
		if o.pkt.Type == tsp.SlaveUp {
			m.dropSend(o)
			m.emit(CancelTimer{ID: o.id})
		}
	}
	m.becomeMaster(reason)
	m.quitRival(rival)
}

// foreignMaster handles evidence of another master on the network (its
// LOOP, MASTERUP, ADJTIME or SETTIME). An untrusted one is suppressed. Of
// two trusted masters the one with the lower name QUITs the other; the
// higher-named one answers with its own LOOP so the lower one learns of it
// at once. BSD has every master QUIT the sender of a foreign LOOP, so two
// masters whose LOOPs cross QUIT each other and leave none.
//
// On a Host (several networks) the time sources the two masters follow
// decide first (rivalRank): the master whose source is outranked follows
// the other at once, rather than answering with a LOOP, since the other
// may be a machine that goes by the names and would only answer back.
func (m *Machine) foreignMaster(p tsp.Packet, peer Peer) {
	if !m.isTrusted(peer.Addr) {
		m.suppress(peer)
		return
	}
	r := m.rivalRank(peer)
	if r > 0 {
		m.followMaster(peer, "outranked: "+p.Type.String()+" from "+p.Name)
		return
	}
	if r < 0 || m.cfg.Name < p.Name {
		m.quitRival(peer)
		return
	}
	if p.Type == tsp.Loop || p.Type == tsp.MasterUp {
		lp := m.packet(tsp.Loop, m.nextSeq())
		lp.HopCount = LoopHops
		m.emit(Send{Packet: lp, To: peer.Addr})
	}
}

// resolve runs one RESOLVE round of the Conflict state: every master that
// answers is told to QUIT; the round ends at the first answer (and the
// next starts) or when nobody answers, which ends the conflict.
func (m *Machine) resolve() {
	m.resolveRound++
	seq := m.nextSeq()
	m.resolveSeqs[seq] = true
	m.send(&outgoing{
		pkt: m.packet(tsp.Resolve, seq), bcast: true, want: tsp.MasterAck, role: roleMaster,
		onAck: func(from netip.AddrPort, p tsp.Packet) {
			if m.state != Conflict {
				return
			}
			if !m.quitSent[p.Name] {
				m.quitSent[p.Name] = true
				m.quit(Peer{Name: p.Name, Addr: from}, nil)
			}
			if m.resolveRound < m.cfg.ResolveRounds {
				m.resolve()
			} else {
				m.endConflict()
			}
		},
		onFail: func() {
			if m.state == Conflict {
				m.endConflict()
			}
		},
	}, 0)
}

// endConflict goes back to Master when the RESOLVE rounds are over. A
// master that was told to QUIT leaves slaves behind, and MASTERUP
// collects them (BSD). When no other master answered there are none to
// collect, and a MASTERUP would only make every slave announce itself
// again and be set anew at the next round (SETTIME, unless measured near:
// Correction.Near): a CONFLICT that names no real master, such as an
// outsider's forgery, must not buy that.
func (m *Machine) endConflict() {
	if len(m.quitSent) > 0 {
		m.becomeMaster("conflict resolved")
		return
	}
	m.become(Master, "conflict resolved: no other master answered")
}

func (m *Machine) syncRound() {
	m.round++
	m.roundDone, m.roundAt = false, m.now
	if len(m.slaves) > 0 {
		m.emit(SyncRound{Round: m.round, Slaves: m.Slaves()})
	}
	lp := m.packet(tsp.Loop, m.nextSeq())
	lp.HopCount = LoopHops
	m.emit(Send{Packet: lp, Broadcast: true})
	m.setTimer(TimerSync, m.cfg.SyncInterval)
}

// syncSoon brings the next round forward to JoinSync from now, if it is
// further away (a slave joined). Never later: a flood of SLAVEUPs makes
// rounds no more often than JoinSync.
func (m *Machine) syncSoon() { m.syncWithin(m.cfg.JoinSync) }

// syncWithin brings the next round forward to d from now, if it is
// further away; d ≤ 0 leaves it.
func (m *Machine) syncWithin(d time.Duration) {
	if d <= 0 || !m.state.IsMaster() {
		return
	}
	if at, ok := m.timers[TimerSync]; ok && at.Sub(m.now) > d {
		m.setTimer(TimerSync, d)
	}
}

// joinOrFirstSync is how soon a round measures a slave that waits to be
// set by one: JoinSync, or FirstSync where JoinSync is off (BSD's rounds),
// so that it waits no longer than after a MASTERUP.
func (m *Machine) joinOrFirstSync() time.Duration {
	if m.cfg.JoinSync > 0 {
		return m.cfg.JoinSync
	}
	return m.cfg.FirstSync
}

// RoundOpen reports whether a SyncResult for round would be taken now: the
// machine is master and round is its current round, not yet answered. A
// runtime asks before it applies the master's own share of a round to the
// clock, so that a round the machine discards (a date change, a lost
// mastership since it began) moves no clock either.
func (m *Machine) RoundOpen(round uint64) bool {
	return m.state.IsMaster() && round == m.round && !m.roundDone
}

func (m *Machine) syncResult(r SyncResult) {
	if !m.RoundOpen(r.Round) {
		return
	}
	m.roundDone = true
	if r.Next > 0 {
		// Adaptive rounds: the next begins Next after this one did, at
		// most SyncInterval (as already set), and not in the past.
		next := min(r.Next, m.cfg.SyncInterval)
		m.setTimer(TimerSync, max(m.roundAt.Add(next).Sub(m.now), 0))
	}
	stale := m.pendingCorrections()
	got := make(map[string]Correction, len(r.Corrections))
	for _, c := range r.Corrections {
		got[c.Name] = c
	}
	for _, s := range m.Slaves() {
		sl := m.slaves[s.Name]
		c, ok := got[s.Name]
		if !ok {
			m.slaveFailed(s.Name)
			continue
		}
		// A correction of an earlier round still unanswered (short
		// adaptive rounds) is stale now: retransmitted after this one, it
		// would move the slave back.
		for _, o := range stale[sl.Name] {
			m.cancelSend(o)
		}
		if c.Set || sl.needSet && !c.Near {
			m.setTime(sl, r.Own)
			continue
		}
		tv, err := tsp.DurationTimeval(c.Delta)
		if err != nil {
			m.setTime(sl, r.Own)
			continue
		}
		o := &outgoing{pkt: m.packet(tsp.AdjTime, m.nextSeq()), to: sl.Addr, want: tsp.Ack, role: roleMaster, peer: sl.Name}
		o.pkt.Time = tv
		name := sl.Name
		// A near ADJTIME sets a slave not set yet as well as SETTIME.
		o.onAck = func(netip.AddrPort, tsp.Packet) { m.slaveAnswered(name, c.Near) }
		o.onFail = func() { m.slaveFailed(name) }
		m.send(o, 0)
	}
}

// setTime sends SETTIME (the network time: now + own) to a slave.
func (m *Machine) setTime(s *slave, own time.Duration) {
	tv, err := tsp.TimeTimeval(m.now.Add(own))
	if err != nil {
		return
	}
	o := &outgoing{pkt: m.packet(tsp.SetTime, m.nextSeq()), to: s.Addr, want: tsp.Ack, role: roleMaster, peer: s.Name}
	o.pkt.Time = tv
	name := s.Name
	o.onAck = func(netip.AddrPort, tsp.Packet) { m.slaveAnswered(name, true) }
	o.onFail = func() { m.slaveFailed(name) }
	m.send(o, 0)
}

func (m *Machine) slaveAnswered(name string, set bool) {
	if s := m.slaves[name]; s != nil {
		s.noAnswer = 0
		if set {
			s.needSet = false
		}
	}
}

func (m *Machine) slaveFailed(name string) {
	s := m.slaves[name]
	if s == nil {
		return
	}
	s.noAnswer++
	if s.noAnswer >= m.cfg.LostHost {
		delete(m.slaves, name)
		m.emitSlaves()
	}
}

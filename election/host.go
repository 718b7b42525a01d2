package election

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/timed-project/timed/tsp"
)

// Host is the election of one daemon on every network it is attached to:
// one Machine per network, and BSD's rules across them (the package
// documentation, "Several networks", gives them and their reasons). A
// runtime drives a Host as it would drive a Machine, naming the network
// of each event, and carries out the actions, each tagged with the
// network it belongs to. Like Machine it is pure: no socket, no clock, no
// goroutine; its randomness comes from the *rand.Rand given to NewHost.
// It is not safe for concurrent use.
//
// With one network a Host is its Machine, the same actions for the same
// events, as long as no gateway passes LOOPs on to that network; where one
// does, the host's master weighs the time sources the LOOPs tell (package
// documentation), which is how trees of masters merge.
type Host struct {
	name  string
	nets  []*hostNet
	rng   *rand.Rand
	now   time.Time
	slave int // the slavenet, or -1

	out      []NetAction
	silenced map[int]bool // networks ignored or taken over during this step

	// reference: a reference host (Config.Reference), eligible only
	// while it claims (reference.go); claim and claimErr are its claim.
	reference bool
	claim     bool
	claimErr  time.Duration
}

// NetAction is one action of a Host: Action belongs to the network with
// index Net (the index of its Config in NewHost). Timers are per network:
// a SetTimer{ID} on network 1 and one on network 2 are two timers, and the
// expiry goes back as Step(now, Net, TimerFired{ID}).
type NetAction struct {
	Net    int
	Action Action
}

func (a NetAction) String() string { return fmt.Sprintf("net%d %v", a.Net, a.Action) }

// Ignored reports that the host put its network out of use (On: BSD's
// IGNORE; the machine is stopped and answers nothing) or back into use.
type Ignored struct {
	On     bool
	Reason string
}

// CycleDetected reports that a LOOP carrying this host's own name came
// back from the master it follows on this network (its slavenet): the
// gateways form a cycle in which time goes round. The host stops following
// that master (Ignored follows).
type CycleDetected struct {
	Master Peer
	Hops   int // gateways the LOOP went through
}

func (Ignored) isAction()       {}
func (CycleDetected) isAction() {}

func (a Ignored) String() string {
	if a.On {
		return "ignored (" + a.Reason + ")"
	}
	return "resumed (" + a.Reason + ")"
}

func (a CycleDetected) String() string {
	return fmt.Sprintf("cycle: own LOOP back from %s after %d hops", a.Master.Name, a.Hops)
}

// netMode is what the host does with one of its networks.
type netMode uint8

const (
	netStopped netMode = iota // not started yet, or stopped by the runtime
	netRunning                // the machine runs
	netIgnored                // out of use (BSD IGNORE): the machine is stopped, the host watches LOOPs
)

type hostNet struct {
	cfg  Config
	m    *Machine
	mode netMode
	// loops: the LOOPs heard on this network, per source and origin;
	// since: when each source was first heard (again, after a silence).
	loops map[netip.AddrPort]map[string]heardLoop
	since map[netip.AddrPort]time.Time
	// announced: the slavenet master whose LOOPs were last passed on to
	// this network when it became mastered (zero: none).
	announced netip.AddrPort
	// waiting: ignored until the LOOPs tell the time sources (settle).
	waiting bool
	// asked, told: the questions for time sources outstanding on this
	// network, and the answers (source.go); waitFor: the master whose
	// source (and this host's own) an ignored network waits for, zero
	// for none.
	asked   map[netip.AddrPort]askedSource
	told    map[netip.AddrPort]toldSource
	waitFor Peer
	// refs: the references' claims heard here (reference.go); toldRef:
	// when ours was last announced here.
	refs    map[netip.AddrPort]heardRef
	toldRef time.Time
	// siblings: the host's other networks on this one's link, its other
	// family (Config.Link; none: it does not span); spans: the
	// announcements of spanning hosts heard here, toldSpan: when ours was
	// last made here (span.go).
	siblings []int
	spans    map[netip.AddrPort]heardSpan
	toldSpan time.Time
}

type heardLoop struct {
	pkt tsp.Packet
	at  time.Time
}

// Bounds of the LOOP tables: forged LOOPs from ever new sources or names
// must not grow them without end. A tree is at most LoopHops deep, so a
// source forwards at most LoopHops origins.
const (
	maxLoopSources = 64
	maxLoopOrigins = 2 * LoopHops
)

// ErrNoNetworks is returned by NewHost when given no configuration.
var ErrNoNetworks = errors.New("election: a host needs at least one network")

// NewHost returns a host with one stopped Machine per configuration, in
// that order: network i is cfgs[i]. Every configuration carries the same
// Name (the host name, as BSD sends one name on every network); they may
// differ in anything else (trust lists, eligibility, timers). rng supplies
// every random choice of the machines and of the host.
func NewHost(cfgs []Config, rng *rand.Rand) (*Host, error) {
	if len(cfgs) == 0 {
		return nil, ErrNoNetworks
	}
	if rng == nil {
		return nil, ErrNoRand
	}
	h := &Host{name: cfgs[0].Name, rng: rng, slave: -1, silenced: map[int]bool{}}
	for i, c := range cfgs {
		if c.Name != h.name {
			return nil, invalid(fmt.Sprintf("cfgs[%d].Name", i), "is %q, must be the host's name %q", c.Name, h.name)
		}
		m, err := New(c, rng)
		if err != nil {
			return nil, fmt.Errorf("network %d: %w", i, err)
		}
		m.rank = func(from netip.AddrPort, name string) int { return h.rivalRank(i, from, name) }
		if c.Reference {
			// Eligible only while it claims (SetReference).
			h.reference = true
			m.cfg.MayBeMaster = false
		}
		h.nets = append(h.nets, &hostNet{cfg: m.cfg, m: m, refs: map[netip.AddrPort]heardRef{}, spans: map[netip.AddrPort]heardSpan{},
			loops: map[netip.AddrPort]map[string]heardLoop{}, since: map[netip.AddrPort]time.Time{},
			asked: map[netip.AddrPort]askedSource{}, told: map[netip.AddrPort]toldSource{}})
	}
	h.markLinks()
	return h, nil
}

// ---- accessors -------------------------------------------------------------

// Name is the host name.
func (h *Host) Name() string { return h.name }

// Nets is the number of networks.
func (h *Host) Nets() int { return len(h.nets) }

// Machine is network i's machine, for its queries (Trusted, IsSlaveAt,
// Backoff, Config) and SetTrusted. Never Step it directly: the host would
// not see what it did.
func (h *Host) Machine(i int) *Machine { return h.nets[i].m }

// State is network i's election state (StartUp while the network is
// stopped or ignored).
func (h *Host) State(i int) State { return h.nets[i].m.State() }

// Running reports whether network i's machine runs (started, not
// ignored).
func (h *Host) Running(i int) bool { return h.nets[i].mode == netRunning }

// Ignored reports whether the host has put network i out of use (BSD
// IGNORE).
func (h *Host) Ignored(i int) bool { return h.nets[i].mode == netIgnored }

// Master is the master this host follows on network i, or itself where it
// is master; false where it knows none (ignored networks included).
func (h *Host) Master(i int) (Peer, bool) {
	if h.nets[i].mode != netRunning {
		return Peer{}, false
	}
	return h.nets[i].m.Master()
}

// Slaves is this host's slave list on network i, sorted by name.
func (h *Host) Slaves(i int) []Peer { return h.nets[i].m.Slaves() }

// SlaveNet is the network on which this host follows a master (BSD's
// slavenet): the only one whose corrections (AdjustClock, SetClock) the
// host applies. False when it follows nobody.
func (h *Host) SlaveNet() (int, bool) { return h.slave, h.slave >= 0 }

// IsSlaveNet reports whether network i is the slavenet.
func (h *Host) IsSlaveNet(i int) bool { return h.slave >= 0 && h.slave == i }

// Dictates reports whether this host's sync rounds on network i must
// dictate: correct the slaves towards this host's clock, take no vote and
// apply no correction to the host's own clock (SyncRound.Dictate). True
// where the host is master and either follows a master elsewhere (it is
// a submaster: its clock comes from the slavenet) or masters a network of
// lower index, whose rounds vote for the host clock.
func (h *Host) Dictates(i int) bool {
	if !h.masters(i) {
		return false
	}
	return h.slave >= 0 || i != h.firstMastered()
}

// Source is the name of the time source this host's clock follows, as
// the LOOPs tell it: the master at the top of the tree of masters and
// submasters it is in; its own name when it follows nobody.
func (h *Host) Source() string { return h.root() }

func (h *Host) masters(i int) bool {
	return h.nets[i].mode == netRunning && h.nets[i].m.State().IsMaster()
}

func (h *Host) firstMastered() int {
	for i := range h.nets {
		if h.masters(i) {
			return i
		}
	}
	return -1
}

// follows reports whether network i's machine follows a master.
func (h *Host) follows(i int) bool {
	n := h.nets[i]
	if n.mode != netRunning {
		return false
	}
	st := n.m.State()
	_, ok := n.m.Master()
	return ok && (st == Slave || st == Accept)
}

// ---- driving ---------------------------------------------------------------

// Start starts every network, in index order (the runtime's start-up).
func (h *Host) Start(now time.Time) []NetAction { return h.all(now, Start{}) }

// Stop stops every network (shutdown).
func (h *Host) Stop(now time.Time) []NetAction { return h.all(now, Stop{}) }

func (h *Host) all(now time.Time, ev Event) []NetAction {
	var out []NetAction
	for i := range h.nets {
		out = append(out, h.Step(now, i, ev)...)
	}
	return out
}

// Step feeds one event of network net to the host at time now and returns
// what to do, in order. now must not go backwards between calls. Start
// and Stop start and stop that network's machine (Start also takes it
// back into use if the host had ignored it); TimerFired{TimerLook} is the
// host's own timer; everything else goes to the network's machine, as
// Machine.Step describes, once the host has seen it (LOOPs: forwarding and
// cycle detection). SourceQuery and SourceAnswer are the host's own (the
// questions for time sources). An out-of-range net does nothing.
func (h *Host) Step(now time.Time, net int, ev Event) []NetAction {
	if net < 0 || net >= len(h.nets) {
		return nil
	}
	h.now = now
	n := h.nets[net]
	switch e := ev.(type) {
	case Start:
		if n.mode == netIgnored {
			h.emit(net, CancelTimer{ID: TimerLook})
		}
		n.mode, n.waiting, n.waitFor = netRunning, false, Peer{}
		h.stepMachine(net, e)
	case Stop:
		if n.mode == netIgnored {
			h.emit(net, CancelTimer{ID: TimerLook})
		}
		n.mode, n.waiting, n.waitFor = netStopped, false, Peer{}
		h.stepMachine(net, e)
	case SourceQuery:
		h.sourceQuery(net, e)
	case SourceAnswer:
		h.sourceAnswer(net, e)
	case ReferenceHeard:
		h.referenceHeard(net, e)
	case SpanHeard:
		h.spanHeard(net, e)
	case ResignHeard:
		h.resignHeard(net, e)
	case TimerFired:
		if e.ID == TimerLook {
			h.look(net)
		} else if n.mode == netRunning {
			h.stepMachine(net, e)
		}
	case Recv:
		if e.Packet.Type == tsp.Loop && h.heardLoop(net, e) {
			break
		}
		if n.mode == netRunning {
			h.stepMachine(net, e)
		}
	default:
		if n.mode == netRunning {
			h.stepMachine(net, ev)
		}
	}
	h.reconcile()
	h.claimNetworks()
	return h.finish()
}

func (h *Host) emit(net int, a Action) { h.out = append(h.out, NetAction{Net: net, Action: a}) }

func (h *Host) stepMachine(i int, ev Event) {
	for _, a := range h.nets[i].m.Step(h.now, ev).Actions {
		h.emit(i, a)
	}
}

// with runs f on network i's machine (a transition the host decided) and
// collects what it did.
func (h *Host) with(i int, f func(m *Machine)) {
	m := h.nets[i].m
	m.now = h.now
	f(m)
	for _, a := range m.take() {
		h.emit(i, a)
	}
}

// finish passes the slavenet's LOOPs on to newly mastered networks, then
// filters the step's actions: only the slavenet's corrections reach the
// clock, SLAVEUP is not sent on a network the host has just left, and
// every SyncRound says whether it dictates.
func (h *Host) finish() []NetAction {
	if len(h.nets) > 1 {
		h.announce()
	}
	out := h.out[:0]
	for _, a := range h.announced(h.out) {
		switch x := a.Action.(type) {
		case AdjustClock, SetClock:
			if len(h.nets) > 1 && a.Net != h.slave {
				continue
			}
		case Send:
			if x.Packet.Type == tsp.SlaveUp && h.silenced[a.Net] {
				continue
			}
		case SyncRound:
			x.Dictate = h.Dictates(a.Net)
			a.Action = x
		}
		out = append(out, a)
	}
	h.out = nil
	clear(h.silenced)
	return out
}

// ---- LOOPs -----------------------------------------------------------------

// loopWindow is how long a LOOP heard keeps a master alive in the host's
// eyes: masters send one every sync round, so two and a half rounds leave
// room for a lost one before the host thinks the master gone.
func (c Config) loopWindow() time.Duration { return c.SyncInterval * 5 / 2 }

// rootWindow is how long a LOOP heard counts for the time source of its
// sender: a master forwards each of its masters' LOOPs once a round, so
// one and a half rounds hear every live origin again, and forget, soon
// after its tree changed, the origins it no longer forwards.
func (c Config) rootWindow() time.Duration { return c.SyncInterval * 3 / 2 }

// fromSelf reports whether from is this host's own address on the
// network (unknown in peers mode, where daemons share one).
func (n *hostNet) fromSelf(from netip.AddrPort) bool {
	return n.cfg.Addr.IsValid() && from.Addr().Unmap() == n.cfg.Addr.Addr().Unmap()
}

// heardLoop records a LOOP heard on network i, forwards it if it came from
// the slavenet's master, and breaks the cycle when it carries our own name
// from there. It reports whether the packet was consumed (the machine must
// not see it).
func (h *Host) heardLoop(i int, e Recv) bool {
	n := h.nets[i]
	p := e.Packet
	if n.fromSelf(e.From) {
		return true // our own broadcast, back from the network
	}
	if !n.m.Trusted(e.From) {
		return false // the machine suppresses its sender
	}
	h.noteLoop(i, e.From, p)
	h.lookIfKnown()
	if i != h.slave || len(h.nets) == 1 {
		return false
	}
	mp, ok := n.m.Master()
	if !ok || mp.Addr != e.From {
		return false
	}
	if p.Name == h.name {
		h.emit(i, CycleDetected{Master: mp, Hops: LoopHops - int(p.HopCount)})
		h.ignore(i, "own LOOP back from "+mp.Name+": gateways in a cycle")
		return true
	}
	for j := range h.nets {
		if j != i && h.masters(j) {
			h.forward(j, p)
		}
	}
	return false
}

// forward sends a LOOP on network j one hop further, keeping its
// originator's name and sequence number; a LOOP whose count would reach
// 0 goes no further.
func (h *Host) forward(j int, p tsp.Packet) {
	if p.HopCount <= 1 {
		return
	}
	p.HopCount--
	h.emit(j, Send{Packet: p, Broadcast: true})
}

func (h *Host) noteLoop(i int, from netip.AddrPort, p tsp.Packet) {
	n := h.nets[i]
	w := n.cfg.loopWindow()
	if len(h.freshLoops(i, from, n.cfg.rootWindow())) == 0 {
		n.since[from] = h.now // first heard, or again after a silence
	}
	byName := n.loops[from]
	if byName == nil {
		if len(n.loops) >= maxLoopSources {
			h.sweepLoops(i)
			if len(n.loops) >= maxLoopSources {
				old := oldestSource(n.loops)
				delete(n.loops, old)
				delete(n.since, old)
			}
		}
		byName = map[string]heardLoop{}
		n.loops[from] = byName
	}
	if _, ok := byName[p.Name]; !ok && len(byName) >= maxLoopOrigins {
		for name, l := range byName {
			if h.now.Sub(l.at) > w {
				delete(byName, name)
			}
		}
		if len(byName) >= maxLoopOrigins {
			return
		}
	}
	byName[p.Name] = heardLoop{pkt: p, at: h.now}
}

func (h *Host) sweepLoops(i int) {
	n := h.nets[i]
	w := n.cfg.loopWindow()
	for a, byName := range n.loops {
		for name, l := range byName {
			if h.now.Sub(l.at) > w {
				delete(byName, name)
			}
		}
		if len(byName) == 0 {
			delete(n.loops, a)
			delete(n.since, a)
		}
	}
}

func oldestSource(loops map[netip.AddrPort]map[string]heardLoop) netip.AddrPort {
	var oldest netip.AddrPort
	var at time.Time
	for a, byName := range loops {
		for _, l := range byName {
			if at.IsZero() || l.at.Before(at) || (l.at.Equal(at) && a.Compare(oldest) < 0) {
				oldest, at = a, l.at
			}
		}
	}
	return oldest
}

// freshLoops is what source from sent on network i within window w,
// sorted by hop count, highest first (its own LOOP, then its master's…),
// then by name.
func (h *Host) freshLoops(i int, from netip.AddrPort, w time.Duration) []tsp.Packet {
	n := h.nets[i]
	var out []tsp.Packet
	for _, l := range n.loops[from] {
		if h.now.Sub(l.at) <= w {
			out = append(out, l.pkt)
		}
	}
	slices.SortFunc(out, func(a, b tsp.Packet) int {
		if c := cmp.Compare(b.HopCount, a.HopCount); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}

// rootAt is the time source of the master at from on network i: the
// originator of the forwarded LOOP (hop count below LoopHops) from it that
// came the farthest, the top of the tree it is in. fwd is false when it
// forwards none (it follows nobody, or its tree is out of LOOP range):
// then the root is the name of its own LOOP, or name. Until its LOOPs
// have told it (heardLong), the master's answer to our question, if one
// came, stands for them.
func (h *Host) rootAt(i int, from netip.AddrPort, name string) (root string, fwd bool) {
	root, hops := h.sourceAt(i, from, name)
	return root, hops > 0
}

// sourceAt is rootAt with the gateways between the master and its source
// (0: it follows nobody).
func (h *Host) sourceAt(i int, from netip.AddrPort, name string) (root string, hops int) {
	ls := h.freshLoops(i, from, h.nets[i].cfg.rootWindow())
	if t, ok := h.told(i, from); ok && !h.heardLongFrom(i, from, ls) {
		return t.source, t.hops
	}
	if len(ls) == 0 {
		return name, 0
	}
	// ls is sorted by hop count, highest first, then by name: the first
	// of the lowest count is the lowest name among the farthest.
	lowest := ls[len(ls)-1].HopCount
	far := ls[slices.IndexFunc(ls, func(p tsp.Packet) bool { return p.HopCount == lowest })]
	return far.Name, max(0, LoopHops-int(far.HopCount))
}

// downstream reports whether the master at from on network i takes its
// time from this host: it passes on a LOOP of ours (heard in the last
// round and a half). Following it would close a cycle.
func (h *Host) downstream(i int, from netip.AddrPort) bool {
	for _, p := range h.freshLoops(i, from, h.nets[i].cfg.rootWindow()) {
		if p.Name == h.name {
			return true
		}
	}
	return false
}

// root is the time source of this host: its slavenet master's, or itself.
func (h *Host) root() string {
	if h.slave >= 0 {
		if mp, ok := h.nets[h.slave].m.Master(); ok {
			r, _ := h.rootAt(h.slave, mp.Addr, mp.Name)
			return r
		}
	}
	return h.name
}

// rivalRank is Machine.rivalRank for network i: this host's time source
// against that of the master at from. The lower name outranks. 0 (the
// names of the two masters decide) when neither follows another source,
// and when both follow the same one: two masters of one tree on one
// network, of which the loser ignores the network.
func (h *Host) rivalRank(i int, from netip.AddrPort, name string) int {
	if r := h.masterOutranks(i, Peer{Name: name, Addr: from}); r != 0 {
		return r // references first (reference.go), then spanning (span.go)
	}
	mine := h.root()
	theirs, fwd := h.rootAt(i, from, name)
	if theirs == h.name {
		theirs = mine // its time comes from us
	}
	switch {
	case mine == h.name && !fwd, mine == theirs:
		return 0
	case mine < theirs:
		return -1
	}
	return 1
}

// announce passes the slavenet master's recent LOOPs on to each network
// this host has just come to master (or masters for a new slavenet
// master), so that the masters there learn at once which time source it
// serves, rather than at the next LOOP.
func (h *Host) announce() {
	var from netip.AddrPort
	if h.slave >= 0 {
		if mp, ok := h.nets[h.slave].m.Master(); ok {
			from = mp.Addr
		}
	}
	for j, n := range h.nets {
		if !h.masters(j) || !from.IsValid() {
			n.announced = netip.AddrPort{}
			continue
		}
		if n.announced != from {
			h.passLoops(j)
		}
	}
}

// passLoops forwards onto network j the LOOPs recently heard from the
// slavenet's master, once per slavenet master. Where none has come yet
// but the master has told its source (source.go), the LOOP of that source
// it would forward goes out instead (sequence number 0: receivers key
// LOOPs by name), so that j's hosts learn the source all the same.
func (h *Host) passLoops(j int) {
	if h.slave < 0 {
		return
	}
	mp, ok := h.nets[h.slave].m.Master()
	if !ok {
		return
	}
	h.nets[j].announced = mp.Addr
	ls := h.freshLoops(h.slave, mp.Addr, h.nets[h.slave].cfg.rootWindow())
	if t, ok := h.told(h.slave, mp.Addr); ok && len(ls) == 0 && t.source != h.name {
		ls = []tsp.Packet{{Type: tsp.Loop, Version: tsp.Version, HopCount: uint8(LoopHops - t.hops), Name: t.source}}
	}
	for _, p := range ls {
		if p.Name != h.name {
			h.forward(j, p)
		}
	}
}

// ---- the rules across networks ----------------------------------------------

// reconcile restores "slave on at most one network" after a step: while a
// network other than the slavenet follows a master, settle decides what
// becomes of it. Each pass leaves one network fewer following.
func (h *Host) reconcile() {
	for range len(h.nets) + 1 {
		if h.slave >= 0 && !h.follows(h.slave) {
			h.slave = -1
		}
		if h.slave >= 0 && len(h.nets) > 1 {
			// The slavenet's machine may have come to follow another
			// master on its own (MASTERUP, QUIT).
			if mp, _ := h.nets[h.slave].m.Master(); h.downstream(h.slave, mp.Addr) {
				h.ignore(h.slave, "its master "+mp.Name+" takes its time from us")
				continue
			}
		}
		j := -1
		for i := range h.nets {
			if i != h.slave && h.follows(i) {
				j = i
				break
			}
		}
		if j < 0 {
			return
		}
		h.settle(j)
	}
}

// settle decides about network j, whose machine follows a master q while
// the host may follow another on its slavenet. The time sources (roots)
// decide, the lower name winning:
//   - q's time comes from this host (its LOOPs carry our name): j is
//     ignored (following q would close a cycle);
//   - the host follows nobody and masters nothing: j becomes the slavenet;
//   - q's source outranks the host's: j becomes the slavenet and the host
//     takes over its former slavenet (or ignores it, if it may not be
//     master there);
//   - the host's source outranks q's: the host takes over j;
//   - the same source: j is ignored (BSD IGNORE: one tree, one way in).
//
// A host that may not be master on j ignores j whenever it has a slavenet.
//
// The time sources come from the LOOPs of the two masters, which tell
// them once a master has been heard for a whole round (heardLong), or
// from the masters' answers to our questions (source.go), a round
// trip away. Until then a decision that would move the host from one tree
// to the other waits: j is ignored, the masters are asked, and j is
// decided as soon as both are known (lookIfKnown): at the answers, or a
// round or so later where the masters answer nothing (BSD's).
func (h *Host) settle(j int) {
	if len(h.nets) == 1 {
		h.slave = j // one network: no cycle, nothing to choose
		return
	}
	q, _ := h.nets[j].m.Master()
	rj, _ := h.rootAt(j, q.Addr, q.Name)
	mine := h.root()
	eligible := h.nets[j].cfg.MayBeMaster
	if eligible && h.refRank(j, q.Addr, q.Name) < 0 {
		h.takeOver(j, q, "a reference outranks master "+q.Name) // reference.go
		return
	}
	if eligible && h.spanOutranks(j, q) {
		h.takeOver(j, q, spanWhy(q)) // span.go
		return
	}
	if h.linkOutranks(j, q) {
		h.takeOver(j, q, linkWhy(q)) // span.go
		return
	}
	switch {
	case rj == h.name || h.downstream(j, q.Addr):
		h.ignore(j, "its master "+q.Name+" takes its time from us")
	case h.alone():
		h.slave = j
	case eligible && rj != mine && !h.rootsKnown(j, q):
		h.ignore(j, "time sources not known yet")
		h.nets[j].waiting = true
		h.askSources(j, q)
	case h.slave < 0:
		switch {
		case rj < mine:
			h.slave = j
		case eligible:
			h.takeOver(j, q, "our time source "+mine+" outranks "+rj)
		default:
			h.ignore(j, "we are master elsewhere")
		}
	case !eligible:
		h.ignore(j, "slave on another network")
	case rj < mine:
		old := h.slave
		h.slave = j
		op, _ := h.nets[old].m.Master()
		if h.nets[old].cfg.MayBeMaster {
			h.takeOver(old, op, "time source "+rj+" outranks "+mine)
		} else {
			h.ignore(old, "time source "+rj+" outranks "+mine)
		}
	case rj > mine:
		h.takeOver(j, q, "our time source "+mine+" outranks "+rj)
	default:
		h.ignore(j, "slave on another network, same time source "+rj)
	}
}

// rootsKnown reports whether LOOPs or answers have told the time sources
// of both this host (its slavenet master's, if it has one) and q, master
// on j.
func (h *Host) rootsKnown(j int, q Peer) bool {
	return h.known(j, q.Addr) && h.ownRootKnown()
}

// heardLong: the master at a on network i has been heard for a whole sync
// round, in which every LOOP it forwards comes by once: its LOOPs tell its
// time source. The round is short of the first retransmission wait (a
// bound on the jitter of delivery), so that the master's next LOOP after a
// round, a little early, counts.
func (h *Host) heardLong(i int, a netip.AddrPort) bool {
	return h.heardLongFrom(i, a, h.freshLoops(i, a, h.nets[i].cfg.rootWindow()))
}

// heardLongFrom is heardLong with a's fresh LOOPs already gathered.
func (h *Host) heardLongFrom(i int, a netip.AddrPort, fresh []tsp.Packet) bool {
	n := h.nets[i]
	since, ok := n.since[a]
	round := n.cfg.SyncInterval - n.cfg.Retransmit[0]
	return ok && len(fresh) > 0 && h.now.Sub(since) >= round
}

func (h *Host) ownRootKnown() bool {
	if h.slave < 0 {
		return true
	}
	mp, ok := h.nets[h.slave].m.Master()
	return ok && h.known(h.slave, mp.Addr)
}

// lookIfKnown looks at once at the networks waiting for the time sources
// to be known, as soon as they are, rather than at the next look: where
// the master waited for has answered, resumeWaiting decides about it at
// once; otherwise the network is looked at as by its look timer.
func (h *Host) lookIfKnown() {
	if !h.ownRootKnown() {
		return
	}
	for j, n := range h.nets {
		if n.mode != netIgnored {
			continue
		}
		if q := n.waitFor; q.Addr.IsValid() {
			if _, ok := h.told(j, q.Addr); ok {
				h.resumeWaiting(j)
				continue
			}
		}
		if !n.waiting {
			continue
		}
		if a, _, ok := h.latestLoop(j); ok && h.known(j, a) {
			h.emit(j, CancelTimer{ID: TimerLook})
			h.look(j)
		}
	}
}

// takeOver makes this host master of network j, telling rival, its
// master there, to QUIT. The slavenet master's LOOPs go out first, so that
// the rival and its slaves learn which time source the host serves before
// its MASTERUP and QUIT reach them.
func (h *Host) takeOver(j int, rival Peer, reason string) {
	h.silenced[j] = true
	h.passLoops(j)
	h.with(j, func(m *Machine) { m.takeOver(rival, reason) })
}

// ignore puts network j out of use: its machine stops, and the host looks
// at it again after a fresh election period (BSD looktime).
func (h *Host) ignore(j int, reason string) {
	n := h.nets[j]
	if n.mode == netIgnored {
		return
	}
	h.silenced[j] = true
	h.stepMachine(j, Stop{})
	n.mode, n.waiting, n.waitFor = netIgnored, false, Peer{}
	if h.slave == j {
		h.slave = -1
	}
	h.emit(j, Ignored{On: true, Reason: reason})
	h.armLook(j)
}

func (h *Host) armLook(j int) {
	c := h.nets[j].cfg
	d := c.ElectionMin + time.Duration(h.rng.Int64N(int64(c.ElectionMax-c.ElectionMin)+1))
	h.emit(j, SetTimer{ID: TimerLook, After: d})
}

// look is the periodic look at an ignored network, passive: the LOOPs
// heard on it tell whether its master is still there and which time
// source it serves. The network is taken back into use (its machine
// starts, and settle decides once it finds the master) when no master is
// heard, when the host has no time source of its own, or when the master
// (the sender of the latest LOOP) serves another source than this host's
// and the rules would have the host switch to it or take the network
// over. A master heard for less than a round is asked for its source
// (and this host's own master, if need be), and decided about at the
// answers, else left for the next look: its LOOPs have not told its time
// source yet.
func (h *Host) look(j int) {
	if h.nets[j].mode != netIgnored {
		return
	}
	why, pending := h.lookReason(j)
	if why == "" {
		// Still waiting, if the sources are not known yet.
		h.nets[j].waiting = h.nets[j].waiting && pending.Addr.IsValid()
		if pending.Addr.IsValid() {
			h.askSources(j, pending)
		}
		h.armLook(j)
		return
	}
	h.resume(j, why)
}

// resume takes ignored network j back into use: its machine starts
// afresh.
func (h *Host) resume(j int, why string) {
	h.unignore(j, why)
	h.stepMachine(j, Start{})
}

// unignore marks network j in use again, and says why.
func (h *Host) unignore(j int, why string) {
	h.nets[j].mode, h.nets[j].waiting, h.nets[j].waitFor = netRunning, false, Peer{}
	h.emit(j, Ignored{On: false, Reason: why})
}

// alone: this host follows no master and masters no network, so it has
// no time source of its own to weigh others against.
func (h *Host) alone() bool { return h.slave < 0 && h.firstMastered() < 0 }

// sourceOrder places another master's time source against this host's.
type sourceOrder int

const (
	sameTree       sourceOrder = iota // one tree: ours, or downstream of us
	theirsOutranks                    // its source's name is lower
	oursOutranks
)

// compareSource places master q of network j against this host: the
// order, q's time source r and ours, mine.
func (h *Host) compareSource(j int, q Peer) (order sourceOrder, r, mine string) {
	mine = h.root()
	r, _ = h.rootAt(j, q.Addr, q.Name)
	switch {
	case r == h.name || r == mine || h.downstream(j, q.Addr):
		return sameTree, r, mine
	case r < mine:
		return theirsOutranks, r, mine
	}
	return oursOutranks, r, mine
}

// outranksMsg and outrankedMsg say why a network's master q was followed
// or taken over, by the time sources compareSource compared.
func outranksMsg(q Peer, r, mine string) string {
	return "master " + q.Name + " with time source " + r + ", which outranks " + mine
}

func outrankedMsg(q Peer, r, mine string) string {
	return "master " + q.Name + " with time source " + r + ", outranked by " + mine
}

// lookReason says why network j should be taken back into use, or "";
// pending is its master (the sender of its latest LOOP) when that has not
// been heard long enough (or this host's own) to know their time sources,
// else zero.
func (h *Host) lookReason(j int) (why string, pending Peer) {
	n := h.nets[j]
	if h.alone() {
		return "no time source elsewhere", Peer{}
	}
	if !n.cfg.MayBeMaster {
		return "", Peer{} // it could neither serve j nor leave its slavenet for it
	}
	a, name, ok := h.latestLoop(j)
	if !ok {
		if h.followsSpanner(j) {
			return "", Peer{} // the master of j's link holds j: span.go
		}
		return "no master heard" + h.lastLoopAgo(j), Peer{}
	}
	q := Peer{Name: name, Addr: a}
	if h.spanOutranks(j, q) {
		return spanWhy(q), Peer{}
	}
	if !h.known(j, a) || !h.ownRootKnown() {
		return "", Peer{Name: name, Addr: a}
	}
	if h.linkOutranks(j, q) {
		return linkWhy(q), Peer{}
	}
	switch order, r, mine := h.compareSource(j, q); order {
	case theirsOutranks:
		return outranksMsg(q, r, mine), Peer{}
	case oursOutranks:
		return outrankedMsg(q, r, mine), Peer{}
	}
	return "", Peer{}
}

// lastLoopAgo says, for a log, how long ago network j last heard a LOOP,
// if it heard one.
func (h *Host) lastLoopAgo(j int) string {
	var last time.Time
	for _, byName := range h.nets[j].loops {
		for _, l := range byName {
			if l.at.After(last) {
				last = l.at
			}
		}
	}
	if last.IsZero() {
		return ""
	}
	return fmt.Sprintf(" (the last LOOP %v ago)", h.now.Sub(last).Round(time.Millisecond))
}

// latestLoop is the sender of the latest LOOP heard on network j within
// the window, with the name of its own LOOP (or of the latest), or false.
func (h *Host) latestLoop(j int) (from netip.AddrPort, name string, ok bool) {
	n := h.nets[j]
	var at time.Time
	for a, byName := range n.loops {
		for _, l := range byName {
			if h.now.Sub(l.at) > n.cfg.loopWindow() {
				continue
			}
			if !ok || l.at.After(at) || (l.at.Equal(at) && a.Compare(from) < 0) {
				from, at, ok = a, l.at, true
			}
		}
	}
	if !ok {
		return from, "", false
	}
	ls := h.freshLoops(j, from, n.cfg.loopWindow())
	return from, ls[0].Name, true
}

package election

import (
	"fmt"
	"math/bits"
	"net/netip"
	"time"

	"github.com/timed-project/timed/tsp"
)

// References. A reference host (Config.Reference; the daemon's
// --reference kernel) is one whose clock another program keeps on UTC
// (chrony, ntpd). It may be master only while it claims to be a
// reference: the runtime tells the Host so (SetReference) as the kernel's
// state goes good and bad, with its own hysteresis. While it claims:
//
//   - it announces the claim (TellReference, our version-2
//     tsp.ExtReference, broadcast on the network) before each MASTERUP,
//     LOOP, MASTERACK and QUIT it sends there, at most once per
//     announceGap except before MASTERUP and QUIT;
//   - a claim heard (ReferenceHeard) from a trusted address stands for a
//     round and a half (rootWindow), like a LOOP's time source;
//   - two masters are ordered by their claims before their time sources
//     and names (rivalRank): a claiming reference outranks a host that
//     does not claim; of two, the smaller maxerror (by powers of two of a
//     millisecond, refBucket, so that maxerrors that wander a little
//     between the programs' updates do not swap the order), then the
//     lower name;
//   - a reference that follows a master it outranks takes its network
//     over at once (its MASTERUP and QUIT follow its announcement), and
//     one that has no master when its claim begins holds an election at
//     once;
//   - on a gateway, a claim outranks the time sources too (settle): a
//     network whose master it outranks is taken over. Between two
//     networks whose masters are not references, the sources decide as
//     before.
//
// When it stops claiming it gives up being master: where it is master or
// candidate it becomes a slave without a master, and may not be master
// again until it claims again. Where it was master it says so first
// (TellResign, our version-2 tsp.ExtResign): its former slaves drop it
// and its claim at once, and those that may be master draw a delay from
// the cold start's range, scaled by its slave count, the first to run
// out becoming master (Machine.masterResigned); the others follow its
// MASTERUP, or another reference's. BSD's daemons drop the resignation:
// they follow the new master's MASTERUP, or, with no daemon of ours to
// take over, elect one when their election timers run out. A
// reference's machine never takes a correction into account in this
// package's sense: the runtime ignores AdjustClock and SetClock, its
// clock being another program's.
//
// BSD's daemons, and ours with --bsd-compat, drop version 2 unread: they
// see an ordinary master, whose MASTERUP and QUIT they take as any
// other's; a master that has not heard the claim and QUITs the reference
// is refused (RefusedOutranked) and told to QUIT in turn
// (TestReferenceBSDPeers). A claim heard counts from the Host's latest
// step: ReferenceOf between steps may show one up to that step's age
// older than its window.

// SetReference is what the runtime tells the Host of this host's claim
// (Host.SetReference): Claim while the clock is synchronised within the
// configured bound, with MaxError the kernel's maxerror.
type SetReference struct {
	Claim    bool
	MaxError time.Duration
}

// TellReference announces this host's claim on the network: the runtime
// broadcasts tsp.ExtReference carrying MaxError (tsp.ReferencePayload).
// A runtime that speaks no version 2 drops it.
type TellReference struct {
	MaxError time.Duration
}

// ReferenceHeard is a tsp.ExtReference received on this network: the
// host Name at From claims to be a reference with MaxError.
type ReferenceHeard struct {
	From     netip.AddrPort
	Name     string
	MaxError time.Duration
}

// TellResign announces that this host, master of the network, gives it
// up (a reference whose claim ended): the runtime broadcasts
// tsp.ExtResign carrying Slaves (tsp.ResignPayload). A runtime that
// speaks no version 2 drops it.
type TellResign struct {
	Slaves int
}

// ResignHeard is a tsp.ExtResign received on this network: the master
// Name at From gives the network up; it had Slaves slaves.
type ResignHeard struct {
	From   netip.AddrPort
	Name   string
	Slaves int
}

func (TellResign) isAction()        {}
func (ResignHeard) isEvent()        {}
func (a TellResign) String() string { return fmt.Sprintf("tell-resign slaves=%d", a.Slaves) }
func (e ResignHeard) String() string {
	return fmt.Sprintf("resign-heard %s (%v) slaves=%d", e.Name, e.From, e.Slaves)
}

func (TellReference) isAction()        {}
func (SetReference) isEvent()          {}
func (ReferenceHeard) isEvent()        {}
func (a TellReference) String() string { return fmt.Sprintf("tell-reference maxerror=%v", a.MaxError) }
func (e SetReference) String() string {
	return fmt.Sprintf("set-reference claim=%v maxerror=%v", e.Claim, e.MaxError)
}
func (e ReferenceHeard) String() string {
	return fmt.Sprintf("reference-heard %s (%v) maxerror=%v", e.Name, e.From, e.MaxError)
}

// heardRef is a claim heard on a network.
type heardRef struct {
	name   string
	maxErr time.Duration
	at     time.Time
}

// maxRefs bounds a network's tables of claims and of spans heard
// (boundedPut): forged announcements from ever new addresses must not
// grow them.
const maxRefs = 64

// refBucket is how maxerrors compare: by powers of two of a millisecond
// (below 1 ms all are equal).
func refBucket(d time.Duration) int { return bits.Len64(uint64(max(d, 0) / time.Millisecond)) }

// Claim is this host's claim to be a reference, as the Host holds it.
func (h *Host) Claim() (claiming bool, maxError time.Duration) { return h.claim, h.claimErr }

// HeardReference is a claim heard: who claims, the maxerror it
// announced, and when it was heard (the time of the Host's step).
type HeardReference struct {
	Name     string
	MaxError time.Duration
	At       time.Time
}

// ReferenceOf is the claim heard from the host at from on network i, if
// one stands.
func (h *Host) ReferenceOf(i int, from netip.AddrPort) (HeardReference, bool) {
	if i < 0 || i >= len(h.nets) {
		return HeardReference{}, false
	}
	r, ok := h.nets[i].refs[from]
	if !ok || h.now.Sub(r.at) > h.nets[i].cfg.rootWindow() {
		return HeardReference{}, false
	}
	return HeardReference{Name: r.name, MaxError: r.maxErr, At: r.at}, true
}

// SetReference tells the Host whether this host claims to be a reference
// now (Config.Reference hosts only; others ignore it). It returns what
// to do, as Step.
func (h *Host) SetReference(now time.Time, e SetReference) []NetAction {
	h.now = now
	if !h.reference {
		return nil
	}
	was := h.claim
	h.claim, h.claimErr = e.Claim, max(e.MaxError, 0)
	for i, n := range h.nets {
		n.cfg.MayBeMaster = e.Claim
		n.m.cfg.MayBeMaster = e.Claim
		if was && !e.Claim && n.mode == netRunning {
			h.with(i, func(m *Machine) { m.resign("no longer a reference") })
		}
		if !was && e.Claim && n.mode == netRunning && n.m.State() == Slave && !n.m.haveMaster {
			h.with(i, func(m *Machine) { m.becomeCandidate("a reference with no master") })
		}
	}
	h.reconcile()
	return h.finish()
}

// referenceHeard records a claim heard on network i from a trusted
// address.
func (h *Host) referenceHeard(i int, e ReferenceHeard) {
	n := h.nets[i]
	if n.fromSelf(e.From) || !n.m.isTrusted(e.From) || !tsp.ValidName(e.Name) {
		return
	}
	boundedPut(n.refs, e.From, heardRef{name: e.Name, maxErr: max(e.MaxError, 0), at: h.now}, h.now, n.cfg.rootWindow(),
		func(r heardRef) time.Time { return r.at })
}

// boundedPut stores v under a in m, a table of at most maxRefs entries:
// when it is full and a is new, the entries older than window (by at) go
// first, and if none does, v is not stored. Forged announcements from
// ever new addresses must not grow it.
func boundedPut[V any](m map[netip.AddrPort]V, a netip.AddrPort, v V, now time.Time, window time.Duration, at func(V) time.Time) {
	if _, ok := m[a]; !ok && len(m) >= maxRefs {
		for k, old := range m {
			if now.Sub(at(old)) > window {
				delete(m, k)
			}
		}
		if len(m) >= maxRefs {
			return
		}
	}
	m[a] = v
}

// resignHeard takes a master's resignation heard on network i: its claim,
// if it made one, ends at once (its slaves no longer say they follow
// UTC), and the machine that followed it looks for another master
// (Machine.masterResigned).
func (h *Host) resignHeard(i int, e ResignHeard) {
	n := h.nets[i]
	if n.fromSelf(e.From) || !n.m.isTrusted(e.From) {
		return
	}
	delete(n.refs, e.From)
	if n.mode == netRunning {
		h.stepMachine(i, e)
	}
}

// refRank orders this host against the master at from on network i by
// their claims: −1 when ours outranks theirs, +1 when theirs outranks
// ours, 0 when neither claims (the time sources and names decide).
func (h *Host) refRank(i int, from netip.AddrPort, name string) int {
	r, theirs := h.ReferenceOf(i, from)
	theirs = theirs && r.Name == name
	theirErr := r.MaxError
	switch {
	case !h.claim && !theirs:
		return 0
	case !theirs:
		return -1
	case !h.claim:
		return 1
	}
	switch a, b := refBucket(h.claimErr), refBucket(theirErr); {
	case a < b:
		return -1
	case a > b:
		return 1
	case h.name < name:
		return -1
	case h.name > name:
		return 1
	}
	return 0
}

// claimNetworks has a claiming reference take over every network where
// it follows a master it outranks (after every step). A slave with no
// master holds an election when the claim begins (SetReference), not at
// every step: a refused candidacy must back off as any other.
//
// A host that spans a link (span.go) does the same where it follows a
// master that does not span, or one it outranks on a link whose other
// family it masters.
func (h *Host) claimNetworks() {
	for i, n := range h.nets {
		if n.mode != netRunning || (!h.claim && !n.span()) {
			continue
		}
		m := n.m
		if st := m.State(); st != Slave && st != Accept {
			continue
		}
		q, ok := m.Master()
		if !ok {
			continue
		}
		switch r := h.refRank(i, q.Addr, q.Name); {
		case h.claim && r < 0:
			h.takeOver(i, q, "a reference outranks master "+q.Name)
		case r != 0 || !n.cfg.MayBeMaster:
		case h.spanRank(i, q.Addr, q.Name) < 0:
			h.takeOver(i, q, spanWhy(q))
		case h.linkOutranks(i, q):
			h.takeOver(i, q, linkWhy(q))
		}
	}
	if h.slave >= 0 && !h.follows(h.slave) {
		h.slave = -1 // it took its slavenet over: it is its own time source
	}
}

// announceGap is the least time between two announcements on a network
// before anything but MASTERUP and QUIT.
func (c Config) announceGap() time.Duration { return c.Retransmit[0] / 2 }

// announced puts the announcements due before the packets out sends
// (finish): a claiming reference's TellReference, then, on a network the
// host spans, TellSpan (span.go), each before every MASTERUP and QUIT, and
// before a LOOP or MASTERACK at most once per announceGap. out comes back
// as it is where none is due.
func (h *Host) announced(out []NetAction) []NetAction {
	var with []NetAction
	for i, a := range out {
		if s, ok := a.Action.(Send); ok {
			n := h.nets[a.Net]
			var due [2]Action
			tell := due[:0]
			if h.claim && h.announceDue(n, s.Packet.Type, &n.toldRef) {
				tell = append(tell, TellReference{MaxError: h.claimErr})
			}
			if n.span() && h.announceDue(n, s.Packet.Type, &n.toldSpan) {
				tell = append(tell, TellSpan{})
			}
			if len(tell) > 0 && with == nil {
				with = append(make([]NetAction, 0, len(out)+2), out[:i]...)
			}
			for _, t := range tell {
				with = append(with, NetAction{Net: a.Net, Action: t})
			}
		}
		if with != nil {
			with = append(with, a)
		}
	}
	if with == nil {
		return out
	}
	return with
}

// announceDue reports whether an announcement goes before a packet of
// type t on network n, told being when the last went there (set to now
// when one is due): before every MASTERUP and QUIT, and before a LOOP or
// MASTERACK once per announceGap.
func (h *Host) announceDue(n *hostNet, t tsp.Type, told *time.Time) bool {
	switch {
	case t == tsp.MasterUp || t == tsp.Quit,
		(t == tsp.Loop || t == tsp.MasterAck) && h.now.Sub(*told) >= n.cfg.announceGap():
		*told = h.now
		return true
	}
	return false
}

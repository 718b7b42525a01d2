package election

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/timed-project/timed/tsp"
)

// Asking a master for its time source. A Host that must know which source
// a master serves before it decides (settle, look) would otherwise wait
// for the master's LOOPs to tell it, a whole round of them; it asks
// instead (AskSource, our version-2 tsp.ExtSourceReq), and the master
// answers at once with the source its LOOPs would tell (TellSource,
// tsp.ExtSource). An answer counts only from the address asked, with the
// sequence number asked, within a round of asking; it stands for the
// master's LOOPs until they have told the source themselves (heardLong),
// for a round and a half (rootWindow). BSD's daemons drop version 2 unread
// and never answer: the LOOPs decide then, as before.

// AskSource asks the master To on this network which time source it
// serves: the runtime sends tsp.ExtSourceReq with Seq, unicast, and hands
// the answer back as SourceAnswer. A runtime that speaks no version 2
// drops it.
type AskSource struct {
	To  Peer
	Seq uint16
}

// TellSource answers a SourceQuery: the runtime sends tsp.ExtSource to To
// with the query's Seq, Source and Hops (tsp.SourcePayload).
type TellSource struct {
	To     netip.AddrPort
	Seq    uint16
	Source string
	Hops   int // gateways between this host and Source: 0 when it is its own source
}

// SourceQuery is a tsp.ExtSourceReq received on this network.
type SourceQuery struct {
	From netip.AddrPort
	Seq  uint16
}

// SourceAnswer is a tsp.ExtSource received on this network: the sender
// serves Source, Hops gateways away (the payload decoded).
type SourceAnswer struct {
	From   netip.AddrPort
	Seq    uint16
	Source string
	Hops   int
}

func (AskSource) isAction()   {}
func (TellSource) isAction()  {}
func (SourceQuery) isEvent()  {}
func (SourceAnswer) isEvent() {}
func (a AskSource) String() string {
	return fmt.Sprintf("ask-source %s (%v) seq=%d", a.To.Name, a.To.Addr, a.Seq)
}
func (a TellSource) String() string {
	return fmt.Sprintf("tell-source %s hops=%d to=%v seq=%d", a.Source, a.Hops, a.To, a.Seq)
}
func (e SourceQuery) String() string {
	return fmt.Sprintf("source-query from=%v seq=%d", e.From, e.Seq)
}
func (e SourceAnswer) String() string {
	return fmt.Sprintf("source-answer %s hops=%d from=%v seq=%d", e.Source, e.Hops, e.From, e.Seq)
}

// maxAsked bounds, per network, the questions outstanding and the answers
// kept: a host asks only the master it would follow there (settle, look),
// so a few cover a change of master while one is outstanding.
const maxAsked = 4

type askedSource struct {
	seq uint16
	at  time.Time
}

type toldSource struct {
	source string
	hops   int
	at     time.Time
}

// askWindow is how long a question waits for its answer: a round. A later
// answer is ignored, and the LOOPs have told the source by then.
func (c Config) askWindow() time.Duration { return c.SyncInterval }

// ask asks the master p on network i for its time source, unless its
// source is known, a question to it is outstanding, or too many are.
func (h *Host) ask(i int, p Peer) {
	n := h.nets[i]
	if !p.Addr.IsValid() || h.known(i, p.Addr) {
		return
	}
	if a, ok := n.asked[p.Addr]; ok && h.now.Sub(a.at) <= n.cfg.askWindow() {
		return
	}
	for addr, a := range n.asked {
		if h.now.Sub(a.at) > n.cfg.askWindow() {
			delete(n.asked, addr)
		}
	}
	if len(n.asked) >= maxAsked {
		return // the LOOPs will tell
	}
	// The network's machine's sequence, which starts at random (BSD): a
	// blind forger of the answer, from the master's address, must guess it.
	seq := n.m.nextSeq()
	n.asked[p.Addr] = askedSource{seq: seq, at: h.now}
	h.emit(i, AskSource{To: p, Seq: seq})
}

// askSources asks what a decision about network j, whose master is q,
// waits for: q's source and, where it has a slavenet, this host's own.
// The answers settle the network as soon as both are known (lookIfKnown).
func (h *Host) askSources(j int, q Peer) {
	h.nets[j].waitFor = q
	h.ask(j, q)
	if h.slave >= 0 && !h.ownRootKnown() {
		if mp, ok := h.nets[h.slave].m.Master(); ok {
			h.ask(h.slave, mp)
		}
	}
}

// told is the answer of the master at a on network i, if one came within
// the last round and a half.
func (h *Host) told(i int, a netip.AddrPort) (toldSource, bool) {
	n := h.nets[i]
	t, ok := n.told[a]
	return t, ok && h.now.Sub(t.at) <= n.cfg.rootWindow()
}

// known reports whether the time source of the master at a on network i
// is known: its LOOPs have told it (heardLong), or it answered.
func (h *Host) known(i int, a netip.AddrPort) bool {
	if h.heardLong(i, a) {
		return true
	}
	_, ok := h.told(i, a)
	return ok
}

// sourceAnswer takes an answer that was asked for, from the address asked;
// anything else is dropped. Its source must be a name a LOOP could carry,
// within LOOP range.
func (h *Host) sourceAnswer(i int, e SourceAnswer) {
	n := h.nets[i]
	a, ok := n.asked[e.From]
	if !ok || a.seq != e.Seq || h.now.Sub(a.at) > n.cfg.askWindow() {
		return
	}
	if e.Source == "" || len(e.Source) > tsp.MaxNameLen || !tsp.ValidName(e.Source) || e.Hops < 0 || e.Hops >= LoopHops {
		return
	}
	delete(n.asked, e.From)
	if len(n.told) >= maxAsked {
		h.sweepTold(i)
	}
	n.told[e.From] = toldSource{source: e.Source, hops: e.Hops, at: h.now}
	h.lookIfKnown()
}

// sweepTold forgets expired answers, and the oldest while there are still
// too many.
func (h *Host) sweepTold(i int) {
	n := h.nets[i]
	for a := range n.told {
		if _, ok := h.told(i, a); !ok {
			delete(n.told, a)
		}
	}
	for len(n.told) >= maxAsked {
		var oldest netip.AddrPort
		for a, t := range n.told {
			if !oldest.IsValid() || t.at.Before(n.told[oldest].at) || (t.at.Equal(n.told[oldest].at) && a.Compare(oldest) < 0) {
				oldest = a
			}
		}
		delete(n.told, oldest)
	}
}

// sourceQuery answers a question from a peer on network i with the time
// source this host serves there: only where it is master, to a trusted
// peer, and only when it knows its source (a submaster whose master's
// source is not known yet answers nothing: the asker's LOOPs will tell).
func (h *Host) sourceQuery(i int, e SourceQuery) {
	n := h.nets[i]
	if !h.masters(i) || !n.m.Trusted(e.From) || n.fromSelf(e.From) {
		return
	}
	src, hops, ok := h.served()
	if !ok {
		return
	}
	h.emit(i, TellSource{To: e.From, Seq: e.Seq, Source: src, Hops: hops})
}

// served is the time source this host serves and how many gateways away
// it is, when known.
func (h *Host) served() (source string, hops int, ok bool) {
	if h.slave < 0 {
		return h.name, 0, true
	}
	mp, ok := h.nets[h.slave].m.Master()
	if !ok || !h.known(h.slave, mp.Addr) {
		return "", 0, false
	}
	r, d := h.sourceAt(h.slave, mp.Addr, mp.Name)
	if d+1 >= LoopHops {
		return "", 0, false // beyond LOOP range
	}
	return r, d + 1, true
}

// resumeWaiting decides about network j, ignored until the time sources
// were known (settle, look), now that an answer has told them: j's master
// q serving a source that ours outranks is taken over at once; one serving
// a source that outranks ours is followed (the machine starts and finds
// it, and settle makes j the slavenet); one serving ours stays ignored.
func (h *Host) resumeWaiting(j int) {
	n := h.nets[j]
	q := n.waitFor
	n.waitFor = Peer{}
	order, r, mine := h.compareSource(j, q)
	alone := h.alone()
	switch {
	case !alone && order == sameTree:
		n.waiting = false // one tree: j stays ignored, looked at as before
	case alone || order == theirsOutranks:
		h.emit(j, CancelTimer{ID: TimerLook})
		h.resume(j, outranksMsg(q, r, mine))
	default:
		h.emit(j, CancelTimer{ID: TimerLook})
		h.unignore(j, outrankedMsg(q, r, mine))
		h.takeOver(j, q, "our time source "+mine+" outranks "+r)
	}
}

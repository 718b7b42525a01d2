package election

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/timed-project/timed/tsp"
)

// Links with two families. A dual-stack daemon that serves both families
// of one link (the daemon's --family both) runs them as two networks of
// its Host, with the same non-zero Config.Link: it spans the link. The
// rules (the package documentation, "One master per link", gives the
// argument):
//
//   - it announces that it spans (TellSpan, our version-2 tsp.ExtSpan,
//     broadcast on the network) before each MASTERUP, LOOP, MASTERACK and
//     QUIT it sends on either family, at most once per announceGap
//     except before MASTERUP and QUIT; an announcement heard
//     (SpanHeard) from a trusted address stands as long as a LOOP keeps a
//     master alive (loopWindow, two and a half rounds): a spanning master
//     announces before each LOOP, so its span lapses only when its LOOPs
//     do, and a round that runs long (measurements that wait for their
//     deadlines) does not have its spanning slaves take it over;
//   - two masters on one network are ordered by references first
//     (reference.go), then by spanning: a host that spans the link
//     outranks one that does not (spanRank), then, between two that span
//     or two that do not, by their time sources and names as before;
//   - a spanning host that follows a master it outranks takes its
//     network over at once (claimNetworks, settle), as a reference does;
//   - a spanning host that masters one family of its link and finds on
//     the other a master it outranks by sources or names, even one that
//     takes its time from it (which BSD's rules would leave alone, the
//     same tree), takes that family over too (linkTakeOver), so that the
//     link has one master and not a master and its submaster.
//
// A spanning slave follows its master on one family (its slavenet) and
// ignores the other (BSD IGNORE: the same tree), whose machine, stopped,
// acknowledges nothing: the master drops it from that family's list after
// LostHost rounds, and until then measures it twice, once in a vote and
// once in a dictated round whose correction the slave never applies.

// SpanHeard is a tsp.ExtSpan received on this network: the host Name at
// From serves both families of this link.
type SpanHeard struct {
	From netip.AddrPort
	Name string
}

// TellSpan announces on the network that this host serves both families
// of its link: the runtime broadcasts tsp.ExtSpan. A runtime that speaks
// no version 2 drops it.
type TellSpan struct{}

func (SpanHeard) isEvent()         {}
func (TellSpan) isAction()         {}
func (TellSpan) String() string    { return "tell-span" }
func (e SpanHeard) String() string { return fmt.Sprintf("span-heard %s (%v)", e.Name, e.From) }

// heardSpan is an announcement heard on a network.
type heardSpan struct {
	name string
	at   time.Time
}

// Spans reports whether network i is one family of a link whose other
// family this host serves too (Config.Link).
func (h *Host) Spans(i int) bool { return i >= 0 && i < len(h.nets) && h.nets[i].span() }

// Siblings are the other networks of network i's link (none when it does
// not span).
func (h *Host) Siblings(i int) []int {
	if i < 0 || i >= len(h.nets) {
		return nil
	}
	return slices.Clone(h.nets[i].siblings)
}

// span reports whether the network is one family of a link the host
// spans.
func (n *hostNet) span() bool { return len(n.siblings) > 0 }

// SpansFrom reports whether the host at from announced on network i, in
// the last two and a half rounds, that it spans the link; name is the name it
// announced under.
func (h *Host) SpansFrom(i int, from netip.AddrPort) (name string, ok bool) {
	if i < 0 || i >= len(h.nets) {
		return "", false
	}
	s, ok := h.nets[i].spans[from]
	if !ok || h.now.Sub(s.at) > h.nets[i].cfg.loopWindow() {
		return "", false
	}
	return s.name, true
}

// markLinks sets each network's siblings: the host's other networks
// with its non-zero Config.Link.
func (h *Host) markLinks() {
	for i, n := range h.nets {
		for j, o := range h.nets {
			if i != j && n.cfg.Link != 0 && n.cfg.Link == o.cfg.Link {
				n.siblings = append(n.siblings, j)
			}
		}
	}
}

// spanHeard records an announcement heard on network i from a trusted
// address, in a table bounded as the references' is.
func (h *Host) spanHeard(i int, e SpanHeard) {
	n := h.nets[i]
	if n.fromSelf(e.From) || !n.m.isTrusted(e.From) || !tsp.ValidName(e.Name) || e.Name == h.name {
		return
	}
	boundedPut(n.spans, e.From, heardSpan{name: e.Name, at: h.now}, h.now, n.cfg.loopWindow(),
		func(s heardSpan) time.Time { return s.at })
}

// spanRank orders this host against the master at from on network i by
// spanning: −1 when this host spans the link and the master has not
// announced that it does, +1 the other way round, 0 when both or neither
// span (the time sources and names decide).
func (h *Host) spanRank(i int, from netip.AddrPort, name string) int {
	mine := h.nets[i].span()
	n, ok := h.SpansFrom(i, from)
	theirs := ok && n == name
	switch {
	case mine == theirs:
		return 0
	case mine:
		return -1
	}
	return 1
}

// masterOutranks is this host's rank against master q on network i before
// the time sources: references, then spanning.
func (h *Host) masterOutranks(i int, q Peer) int {
	if r := h.refRank(i, q.Addr, q.Name); r != 0 {
		return r
	}
	return h.spanRank(i, q.Addr, q.Name)
}

// spanOutranks reports whether this host outranks master q on network i
// by spanning the link, references being equal (none claims, or both
// claim alike).
func (h *Host) spanOutranks(i int, q Peer) bool {
	return h.refRank(i, q.Addr, q.Name) == 0 && h.spanRank(i, q.Addr, q.Name) < 0
}

// spanWhy and linkWhy say why this host takes master q's network over
// (or would): it spans the link and q does not (spanOutranks); it masters
// the link's other family and outranks q (linkOutranks).
func spanWhy(q Peer) string { return "a host on both families of the link outranks master " + q.Name }
func linkWhy(q Peer) string {
	return "one master per link: we master its other family and outrank " + q.Name
}

// mastersSibling reports whether this host masters another family of
// network i's link.
func (h *Host) mastersSibling(i int) bool {
	for _, k := range h.nets[i].siblings {
		if h.masters(k) {
			return true
		}
	}
	return false
}

// linkOutranks reports whether this host, master of another family of
// network i's link, outranks master q of network i for that link: by
// references and spanning first, then by time sources, then by names,
// the lower winning. A master that takes its time from this host (the
// same tree) is outranked when its name is higher: the link must have one
// master, not a master and its submaster.
func (h *Host) linkOutranks(i int, q Peer) bool {
	if !h.mastersSibling(i) || !h.nets[i].cfg.MayBeMaster {
		return false
	}
	if r := h.masterOutranks(i, q); r != 0 {
		return r < 0
	}
	switch order, _, _ := h.compareSource(i, q); order {
	case oursOutranks:
		return true
	case theirsOutranks:
		return false
	}
	return h.name < q.Name
}

// followsSpanner reports whether this host's slavenet is another family
// of network j's link and its master there announced that it spans the
// link: that master holds j as well (it takes over any master it meets
// there), so a quiet spell of its LOOPs on j, which an ignored j hears
// only passively, is no reason to take j back into use.
func (h *Host) followsSpanner(j int) bool {
	if h.slave < 0 || !slices.Contains(h.nets[j].siblings, h.slave) {
		return false
	}
	mp, ok := h.nets[h.slave].m.Master()
	if !ok {
		return false
	}
	name, ok := h.SpansFrom(h.slave, mp.Addr)
	return ok && name == mp.Name
}

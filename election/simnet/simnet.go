// Package simnet is a deterministic network simulator for the election
// state machine (and, later, for clocksync and the ring elections): N
// daemons each running a real election.Host (one election.Machine per
// network it is on), one virtual clock (internal/vtime), one seeded
// random source, and networks with per-link latency distributions, loss,
// duplication, reordering and partitions that are set and healed. Nodes
// crash (losing every bit of state) and restart.
//
// A Net starts with one network (network 0), on which Add puts every
// node: the single-network simulator, where a node's Host is its Machine.
// AddNetwork adds broadcast domains and AddOn puts a node on several of
// them, one address on each: a gateway (multi.go).
//
// Every run is a pure function of its seed and its script: nothing reads
// the wall clock, nothing sleeps, nothing runs in another goroutine. After
// every step the Checker (check.go) verifies the invariants of issue 3.
package simnet

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/internal/vtime"
	"github.com/timed-project/timed/tsp"
)

// Port is the TSP port every simulated daemon uses (timed/udp, 525).
const Port = 525

// Shape is a latency distribution between a link's MinLatency and
// MaxLatency.
type Shape uint8

const (
	// Uniform latencies over [MinLatency, MaxLatency].
	Uniform Shape = iota
	// Exponential latencies: MinLatency plus an exponential tail with mean
	// (MaxLatency−MinLatency)/4, cut at MaxLatency (most packets fast, a
	// few slow, as on a loaded LAN).
	Exponential
)

// Link describes one direction of the path between two nodes.
type Link struct {
	// MinLatency and MaxLatency bound the latency distribution.
	MinLatency, MaxLatency time.Duration
	// Shape is the distribution between them (Uniform by default).
	Shape Shape
	// Loss is the probability that a packet is dropped.
	Loss float64
	// Dup is the probability that a packet is delivered twice (the copy
	// with its own latency).
	Dup float64
	// Reorder is the probability that a packet is held back an extra
	// ReorderDelay, so that later packets overtake it.
	Reorder      float64
	ReorderDelay time.Duration
}

func (l Link) latency(r *rand.Rand) time.Duration {
	span := l.MaxLatency - l.MinLatency
	if span <= 0 {
		return l.MinLatency
	}
	if l.Shape == Exponential {
		return l.MinLatency + min(span, time.Duration(r.ExpFloat64()*float64(span)/4))
	}
	return l.MinLatency + time.Duration(r.Int64N(int64(span)+1))
}

// MaxDelay is the longest a packet that is delivered can take.
func (l Link) MaxDelay() time.Duration { return l.MaxLatency + l.ReorderDelay }

// DefaultLink is a quiet LAN: 1–5 ms, no faults.
var DefaultLink = Link{MinLatency: time.Millisecond, MaxLatency: 5 * time.Millisecond}

// Stats counts datagrams. A broadcast is one send and N−1 deliveries.
// The version-2 extensions (a Host's questions for time sources) are
// counted apart, by kind.
type Stats struct {
	Sent         map[tsp.Type]int
	Delivered    map[tsp.Type]int
	SentExt      map[tsp.ExtKind]int
	DeliveredExt map[tsp.ExtKind]int
	Lost         int
}

// Total is the number of datagrams sent.
func (s *Stats) Total() int { return sum(s.Sent) + sum(s.SentExt) }

// TotalDelivered is the number of datagrams delivered.
func (s *Stats) TotalDelivered() int { return sum(s.Delivered) + sum(s.DeliveredExt) }

func sum[K comparable](m map[K]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

func newStats() Stats {
	return Stats{Sent: map[tsp.Type]int{}, Delivered: map[tsp.Type]int{},
		SentExt: map[tsp.ExtKind]int{}, DeliveredExt: map[tsp.ExtKind]int{}}
}

// Node is one simulated daemon.
type Node struct {
	ID   int
	Name string
	// Addr is the node's address on its first network.
	Addr netip.AddrPort
	// Cfg is the node's configuration, on every network it is on (simnet
	// sets Network and Addr).
	Cfg election.Config
	// Nets are the networks the node is on (indexes into Net.Networks),
	// Addrs its address on each; the host's network i is Nets[i].
	Nets  []int
	Addrs []netip.AddrPort
	// H is the node's host, M the machine of its first network; nil while
	// the node is down.
	H  *election.Host
	M  *election.Machine
	Up bool
	// NoExt: the node drops version-2 datagrams unread and sends none, as
	// BSD's daemon (and ours with --bsd-compat): it neither asks masters
	// for their time sources nor answers them.
	NoExt bool

	// Claim is what the node's runtime last told its host of its claim
	// to be a reference (SetReference; Config.Reference nodes), told
	// again at every start.
	Claim election.SetReference

	inc    int // incarnation: bumped by every crash, so stale events die
	timers map[timerKey]*vtime.Event
	// Clock actions received, for tests of the clock interface.
	Adjusts, Sets int
	// Offset is the node's simulated clock offset, kept only when the
	// Net's SimClocks is set.
	Offset time.Duration
}

type timerKey struct {
	net int
	id  election.TimerID
}

// Network is one broadcast domain.
type Network struct {
	ID   int
	Name string
	// Members are the nodes on it, in ID order.
	Members []*Node
	group   map[int]int // node ID → partition group
}

// local is the index of network id among the node's networks, or -1.
func (nd *Node) local(id int) int {
	for i, g := range nd.Nets {
		if g == id {
			return i
		}
	}
	return -1
}

// Net is the simulated network (or several).
type Net struct {
	S        *vtime.Scheduler
	Nodes    []*Node
	Networks []*Network
	Stats    Stats

	// SimClocks keeps a clock offset per node: AdjustClock moves it,
	// SetClock copies the master's, and the default sync round (when
	// OnSyncRound is nil) corrects every slave to its master's offset,
	// with Own = 0. Tests of the time flowing through gateways set it.
	SimClocks bool

	rng     *rand.Rand
	seed    uint64
	link    Link
	links   map[[2]int]Link
	byAddr  map[netip.AddrPort]nodeAddr
	start   time.Time
	tracing func(string)

	// OnSyncRound produces the clock layer's answer to a master's sync
	// round. The default (election.ZeroResult) measures nothing and
	// corrects by zero.
	OnSyncRound func(n *Node, r election.SyncRound) election.SyncResult
	// OnStep runs after every node step (the Checker hooks in here).
	OnStep func()
	// OnAction sees every action of every node, before it is applied.
	OnAction func(n *Node, a election.Action)
	// OnNetAction is OnAction with the host's network index of the action
	// (Node.Nets[net] is the network).
	OnNetAction func(n *Node, net int, a election.Action)

	// lastFault is the time of the last crash, restart, partition change
	// or link change that may lose packets.
	lastFault time.Time
}

// New returns an empty network whose randomness all derives from seed.
func New(seed uint64) *Net {
	n := &Net{
		S:      vtime.New(vtime.Epoch),
		Stats:  newStats(),
		rng:    rand.New(rand.NewPCG(seed, 0x74696d6564)),
		seed:   seed,
		link:   DefaultLink,
		links:  map[[2]int]Link{},
		byAddr: map[netip.AddrPort]nodeAddr{},
		start:  vtime.Epoch,
	}
	n.lastFault = n.start
	n.AddNetwork("net0")
	return n
}

// nodeAddr is a node's address on one network: the node and the index of
// that network among its own.
type nodeAddr struct {
	nd  *Node
	net int
}

// AddNetwork adds a broadcast domain (New made network 0) and returns its
// index.
func (n *Net) AddNetwork(name string) int {
	n.Networks = append(n.Networks, &Network{ID: len(n.Networks), Name: name, group: map[int]int{}})
	return len(n.Networks) - 1
}

// NetworkByName returns the network with this name, or nil.
func (n *Net) NetworkByName(name string) *Network {
	for _, w := range n.Networks {
		if w.Name == name {
			return w
		}
	}
	return nil
}

// multi reports whether the Net has several networks (the trace then
// names the network of a gateway's lines).
func (n *Net) multi() bool { return len(n.Networks) > 1 }

// Trace sets a function that receives one line per send, loss and state
// change (nil to stop).
func (n *Net) Trace(f func(string)) { n.tracing = f }

func (n *Net) tracef(format string, args ...any) {
	if n.tracing != nil {
		el := n.S.Now().Sub(n.start)
		n.tracing(fmt.Sprintf("%9.3fs ", el.Seconds()) + fmt.Sprintf(format, args...))
	}
}

// Elapsed is the virtual time since the network was created.
func (n *Net) Elapsed() time.Duration { return n.S.Now().Sub(n.start) }

// AddrOf is the address of node i on network 0: 10.x.y.z:525.
func AddrOf(i int) netip.AddrPort { return AddrOn(0, i) }

// AddrOn is the address of node i on network k: (10+k).x.y.z:525.
func AddrOn(k, i int) netip.AddrPort {
	v := i + 1
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{byte(10 + k), byte(v >> 16), byte(v >> 8), byte(v)}), Port)
}

// Add creates a node (down) on network 0 with this configuration; its
// name is cfg.Name.
func (n *Net) Add(cfg election.Config) *Node { return n.AddOn(cfg, 0) }

// AddOn creates a node (down) on these networks, in this order (its
// host's network i is nets[i]): with several, a gateway.
func (n *Net) AddOn(cfg election.Config, nets ...int) *Node {
	nd := &Node{ID: len(n.Nodes), Name: cfg.Name, Cfg: cfg}
	for _, k := range nets {
		w := n.Networks[k]
		a := AddrOn(k, nd.ID)
		nd.Nets = append(nd.Nets, k)
		nd.Addrs = append(nd.Addrs, a)
		w.Members = append(w.Members, nd)
		w.group[nd.ID] = 0
		n.byAddr[a] = nodeAddr{nd, len(nd.Nets) - 1}
	}
	nd.Addr = nd.Addrs[0]
	n.Nodes = append(n.Nodes, nd)
	return nd
}

// AddN adds count nodes named n1, n2, … with the configuration mk returns.
func (n *Net) AddN(count int, mk func(name string) election.Config) []*Node {
	out := make([]*Node, count)
	for i := range out {
		out[i] = n.Add(mk(fmt.Sprintf("n%d", len(n.Nodes)+1)))
	}
	return out
}

// Node returns the node with this name, or nil.
func (n *Net) Node(name string) *Node {
	for _, nd := range n.Nodes {
		if nd.Name == name {
			return nd
		}
	}
	return nil
}

// SetLink sets the default link for every pair without an override.
func (n *Net) SetLink(l Link) {
	n.link = l
	n.fault()
}

// SetPairLink overrides the link from node a to node b (one direction).
func (n *Net) SetPairLink(a, b int, l Link) {
	n.links[[2]int{a, b}] = l
	n.fault()
}

// Link returns the link from a to b.
func (n *Net) Link(a, b int) Link {
	if l, ok := n.links[[2]int{a, b}]; ok {
		return l
	}
	return n.link
}

// MaxDelay is the longest delay of any link.
func (n *Net) MaxDelay() time.Duration {
	d := n.link.MaxDelay()
	for _, l := range n.links {
		d = max(d, l.MaxDelay())
	}
	return d
}

// Lossy reports whether any link may drop packets.
func (n *Net) Lossy() bool {
	if n.link.Loss > 0 {
		return true
	}
	for _, l := range n.links {
		if l.Loss > 0 {
			return true
		}
	}
	return false
}

func (n *Net) fault() { n.lastFault = n.S.Now() }

// FaultFreeSince is the time of the last fault (crash, restart, partition
// change, link change). It is meaningful only while !Lossy().
func (n *Net) FaultFreeSince() time.Time { return n.lastFault }

// Partition splits network 0: each argument is a group of node IDs;
// nodes not named form one more group. Packets cross no group boundary.
func (n *Net) Partition(groups ...[]int) { n.PartitionNet(0, groups...) }

// PartitionNet splits network k as Partition does network 0; the other
// networks keep their partitions.
func (n *Net) PartitionNet(k int, groups ...[]int) {
	w := n.Networks[k]
	for id := range w.group {
		w.group[id] = 0
	}
	for g, ids := range groups {
		for _, id := range ids {
			if _, ok := w.group[id]; ok {
				w.group[id] = g + 1
			}
		}
	}
	var desc []string
	for _, ids := range groups {
		var g []string
		for _, id := range ids {
			g = append(g, n.Nodes[id].Name)
		}
		desc = append(desc, strings.Join(g, " "))
	}
	if n.multi() {
		n.tracef("partition %s: %s", w.Name, strings.Join(desc, " | "))
	} else {
		n.tracef("partition %s", strings.Join(desc, " | "))
	}
	n.fault()
}

// Heal removes every partition of every network.
func (n *Net) Heal() {
	for _, w := range n.Networks {
		for id := range w.group {
			w.group[id] = 0
		}
	}
	n.tracef("heal")
	n.fault()
}

// Group is node i's partition group on network 0.
func (n *Net) Group(i int) int { return n.Networks[0].group[i] }

// Components returns the up nodes of network 0 grouped by partition, in
// ID order.
func (n *Net) Components() [][]*Node { return n.NetComponents(0) }

// NetComponents returns the up nodes of network k grouped by partition,
// in ID order.
func (n *Net) NetComponents(k int) [][]*Node {
	w := n.Networks[k]
	byGroup := map[int][]*Node{}
	var keys []int
	for _, nd := range w.Members {
		if !nd.Up {
			continue
		}
		g := w.group[nd.ID]
		if _, ok := byGroup[g]; !ok {
			keys = append(keys, g)
		}
		byGroup[g] = append(byGroup[g], nd)
	}
	slices.Sort(keys)
	out := make([][]*Node, 0, len(keys))
	for _, k := range keys {
		out = append(out, byGroup[k])
	}
	return out
}

// Start boots node i now: a fresh host (crash-restart loses all state),
// every network started in order.
func (n *Net) Start(nd *Node) {
	if nd.Up {
		return
	}
	rng := rand.New(rand.NewPCG(n.seed, uint64(nd.ID)<<32|uint64(nd.inc)))
	cfgs := make([]election.Config, len(nd.Nets))
	for i, k := range nd.Nets {
		c := nd.Cfg
		c.Network, c.Addr = n.Networks[k].Name, nd.Addrs[i]
		cfgs[i] = c
	}
	h, err := election.NewHost(cfgs, rng)
	if err != nil {
		panic(fmt.Sprintf("simnet: node %s: %v", nd.Name, err))
	}
	nd.H, nd.M, nd.Up = h, h.Machine(0), true
	nd.timers = map[timerKey]*vtime.Event{}
	n.fault()
	n.carryOut(nd, h.SetReference(n.S.Now(), nd.Claim))
	for i := range nd.Nets {
		n.step(nd, i, election.Start{})
	}
}

// StartAt boots the node at virtual time t.
func (n *Net) StartAt(nd *Node, t time.Time) { n.S.At(t, func() { n.Start(nd) }) }

// Crash stops the node at once: its timers die, packets to it are lost,
// its state is gone.
func (n *Net) Crash(nd *Node) {
	if !nd.Up {
		return
	}
	for _, ev := range nd.timers {
		ev.Cancel(n.S)
	}
	nd.timers = nil
	nd.Up, nd.M, nd.H = false, nil, nil
	nd.inc++
	n.tracef("%s crashed", nd.Name)
	n.fault()
	if n.OnStep != nil {
		n.OnStep()
	}
}

// Step delivers one local event to a node's first network
// (ForceElection, Stop, …).
func (n *Net) Step(nd *Node, ev election.Event) { n.StepNet(nd, 0, ev) }

// StepNet delivers one local event to the node's host for its network
// net (an index into nd.Nets).
func (n *Net) StepNet(nd *Node, net int, ev election.Event) {
	if nd.Up {
		n.step(nd, net, ev)
	}
}

func (n *Net) step(nd *Node, net int, ev election.Event) {
	n.carryOut(nd, nd.H.Step(n.S.Now(), net, ev))
}

// SetReference tells a reference node's host its claim (as the daemon
// does when the kernel's state changes); it is kept for the node's
// restarts. A change of claim is a fault for the Checker.
func (n *Net) SetReference(nd *Node, e election.SetReference) {
	nd.Claim = e
	if !nd.Up {
		return
	}
	n.tracef("%s claim=%v maxerror=%v", nd.Name, e.Claim, e.MaxError)
	n.fault()
	n.carryOut(nd, nd.H.SetReference(n.S.Now(), e))
}

// carryOut carries out a host's actions.
func (n *Net) carryOut(nd *Node, as []election.NetAction) {
	for _, a := range as {
		if n.OnAction != nil {
			n.OnAction(nd, a.Action)
		}
		if n.OnNetAction != nil {
			n.OnNetAction(nd, a.Net, a.Action)
		}
		n.apply(nd, a.Net, a.Action)
	}
	if n.OnStep != nil {
		n.OnStep()
	}
}

// label names a node in the trace: with its network when it is on
// several.
func (n *Net) label(nd *Node, net int) string {
	if len(nd.Nets) > 1 {
		return nd.Name + "/" + n.Networks[nd.Nets[net]].Name
	}
	return nd.Name
}

func (n *Net) apply(nd *Node, net int, a election.Action) {
	who := n.label(nd, net)
	switch a := a.(type) {
	case election.Send:
		n.Stats.Sent[a.Packet.Type]++
		w := n.Networks[nd.Nets[net]]
		what := a.Packet.Type.String()
		if n.multi() && a.Packet.Type == tsp.Loop {
			what = fmt.Sprintf("LOOP %s %d", a.Packet.Name, a.Packet.HopCount)
		}
		if a.Broadcast {
			n.tracef("%s > * %s", who, what)
			for _, dst := range w.Members {
				if dst != nd {
					n.transmit(nd, net, dst, a.Packet)
				}
			}
			return
		}
		dst, ok := n.byAddr[a.To]
		if !ok || dst.nd.Nets[dst.net] != w.ID {
			n.tracef("%s > %v %v (no such host)", who, a.To, a.Packet.Type)
			return
		}
		n.tracef("%s > %s %s", who, dst.nd.Name, what)
		n.transmit(nd, net, dst.nd, a.Packet)
	case election.AskSource:
		n.sendExt(nd, net, a.To.Addr, tsp.ExtSourceReq, "", func(from netip.AddrPort) election.Event {
			return election.SourceQuery{From: from, Seq: a.Seq}
		})
	case election.TellReference:
		n.broadcastExt(nd, net, tsp.ExtReference, fmt.Sprint(" ", a.MaxError), func(from netip.AddrPort) election.Event {
			return election.ReferenceHeard{From: from, Name: nd.Name, MaxError: a.MaxError}
		})
	case election.TellSpan:
		n.broadcastExt(nd, net, tsp.ExtSpan, "", func(from netip.AddrPort) election.Event {
			return election.SpanHeard{From: from, Name: nd.Name}
		})
	case election.TellResign:
		n.broadcastExt(nd, net, tsp.ExtResign, fmt.Sprint(" ", a.Slaves), func(from netip.AddrPort) election.Event {
			return election.ResignHeard{From: from, Name: nd.Name, Slaves: a.Slaves}
		})
	case election.TellSource:
		n.sendExt(nd, net, a.To, tsp.ExtSource, fmt.Sprintf(" %s %d", a.Source, a.Hops), func(from netip.AddrPort) election.Event {
			return election.SourceAnswer{From: from, Seq: a.Seq, Source: a.Source, Hops: a.Hops}
		})
	case election.SetTimer:
		k := timerKey{net, a.ID}
		if ev := nd.timers[k]; ev != nil {
			ev.Cancel(n.S)
		}
		inc := nd.inc
		nd.timers[k] = n.S.After(a.After, func() {
			if nd.inc != inc || !nd.Up {
				return
			}
			delete(nd.timers, k)
			n.step(nd, net, election.TimerFired{ID: k.id})
		})
	case election.CancelTimer:
		k := timerKey{net, a.ID}
		if ev := nd.timers[k]; ev != nil {
			ev.Cancel(n.S)
			delete(nd.timers, k)
		}
	case election.StateChange:
		if a.From != a.To {
			n.tracef("%s %v -> %v (%s)", who, a.From, a.To, a.Reason)
		} else {
			n.tracef("%s %v (%s)", who, a.To, a.Reason)
		}
	case election.Ignored, election.CycleDetected:
		n.tracef("%s %v", who, a)
	case election.SyncRound:
		inc := nd.inc
		n.S.After(0, func() {
			if nd.inc != inc || !nd.Up {
				return
			}
			var res election.SyncResult
			switch {
			case n.OnSyncRound != nil:
				res = n.OnSyncRound(nd, a)
			case n.SimClocks:
				res = n.clockRound(nd, a)
			default:
				res = election.ZeroResult(a)
			}
			n.step(nd, net, res)
		})
	case election.AdjustClock:
		nd.Adjusts++
		if n.SimClocks {
			nd.Offset += a.Delta
		}
	case election.SetClock:
		nd.Sets++
		if m := n.Node(a.Master); n.SimClocks && m != nil {
			nd.Offset = m.Offset
		}
	}
}

// clockRound is the clock layer of SimClocks: every slave is corrected to
// the master's clock; the master's own clock does not move (it dictates,
// or its vote is its own clock).
func (n *Net) clockRound(nd *Node, r election.SyncRound) election.SyncResult {
	res := election.SyncResult{Round: r.Round}
	for _, s := range r.Slaves {
		if sl := n.Node(s.Name); sl != nil && sl.Up {
			res.Corrections = append(res.Corrections, election.Correction{Name: s.Name, Delta: nd.Offset - sl.Offset})
		}
	}
	return res
}

// sendExt unicasts a version-2 extension datagram of kind k from nd (its
// network net) to the address to, where ev is the event the receiver
// gets; a node with NoExt sends none and drops those it receives.
func (n *Net) sendExt(nd *Node, net int, to netip.AddrPort, k tsp.ExtKind, detail string, ev func(from netip.AddrPort) election.Event) {
	if nd.NoExt {
		return
	}
	who := n.label(nd, net)
	n.Stats.SentExt[k]++
	dst, ok := n.byAddr[to]
	if !ok || dst.nd.Nets[dst.net] != nd.Nets[net] {
		n.tracef("%s > %v %v (no such host)", who, to, k)
		return
	}
	n.tracef("%s > %s %v%s", who, dst.nd.Name, k, detail)
	n.carry(nd, net, dst.nd, func() bool {
		if dst.nd.NoExt {
			return false
		}
		n.Stats.DeliveredExt[k]++
		return true
	}, ev)
}

// broadcastExt broadcasts an extension of kind k from nd on its network
// net: every other member that speaks version 2 gets ev.
func (n *Net) broadcastExt(nd *Node, net int, k tsp.ExtKind, detail string, ev func(from netip.AddrPort) election.Event) {
	n.Stats.SentExt[k]++
	n.tracef("%s > * %v%s", n.label(nd, net), k, detail)
	if nd.NoExt {
		return
	}
	for _, dst := range n.Networks[nd.Nets[net]].Members {
		if dst == nd {
			continue
		}
		n.carry(nd, net, dst, func() bool {
			if dst.NoExt {
				return false
			}
			n.Stats.DeliveredExt[k]++
			return true
		}, ev)
	}
}

// transmit puts one datagram on the link from src (its network net) to
// dst, on the same network.
func (n *Net) transmit(src *Node, net int, dst *Node, p tsp.Packet) {
	n.carry(src, net, dst, func() bool { n.Stats.Delivered[p.Type]++; return true }, func(from netip.AddrPort) election.Event {
		return election.Recv{Packet: p, From: from}
	})
}

// carry puts one datagram on the link from src (its network net) to dst:
// at its arrival, if the receiver takes it (accept), dst gets ev.
func (n *Net) carry(src *Node, net int, dst *Node, accept func() bool, ev func(from netip.AddrPort) election.Event) {
	w := n.Networks[src.Nets[net]]
	l := n.Link(src.ID, dst.ID)
	copies := 1
	if l.Dup > 0 && n.rng.Float64() < l.Dup {
		copies = 2
	}
	for range copies {
		if w.group[src.ID] != w.group[dst.ID] || (l.Loss > 0 && n.rng.Float64() < l.Loss) {
			n.Stats.Lost++
			continue
		}
		d := l.latency(n.rng)
		if l.Reorder > 0 && n.rng.Float64() < l.Reorder {
			d += l.ReorderDelay
		}
		inc, from, dnet := dst.inc, src.Addrs[net], dst.local(w.ID)
		sg := w.group[src.ID]
		n.S.After(d, func() {
			if !dst.Up || dst.inc != inc || w.group[dst.ID] != sg {
				n.Stats.Lost++
				return
			}
			if accept() {
				n.step(dst, dnet, ev(from))
			}
		})
	}
}

// Run advances virtual time by d.
func (n *Net) Run(d time.Duration) { n.S.RunFor(d) }

// RunUntil runs until cond holds (checked after every event) or limit of
// virtual time has passed; it reports whether cond held.
func (n *Net) RunUntil(limit time.Duration, cond func() bool) bool {
	end := n.S.Now().Add(limit)
	for !cond() {
		t, ok := n.S.Next()
		if !ok || t.After(end) {
			n.S.RunUntil(end)
			return cond()
		}
		n.S.Step()
	}
	return true
}

// Masters returns the up nodes that act as master on their first
// network.
func (n *Net) Masters() []*Node {
	var out []*Node
	for _, nd := range n.Nodes {
		if nd.Up && nd.M.State().IsMaster() {
			out = append(out, nd)
		}
	}
	return out
}

// Settled reports whether every component with an eligible node has
// exactly one master, and every other up node of it follows that master
// and is on its list.
func (n *Net) Settled() bool {
	comps := n.Components()
	if len(comps) == 0 {
		return false
	}
	for _, comp := range comps {
		if ok, _ := componentSettled(comp); !ok {
			return false
		}
	}
	return true
}

// componentSettled checks one component; the string says what is wrong.
func componentSettled(comp []*Node) (bool, string) {
	var masters []*Node
	eligible := false
	for _, nd := range comp {
		if nd.M.State().IsMaster() {
			masters = append(masters, nd)
		}
		if nd.M.Config().MayBeMaster { // a reference only while it claims
			eligible = true
		}
	}
	if !eligible {
		if len(masters) > 0 {
			return false, "a master among non-eligible nodes"
		}
		return true, ""
	}
	if len(masters) != 1 {
		return false, fmt.Sprintf("%d masters %v", len(masters), names(masters))
	}
	m := masters[0]
	for _, nd := range comp {
		if nd == m {
			continue
		}
		st := nd.M.State()
		mp, ok := nd.M.Master()
		if (st != election.Slave && st != election.Accept) || !ok || mp.Name != m.Name {
			return false, fmt.Sprintf("%s is %v following %q, not %s", nd.Name, st, mp.Name, m.Name)
		}
		if !m.M.IsSlave(nd.Name) {
			return false, fmt.Sprintf("%s follows %s but is not on its list", nd.Name, m.Name)
		}
	}
	return true, ""
}

func names(ns []*Node) []string {
	out := make([]string, len(ns))
	for i, nd := range ns {
		out[i] = nd.Name
	}
	return out
}

// Status is one line per node: state, master, and a master's slaves; for
// a gateway one part per network, with "ignored", "slavenet" and
// "dictate" where they apply.
func (n *Net) Status() []string {
	var out []string
	for _, nd := range n.Nodes {
		if !nd.Up {
			out = append(out, nd.Name+": down")
			continue
		}
		if len(nd.Nets) == 1 {
			out = append(out, nd.Name+": "+n.netStatus(nd, 0))
			continue
		}
		var parts []string
		for i, k := range nd.Nets {
			parts = append(parts, n.Networks[k].Name+" "+n.netStatus(nd, i))
		}
		out = append(out, nd.Name+": "+strings.Join(parts, ", "))
	}
	return out
}

func (n *Net) netStatus(nd *Node, i int) string {
	h := nd.H
	if h.Ignored(i) {
		return "ignored"
	}
	st := h.State(i)
	line := st.String()
	if st.IsMaster() {
		var sl []string
		for _, p := range h.Slaves(i) {
			sl = append(sl, p.Name)
		}
		line += " slaves=[" + strings.Join(sl, " ") + "]"
		if h.Dictates(i) {
			line += " dictate"
		}
	} else if mp, ok := h.Master(i); ok {
		line += " master=" + mp.Name
	}
	if len(nd.Nets) > 1 && h.IsSlaveNet(i) {
		line += " slavenet"
	}
	return line
}

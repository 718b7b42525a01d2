// Package simnet is a deterministic network simulator for the election
// state machine (and, later, for clocksync and the ring elections): N
// daemons each running a real election.Machine, one virtual clock
// (internal/vtime), one seeded random source, and a network with per-link
// latency distributions, loss, duplication, reordering and partitions that
// are set and healed. Nodes crash (losing every bit of state) and restart.
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
type Stats struct {
	Sent      map[tsp.Type]int
	Delivered map[tsp.Type]int
	Lost      int
}

// Total is the number of datagrams sent.
func (s *Stats) Total() int {
	n := 0
	for _, c := range s.Sent {
		n += c
	}
	return n
}

// TotalDelivered is the number of datagrams delivered.
func (s *Stats) TotalDelivered() int {
	n := 0
	for _, c := range s.Delivered {
		n += c
	}
	return n
}

func newStats() Stats { return Stats{Sent: map[tsp.Type]int{}, Delivered: map[tsp.Type]int{}} }

// Node is one simulated daemon.
type Node struct {
	ID   int
	Name string
	Addr netip.AddrPort
	Cfg  election.Config
	// M is the node's state machine; nil while the node is down.
	M  *election.Machine
	Up bool

	inc    int // incarnation: bumped by every crash, so stale events die
	timers map[election.TimerID]*vtime.Event
	// Clock actions received, for tests of the clock interface.
	Adjusts, Sets int
}

// Net is the simulated network.
type Net struct {
	S     *vtime.Scheduler
	Nodes []*Node
	Stats Stats

	rng     *rand.Rand
	seed    uint64
	link    Link
	links   map[[2]int]Link
	group   []int
	byAddr  map[netip.AddrPort]*Node
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
		byAddr: map[netip.AddrPort]*Node{},
		start:  vtime.Epoch,
	}
	n.lastFault = n.start
	return n
}

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

// AddrOf is the address of node i: 10.x.y.z:525.
func AddrOf(i int) netip.AddrPort {
	v := i + 1
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(v >> 16), byte(v >> 8), byte(v)}), Port)
}

// Add creates a node (down) with this configuration; its name is cfg.Name.
func (n *Net) Add(cfg election.Config) *Node {
	nd := &Node{ID: len(n.Nodes), Name: cfg.Name, Addr: AddrOf(len(n.Nodes)), Cfg: cfg}
	n.Nodes = append(n.Nodes, nd)
	n.group = append(n.group, 0)
	n.byAddr[nd.Addr] = nd
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

// Partition splits the network: each argument is a group of node IDs;
// nodes not named form one more group. Packets cross no group boundary.
func (n *Net) Partition(groups ...[]int) {
	for i := range n.group {
		n.group[i] = 0
	}
	for g, ids := range groups {
		for _, id := range ids {
			n.group[id] = g + 1
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
	n.tracef("partition %s", strings.Join(desc, " | "))
	n.fault()
}

// Heal removes every partition.
func (n *Net) Heal() {
	for i := range n.group {
		n.group[i] = 0
	}
	n.tracef("heal")
	n.fault()
}

// Group is node i's partition group.
func (n *Net) Group(i int) int { return n.group[i] }

// Components returns the up nodes grouped by partition, in ID order.
func (n *Net) Components() [][]*Node {
	byGroup := map[int][]*Node{}
	var keys []int
	for _, nd := range n.Nodes {
		if !nd.Up {
			continue
		}
		g := n.group[nd.ID]
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

// Start boots node i now: a fresh machine (crash-restart loses all state).
func (n *Net) Start(nd *Node) {
	if nd.Up {
		return
	}
	rng := rand.New(rand.NewPCG(n.seed, uint64(nd.ID)<<32|uint64(nd.inc)))
	m, err := election.New(nd.Cfg, rng)
	if err != nil {
		panic(fmt.Sprintf("simnet: node %s: %v", nd.Name, err))
	}
	nd.M, nd.Up = m, true
	nd.timers = map[election.TimerID]*vtime.Event{}
	n.fault()
	n.step(nd, election.Start{})
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
	nd.Up, nd.M = false, nil
	nd.inc++
	n.tracef("%s crashed", nd.Name)
	n.fault()
	if n.OnStep != nil {
		n.OnStep()
	}
}

// Step delivers one local event to a node (ForceElection, Stop, …).
func (n *Net) Step(nd *Node, ev election.Event) {
	if nd.Up {
		n.step(nd, ev)
	}
}

func (n *Net) step(nd *Node, ev election.Event) {
	rd := nd.M.Step(n.S.Now(), ev)
	for _, a := range rd.Actions {
		if n.OnAction != nil {
			n.OnAction(nd, a)
		}
		n.apply(nd, a)
	}
	if n.OnStep != nil {
		n.OnStep()
	}
}

func (n *Net) apply(nd *Node, a election.Action) {
	switch a := a.(type) {
	case election.Send:
		n.Stats.Sent[a.Packet.Type]++
		if a.Broadcast {
			n.tracef("%s > * %v", nd.Name, a.Packet.Type)
			for _, dst := range n.Nodes {
				if dst != nd {
					n.transmit(nd, dst, a.Packet)
				}
			}
			return
		}
		dst := n.byAddr[a.To]
		if dst == nil {
			n.tracef("%s > %v %v (no such host)", nd.Name, a.To, a.Packet.Type)
			return
		}
		n.tracef("%s > %s %v", nd.Name, dst.Name, a.Packet.Type)
		n.transmit(nd, dst, a.Packet)
	case election.SetTimer:
		if ev := nd.timers[a.ID]; ev != nil {
			ev.Cancel(n.S)
		}
		id, inc := a.ID, nd.inc
		nd.timers[a.ID] = n.S.After(a.After, func() {
			if nd.inc != inc || !nd.Up {
				return
			}
			delete(nd.timers, id)
			n.step(nd, election.TimerFired{ID: id})
		})
	case election.CancelTimer:
		if ev := nd.timers[a.ID]; ev != nil {
			ev.Cancel(n.S)
			delete(nd.timers, a.ID)
		}
	case election.StateChange:
		if a.From != a.To {
			n.tracef("%s %v -> %v (%s)", nd.Name, a.From, a.To, a.Reason)
		} else {
			n.tracef("%s %v (%s)", nd.Name, a.To, a.Reason)
		}
	case election.SyncRound:
		inc := nd.inc
		n.S.After(0, func() {
			if nd.inc != inc || !nd.Up {
				return
			}
			var res election.SyncResult
			if n.OnSyncRound != nil {
				res = n.OnSyncRound(nd, a)
			} else {
				res = election.ZeroResult(a)
			}
			n.step(nd, res)
		})
	case election.AdjustClock:
		nd.Adjusts++
	case election.SetClock:
		nd.Sets++
	}
}

// transmit puts one datagram on the link from src to dst.
func (n *Net) transmit(src, dst *Node, p tsp.Packet) {
	l := n.Link(src.ID, dst.ID)
	copies := 1
	if l.Dup > 0 && n.rng.Float64() < l.Dup {
		copies = 2
	}
	for range copies {
		if n.group[src.ID] != n.group[dst.ID] || (l.Loss > 0 && n.rng.Float64() < l.Loss) {
			n.Stats.Lost++
			continue
		}
		d := l.latency(n.rng)
		if l.Reorder > 0 && n.rng.Float64() < l.Reorder {
			d += l.ReorderDelay
		}
		inc, from := dst.inc, src.Addr
		sg := n.group[src.ID]
		n.S.After(d, func() {
			if !dst.Up || dst.inc != inc || n.group[dst.ID] != sg {
				n.Stats.Lost++
				return
			}
			n.Stats.Delivered[p.Type]++
			n.step(dst, election.Recv{Packet: p, From: from})
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

// Masters returns the up nodes that act as master.
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
		if nd.Cfg.MayBeMaster {
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

// Status is one line per node: state, master, and a master's slaves.
func (n *Net) Status() []string {
	var out []string
	for _, nd := range n.Nodes {
		if !nd.Up {
			out = append(out, nd.Name+": down")
			continue
		}
		st := nd.M.State()
		line := fmt.Sprintf("%s: %v", nd.Name, st)
		if st.IsMaster() {
			var sl []string
			for _, p := range nd.M.Slaves() {
				sl = append(sl, p.Name)
			}
			line += " slaves=[" + strings.Join(sl, " ") + "]"
		} else if mp, ok := nd.M.Master(); ok {
			line += " master=" + mp.Name
		}
		out = append(out, line)
	}
	return out
}

// Package ring holds the classic leader-election algorithms for rings and
// complete networks, each as a pure per-node state machine, and a
// deterministic simulator that runs them on virtual time.
//
// A machine is driven the way etcd's raft is: the caller feeds it one Event
// (start, a message that arrived on a port, a tick of its local clock) and
// gets back the Actions it wants done (send a message on a port, wake me at
// a local tick, "I am the leader", "the leader is X"). Machines never touch
// sockets, goroutines or wall-clock time, so the same code runs inside the
// simulator here and among the daemons (election/ring/live), where each Msg
// travels in a tsp.ExtPacket of kind tsp.ExtRing.
//
// Ports: on a ring a node has two, Left and Right. Unidirectional
// algorithms receive on Left and send on Right ("clockwise"). Bidirectional
// ones treat the two ports symmetrically and need no shared orientation: the
// simulator may swap any node's ports. On a complete network of n nodes a
// node has ports 0 … n−2, one per other node, numbered locally.
//
// The algorithms (one file each, the doc comment citing paper and bound):
//
//	LeLann              lelann.go               n²
//	ChangRoberts        changroberts.go         n(n+1)/2 + n
//	HirschbergSinclair  hirschberg_sinclair.go  8n⌈log n⌉ + 8n
//	Franklin            franklin.go             2n⌊log n⌋ + 3n
//	Peterson            peterson.go             2n⌊log n⌋ + 3n
//	VanLeeuwenTan       vanleeuwen_tan.go       2n + T·n + n + 2, T ≈ 1.44 log n
//	Vitanyi             vitanyi.go              (2) + N, linear for f ≥ 2^i
//	TimeSlice           timeslice.go            n
//	AfekGafniSync/Async afek_gafni.go           2n⌈log n⌉ + 2n / 4n(⌈log n⌉+1)
//
// sim.go runs them on internal/vtime (FIFO links, synchronous rounds or
// seeded random delays, per-node clock rates, half-duplex links, missing
// orientation) and checks every run; bench.go measures them for
// cmd/bench-ring. Msg (msg.go) is the one wire format of every algorithm.
//
// This package must never do I/O or read the clock; the daemon owns that.
package ring

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Port is a node's local name for one of its links.
type Port uint32

// The two ports of a ring node. Which neighbour is "Left" is a node's local
// convention; only unidirectional algorithms rely on it being consistent.
const (
	Left  Port = 0
	Right Port = 1
)

// Opposite is the other port of a ring node.
func (p Port) Opposite() Port { return 1 - p }

func (p Port) String() string {
	switch p {
	case Left:
		return "L"
	case Right:
		return "R"
	}
	return fmt.Sprintf("p%d", uint32(p))
}

// EventKind says what happened to a node.
type EventKind uint8

// Event kinds.
const (
	// Start: the node wakes up spontaneously (an initiator).
	Start EventKind = iota + 1
	// Receive: Msg arrived on Port.
	Receive
	// Tick: the node's local clock reached the tick it asked for with
	// SetTimer (Now says which).
	Tick
)

// Event is one input to a machine.
type Event struct {
	Kind EventKind
	Port Port
	Msg  Msg
	// Batch carries every message that arrived at once on a half-duplex
	// ring (van Leeuwen–Tan's "message(s) from one or both directions");
	// Kind is Receive and Msg/Port are unused when Batch is non-nil.
	Batch []Incoming
	// Now is the node's local clock in ticks. Only timed algorithms
	// (Archimedean, synchronous) look at it.
	Now int64
}

// Incoming is a message together with the port it arrived on.
type Incoming struct {
	Port Port
	Msg  Msg
}

// ActionKind says what a machine wants done.
type ActionKind uint8

// Action kinds.
const (
	// Send Msg on Port.
	Send ActionKind = iota + 1
	// SetTimer asks for a Tick event when the local clock reads At; it
	// replaces any earlier request. At < 0 cancels.
	SetTimer
	// Elected: this node is the leader (Leader holds its id).
	Elected
	// LeaderIs: this node has learnt that Leader is the leader.
	LeaderIs
)

// Action is one output of a machine.
type Action struct {
	Kind   ActionKind
	Port   Port
	Msg    Msg
	At     int64
	Leader uint64
	// RingSize is set with Elected by algorithms that measure n (Vitányi's
	// synchronous ring-size determination); 0 otherwise.
	RingSize int
}

// Machine is one node of an election algorithm.
type Machine interface {
	// Step consumes one event and returns the actions it causes, in order.
	Step(Event) []Action
}

// NodeConfig is what a node knows before the election.
type NodeConfig struct {
	// ID is the node's unique name, ≥ 1 (the Archimedean and time-slice
	// algorithms read it as a positive integer).
	ID uint64
	// N is the number of nodes. Only algorithms that assume a known size
	// (time-slice) or a complete network read it.
	N int
}

// Topology is the network an algorithm runs on.
type Topology uint8

// Topologies.
const (
	Unidirectional Topology = iota + 1 // ring, receive Left, send Right
	Bidirectional                      // ring, both ports, no orientation needed
	Complete                           // every node linked to every other
)

// Extremum is which node an algorithm elects.
type Extremum uint8

// Extrema.
const (
	Max Extremum = iota + 1 // the largest id
	Min                     // the smallest id
	Any                     // some node (van Leeuwen–Tan)
)

// Algorithm describes one election algorithm for the simulator, the tests
// and the benchmark.
type Algorithm struct {
	Name     string
	Topology Topology
	Elects   Extremum
	// Announces: at the end every node has emitted LeaderIs or Elected.
	Announces bool
	// SyncOnly: correct only under the synchronous-rounds scheduler.
	SyncOnly bool
	// HalfDuplex: correct only on half-duplex links; Run then provides
	// them whatever Config says.
	HalfDuplex bool
	// Batches: the machine understands Event.Batch, so it can run on
	// half-duplex links.
	Batches bool
	// Quadratic: Θ(n²) messages in the worst case; the benchmark stops
	// these at n = 2^12.
	Quadratic bool
	// New builds one node.
	New func(NodeConfig) Machine
	// Bound is the paper's upper bound on messages for this run; the
	// simulator fails a run that exceeds it. BoundText says what it is and
	// whether the final announcement is included.
	Bound     func(r BoundInput) float64
	BoundText string
	// TimeBound, if set, bounds Result.Units() when every node starts at
	// time 0 and no link delay exceeds Unit; 0 means no bound for this
	// input. TimeText says where it comes from.
	TimeBound func(r BoundInput) float64
	TimeText  string
}

// All is every algorithm and variant in the package, in the order of the
// issue: Le Lann, Chang–Roberts, Hirschberg–Sinclair, Franklin, Peterson,
// van Leeuwen–Tan (half-duplex with both inaugurations, full-duplex with
// the q bit), Vitányi (f = 2^i, u·2^i/m tuned to u/m = 3, minimal time,
// synchronous with ring size), time-slice, Afek–Gafni sync and async.
func All() []Algorithm {
	return []Algorithm{
		LeLann, ChangRoberts, HirschbergSinclair, Franklin, Peterson,
		VanLeeuwenTan(false, InaugurateSelf), VanLeeuwenTan(false, InaugurateRegister),
		VanLeeuwenTan(true, InaugurateRegister),
		Vitanyi(Pow2, 1, false), Vitanyi(Scaled, 3, false), Vitanyi(MinimalTime, 1, false),
		Vitanyi(Pow2, 1, true),
		TimeSlice, AfekGafniSync, AfekGafniAsync,
	}
}

// BoundInput is what a message bound may depend on.
type BoundInput struct {
	N   int
	IDs []uint64
	// UOverM is Vitányi's u/m: the longest tick plus the longest link
	// delay, over the shortest tick. 1 when synchronous.
	UOverM float64
	// Synchronous: the run used the synchronous-rounds schedule (one
	// round is 2 Units).
	Synchronous bool
	// U is Vitányi's u in Units: the longest tick plus the longest link
	// delay; one tick (2) when synchronous, where a hop is read at the
	// next tick.
	U float64
}

// Errors a run can end with.
var (
	ErrNoLeader       = errors.New("no leader elected")
	ErrManyLeaders    = errors.New("more than one leader elected")
	ErrDisagree       = errors.New("nodes disagree on the leader")
	ErrWrongLeader    = errors.New("elected node is not the extremum the algorithm elects")
	ErrNoTermination  = errors.New("run did not terminate")
	ErrBoundExceeded  = errors.New("messages exceed the paper's bound")
	ErrTimeExceeded   = errors.New("election took longer than its time bound")
	ErrBadConfig      = errors.New("bad simulation config")
	ErrRingSize       = errors.New("measured ring size is wrong")
	ErrUndecidedNodes = errors.New("some node never learnt the leader")
)

// log2 helpers used by the bounds.

// ceilLog2 is ⌈log₂ n⌉ for n ≥ 1.
func ceilLog2(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

// floorLog2 is ⌊log₂ n⌋ for n ≥ 1.
func floorLog2(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n)) - 1
}

func minID(ids []uint64) uint64 {
	m := uint64(math.MaxUint64)
	for _, v := range ids {
		m = min(m, v)
	}
	return m
}

func maxID(ids []uint64) uint64 {
	var m uint64
	for _, v := range ids {
		m = max(m, v)
	}
	return m
}

func send(p Port, m Msg) Action { return Action{Kind: Send, Port: p, Msg: m} }

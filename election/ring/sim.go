package ring

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/timed-project/timed/internal/vtime"
)

// Unit is one maximal link delay in virtual time; Result.Time is reported
// in these units.
const Unit = time.Millisecond

// Schedule is how the simulator times links and clocks.
type Schedule uint8

// Schedules.
const (
	// Synchronous rounds: every link delay is exactly Unit and every clock
	// ticks every 2·Unit, so a message sent at one tick is read before the
	// next; a round is one tick.
	Synchronous Schedule = iota + 1
	// Asynchronous: each message is delayed uniformly in (0, MaxDelay],
	// links stay FIFO, and clocks tick at per-node rates (TickLen).
	Asynchronous
)

func (s Schedule) String() string {
	switch s {
	case Synchronous:
		return "sync"
	case Asynchronous:
		return "async"
	}
	return fmt.Sprintf("Schedule(%d)", uint8(s))
}

// Wake makes Node start spontaneously at time At.
type Wake struct {
	Node int
	At   time.Duration
}

// Config is one simulated run.
type Config struct {
	Algorithm Algorithm
	// IDs in ring order: node i's Right port leads to node i+1 (mod n).
	// On a complete network the order only numbers the nodes.
	IDs      []uint64
	Schedule Schedule
	// Seed drives every random choice of the run (delays, tick lengths).
	Seed uint64
	// Starters wake spontaneously; nil means every node at time 0.
	Starters []Wake
	// Flip[i] swaps node i's Left and Right ports: no shared orientation.
	// Only bidirectional algorithms accept it.
	Flip []bool
	// HalfDuplex: a link never carries messages both ways at once. The
	// simulator gets there by handing a node, whenever a message reaches
	// it, everything then in flight towards it on either port, as one
	// Batch: the node has read both links before it sends on either.
	HalfDuplex bool
	// TickLen[i] is the real length of node i's clock tick. nil: 2·Unit for
	// Synchronous, uniform in [Unit, 2·Unit] for Asynchronous.
	TickLen []time.Duration
	// MaxDelay bounds asynchronous link delays; 0 means Unit.
	MaxDelay time.Duration
	// Trace, if set, gets one line per event and action, for debugging
	// and for golden scripts.
	Trace func(string)
	// MaxEvents stops a run that does not terminate; 0 picks a generous
	// default (quadratic in n).
	MaxEvents int
}

// Result is what a run did.
type Result struct {
	N        int
	Messages int // every message sent, the announcement included
	Announce int // of which announcement (LEADER, SLEEPWELL)
	Bits     int // bits of the Msg encoding, summed over Messages
	// Time is the virtual time of the last send or decision.
	Time       time.Duration
	Leader     uint64
	LeaderNode int
	RingSize   int     // reported by the leader, 0 if the algorithm does not measure n
	Bound      float64 // the paper's bound on Messages for this run
	TimeBound  float64 // bound on Units(), 0 if none applies
	Events     int
}

// Units is Time in maximal link delays.
func (r Result) Units() float64 { return float64(r.Time) / float64(Unit) }

type inflight struct {
	msg  Msg
	from int
	port Port // destination's local port
	ev   *vtime.Event
}

type node struct {
	m        Machine
	tick     time.Duration
	timer    *vtime.Event
	elected  bool
	leader   uint64
	decided  bool
	inbound  [][]*inflight // per local port, FIFO (half-duplex only)
	stepping bool
}

type sim struct {
	cfg      Config
	n        int
	s        *vtime.Scheduler
	rng      *rand.Rand
	nodes    []*node
	lastArr  map[[2]int]time.Time // (to, port) → last arrival there, for FIFO
	res      Result
	err      error
	maxDelay time.Duration
}

// Run simulates one election and checks it: termination, exactly one
// leader, the right extremum, agreement where the algorithm announces, a
// correct ring size where one is measured, and messages within the bound.
// The Result is filled in even when the error is not nil.
func Run(cfg Config) (Result, error) {
	n := len(cfg.IDs)
	a := cfg.Algorithm
	switch {
	case n == 0 || a.New == nil:
		return Result{}, fmt.Errorf("%w: no nodes or no algorithm", ErrBadConfig)
	case cfg.Flip != nil && a.Topology != Bidirectional:
		return Result{}, fmt.Errorf("%w: %s needs a shared orientation", ErrBadConfig, a.Name)
	case a.SyncOnly && cfg.Schedule != Synchronous:
		return Result{}, fmt.Errorf("%w: %s is synchronous only", ErrBadConfig, a.Name)
	case cfg.Schedule != Synchronous && cfg.Schedule != Asynchronous:
		return Result{}, fmt.Errorf("%w: schedule %v", ErrBadConfig, cfg.Schedule)
	case a.Topology == Complete && n < 2:
		return Result{}, fmt.Errorf("%w: complete network of %d", ErrBadConfig, n)
	}
	if a.HalfDuplex {
		cfg.HalfDuplex = true
	}
	if cfg.HalfDuplex && !a.Batches {
		return Result{}, fmt.Errorf("%w: %s cannot take half-duplex batches", ErrBadConfig, a.Name)
	}
	seen := make(map[uint64]bool, n)
	for _, id := range cfg.IDs {
		if id == 0 || seen[id] {
			return Result{}, fmt.Errorf("%w: ids must be distinct and ≥ 1", ErrBadConfig)
		}
		seen[id] = true
	}
	x := &sim{
		cfg: cfg, n: n, s: vtime.New(vtime.Epoch),
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		lastArr:  make(map[[2]int]time.Time),
		maxDelay: cfg.MaxDelay,
	}
	if x.maxDelay <= 0 {
		x.maxDelay = Unit
	}
	x.res.N = n
	for i, id := range cfg.IDs {
		nd := &node{m: a.New(NodeConfig{ID: id, N: n})}
		switch {
		case cfg.TickLen != nil:
			nd.tick = cfg.TickLen[i]
		case cfg.Schedule == Synchronous:
			nd.tick = 2 * Unit
		default:
			nd.tick = Unit + time.Duration(x.rng.Int64N(int64(Unit)+1))
		}
		nd.inbound = make([][]*inflight, 2)
		x.nodes = append(x.nodes, nd)
	}
	starters := cfg.Starters
	if starters == nil {
		for i := range n {
			starters = append(starters, Wake{Node: i})
		}
	}
	for _, w := range starters {
		i := w.Node
		x.s.At(vtime.Epoch.Add(w.At), func() {
			x.step(i, Event{Kind: Start, Now: x.localNow(i)})
		})
	}
	limit := cfg.MaxEvents
	if limit <= 0 {
		limit = 16*n*n + 1000*n + 100000
	}
	for x.err == nil && x.s.Step() {
		x.res.Events++
		if x.res.Events > limit {
			x.err = fmt.Errorf("%w: still running after %d events", ErrNoTermination, limit)
		}
	}
	if x.err != nil {
		return x.res, x.err
	}
	return x.res, x.check()
}

func (x *sim) localNow(i int) int64 {
	return int64(x.s.Since(vtime.Epoch) / x.nodes[i].tick)
}

// dest maps node i's local port p to the receiving node and its local port.
func (x *sim) dest(i int, p Port) (int, Port) {
	if x.cfg.Algorithm.Topology == Complete {
		j := (i + 1 + int(p)) % x.n
		return j, Port((i - j - 1 + 2*x.n) % x.n)
	}
	flip := func(k int, q Port) Port {
		if x.cfg.Flip != nil && x.cfg.Flip[k] {
			return q.Opposite()
		}
		return q
	}
	if flip(i, p) == Right {
		j := (i + 1) % x.n
		return j, flip(j, Left)
	}
	j := (i - 1 + x.n) % x.n
	return j, flip(j, Right)
}

func (x *sim) delay() time.Duration {
	if x.cfg.Schedule == Synchronous {
		return Unit
	}
	return 1 + time.Duration(x.rng.Int64N(int64(x.maxDelay)))
}

func (x *sim) step(i int, ev Event) {
	if x.err != nil {
		return
	}
	nd := x.nodes[i]
	if nd.stepping {
		panic("ring: re-entrant step") // the simulator's own bug, never a machine's
	}
	nd.stepping = true
	acts := nd.m.Step(ev)
	nd.stepping = false
	if x.cfg.Trace != nil {
		x.cfg.Trace(fmt.Sprintf("%v n%d(id %d) %s -> %v", x.s.Since(vtime.Epoch), i, x.cfg.IDs[i], evString(ev), acts))
	}
	for _, a := range acts {
		x.act(i, a)
	}
}

func (x *sim) act(i int, a Action) {
	nd := x.nodes[i]
	switch a.Kind {
	case Send:
		x.res.Messages++
		x.res.Bits += a.Msg.Bits()
		if a.Msg.Kind == KLeader || a.Msg.Kind == KSleepwell {
			x.res.Announce++
		}
		x.res.Time = x.s.Since(vtime.Epoch)
		j, q := x.dest(i, a.Port)
		arr := x.s.Now().Add(x.delay())
		key := [2]int{j, int(q)} // each in-port has exactly one sender
		if last, ok := x.lastArr[key]; ok && arr.Before(last) {
			arr = last // FIFO: never overtake an earlier message on this link
		}
		x.lastArr[key] = arr
		f := &inflight{msg: a.Msg, from: i, port: q}
		if x.cfg.HalfDuplex {
			x.nodes[j].inbound[q] = append(x.nodes[j].inbound[q], f)
		}
		f.ev = x.s.At(arr, func() { x.deliver(j, f) })
	case SetTimer:
		nd.timer.Cancel(x.s)
		nd.timer = nil
		if a.At >= 0 {
			at := a.At
			nd.timer = x.s.At(vtime.Epoch.Add(time.Duration(at)*nd.tick), func() {
				nd.timer = nil
				x.step(i, Event{Kind: Tick, Now: at})
			})
		}
	case Elected, LeaderIs:
		if nd.decided && nd.leader != a.Leader {
			x.err = fmt.Errorf("%w: node %d said %d then %d", ErrDisagree, i, nd.leader, a.Leader)
			return
		}
		nd.decided, nd.leader = true, a.Leader
		x.res.Time = x.s.Since(vtime.Epoch)
		if a.Kind == Elected {
			if a.Leader != x.cfg.IDs[i] {
				x.err = fmt.Errorf("%w: node %d (id %d) elected with id %d", ErrDisagree, i, x.cfg.IDs[i], a.Leader)
				return
			}
			nd.elected = true
			x.res.RingSize = a.RingSize
		}
	}
}

func (x *sim) deliver(j int, f *inflight) {
	if !x.cfg.HalfDuplex {
		x.step(j, Event{Kind: Receive, Port: f.port, Msg: f.msg, Now: x.localNow(j)})
		return
	}
	// Half-duplex: take everything in flight towards j, in FIFO order per
	// port, and hand it over at once.
	nd := x.nodes[j]
	var batch []Incoming
	for p := range nd.inbound {
		for _, g := range nd.inbound[p] {
			if g != f {
				g.ev.Cancel(x.s)
			}
			batch = append(batch, Incoming{Port: g.port, Msg: g.msg})
		}
		nd.inbound[p] = nd.inbound[p][:0]
	}
	x.step(j, Event{Kind: Receive, Batch: batch, Now: x.localNow(j)})
}

func (x *sim) check() error {
	a := x.cfg.Algorithm
	leaders := 0
	for i, nd := range x.nodes {
		if nd.elected {
			leaders++
			x.res.Leader, x.res.LeaderNode = nd.leader, i
		}
	}
	switch {
	case leaders == 0:
		return ErrNoLeader
	case leaders > 1:
		return fmt.Errorf("%w: %d", ErrManyLeaders, leaders)
	}
	for i, nd := range x.nodes {
		if nd.decided && nd.leader != x.res.Leader {
			return fmt.Errorf("%w: node %d says %d, leader is %d", ErrDisagree, i, nd.leader, x.res.Leader)
		}
		if a.Announces && !nd.decided {
			return fmt.Errorf("%w: node %d", ErrUndecidedNodes, i)
		}
	}
	switch {
	case a.Elects == Max && x.res.Leader != maxID(x.cfg.IDs):
		return fmt.Errorf("%w: got %d, max is %d", ErrWrongLeader, x.res.Leader, maxID(x.cfg.IDs))
	case a.Elects == Min && x.res.Leader != minID(x.cfg.IDs):
		return fmt.Errorf("%w: got %d, min is %d", ErrWrongLeader, x.res.Leader, minID(x.cfg.IDs))
	}
	if x.res.RingSize != 0 && x.res.RingSize != x.n {
		return fmt.Errorf("%w: measured %d, n = %d", ErrRingSize, x.res.RingSize, x.n)
	}
	in := BoundInput{N: x.n, IDs: x.cfg.IDs, UOverM: x.uOverM(), Synchronous: x.cfg.Schedule == Synchronous, U: 2}
	if !in.Synchronous {
		var hi time.Duration
		for _, nd := range x.nodes {
			hi = max(hi, nd.tick)
		}
		in.U = float64(hi+x.maxDelay) / float64(Unit)
	}
	if a.TimeBound != nil && x.cfg.Starters == nil && x.maxDelay == Unit {
		x.res.TimeBound = a.TimeBound(in)
		if x.res.TimeBound > 0 && x.res.Units() > x.res.TimeBound {
			return fmt.Errorf("%w: %.1f > %.1f units (%s)", ErrTimeExceeded, x.res.Units(), x.res.TimeBound, a.TimeText)
		}
	}
	if a.Bound != nil {
		x.res.Bound = a.Bound(in)
		if float64(x.res.Messages) > x.res.Bound {
			return fmt.Errorf("%w: %d > %.1f (%s)", ErrBoundExceeded, x.res.Messages, x.res.Bound, a.BoundText)
		}
	}
	return nil
}

// uOverM is Vitányi's ratio: (longest tick + longest link delay) over the
// shortest tick.
func (x *sim) uOverM() float64 {
	lo, hi := x.nodes[0].tick, x.nodes[0].tick
	for _, nd := range x.nodes {
		lo, hi = min(lo, nd.tick), max(hi, nd.tick)
	}
	d := x.maxDelay
	if x.cfg.Schedule == Synchronous {
		// A synchronous hop is read at the next tick: one tick per hop, u = m.
		return 1
	}
	return float64(hi+d) / float64(lo)
}

func evString(ev Event) string {
	switch ev.Kind {
	case Start:
		return "start"
	case Tick:
		return fmt.Sprintf("tick %d", ev.Now)
	}
	if ev.Batch != nil {
		return fmt.Sprintf("recv %v", ev.Batch)
	}
	return fmt.Sprintf("recv %v:%v", ev.Port, ev.Msg)
}

func (a Action) String() string {
	switch a.Kind {
	case Send:
		return fmt.Sprintf("send %v:%v", a.Port, a.Msg)
	case SetTimer:
		return fmt.Sprintf("timer %d", a.At)
	case Elected:
		return "ELECTED"
	case LeaderIs:
		return fmt.Sprintf("leader=%d", a.Leader)
	}
	return "?"
}

package live

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/election/ring"
	"github.com/timed-project/timed/tsp"
)

// Host is what the runner needs from the daemon that runs it: its
// transport, its network clock and its loop. The runner calls it only
// from within its own entry points, on the host's goroutine, and never
// keeps a goroutine or a timer of its own.
type Host interface {
	// Send transmits p to one address, once: it may be lost.
	Send(p tsp.ExtPacket, to netip.AddrPort) error
	// Broadcast transmits p to every daemon of the network: its broadcast
	// address, or each peer in peers mode. It may come back to us.
	Broadcast(p tsp.ExtPacket) error
	// Now reads the network clock: this host's clock, which the daemons
	// keep synchronised. Elections start, and tick, on it.
	Now() time.Time
	// At asks the host to call fn, on the goroutine that calls the runner,
	// once Now reads t (at once if t has passed). The host may drop fn
	// when it shuts down.
	At(t time.Time, fn func())
	// Peers is the configured peer list in its order, which is the ring's;
	// empty in broadcast mode, where the ring is ordered by address.
	Peers() []netip.AddrPort
	// Addr is this daemon's address as the other daemons see it (its
	// place in the ring order).
	Addr() netip.AddrPort
}

// Config is what a runner knows of its daemon beyond the Host.
type Config struct {
	// Name is the daemon's host name, as its packets carry it.
	Name string
	// Log gets the runner's logs; nil discards them.
	Log logrus.FieldLogger
	// Rand draws election ids (and so the members' ids); nil: a random
	// seed. Tests set it to replay a run.
	Rand *rand.Rand
}

// DefaultUnit bounds one link delay on a LAN; a tick is two units.
const DefaultUnit = 10 * time.Millisecond

// Timing of the coordination, on the network clock.
const (
	rollCall = 500 * time.Millisecond // how long HERE answers are awaited
	timeout  = 60 * time.Second       // an election that has not finished by then fails
	quiet    = 200 * time.Millisecond // no ring message for this long: the election is over
	// maxUnit bounds a link delay: the start alone is 20 units away, and
	// an election has a minute; a unit of a second leaves it forty.
	maxUnit = time.Second
)

// Bounds on what packets from the network can make a runner hold.
const (
	maxMembers = 128     // daemons in an election (a START packet holds about twenty)
	maxHeld    = 256     // messages held on one link, waiting for an earlier one
	maxQueue   = 1 << 14 // a node's pending events
)

// Reasons a packet is dropped, as Drops counts them.
const (
	dropBadControl = "ring control malformed"
	dropBadStart   = "ring start refused"
	dropBadMessage = "ring message malformed"
	dropStray      = "ring message stray" // for no election of ours
	dropFull       = "ring table full"
)

var errUnknownOp = errors.New("unknown operation")

// Runner is one daemon's part in live ring elections: the coordinator of
// the elections asked of it, and its node in the current election. It is
// not safe for concurrent use: the host calls it from one goroutine.
type Runner struct {
	h     Host
	name  string
	log   logrus.FieldLogger
	rng   *rand.Rand
	coord *coord   // the election this daemon coordinates, if any
	asked electReq // the ELECT packet that started it
	node  *node    // this daemon's node in the current election, if any
	drops map[string]uint64
}

// electReq names an ELECT packet: its source and seq.
type electReq struct {
	from netip.AddrPort
	seq  uint16
}

// New returns a runner that works through h.
func New(h Host, cfg Config) *Runner {
	r := &Runner{h: h, name: cfg.Name, log: cfg.Log, rng: cfg.Rand, drops: map[string]uint64{}}
	if r.log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		r.log = l
	}
	if r.rng == nil {
		r.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return r
}

// Receive handles an extension packet of kind tsp.ExtRing or
// tsp.ExtRingCtl that came from the address from.
func (r *Runner) Receive(from netip.AddrPort, p tsp.ExtPacket) {
	switch p.Kind {
	case tsp.ExtRing:
		r.message(from, p)
	case tsp.ExtRingCtl:
		r.control(from, p)
	default:
		r.log.WithFields(logrus.Fields{"kind": p.Kind.String(), "from": from.String()}).Debug("not a ring packet")
	}
}

// Drops counts the packets dropped so far, by reason.
func (r *Runner) Drops() map[string]uint64 { return maps.Clone(r.drops) }

// drop counts a packet from the network that is dropped, and says why at
// debug level: the network may send anything, often.
func (r *Runner) drop(reason string, from netip.AddrPort, err error) {
	r.drops[reason]++
	r.log.WithError(err).WithFields(logrus.Fields{"from": from.String(), "reason": reason}).Debug("dropped")
}

// Algorithm finds an algorithm that can run over the network.
func Algorithm(name string) (ring.Algorithm, error) {
	var names []string
	for _, a := range ring.All() {
		if a.HalfDuplex {
			if a.Name == name {
				return a, fmt.Errorf("algorithm %s needs half-duplex links, and the network's are full duplex: use vlt-full-register", name)
			}
			continue
		}
		if a.Name == name {
			return a, nil
		}
		names = append(names, a.Name)
	}
	return ring.Algorithm{}, fmt.Errorf("unknown algorithm %q (one of: %s)", name, strings.Join(names, ", "))
}

// control handles an ExtRingCtl packet.
func (r *Runner) control(from netip.AddrPort, p tsp.ExtPacket) {
	var c Ctl
	if err := json.Unmarshal(p.Payload, &c); err != nil {
		r.drop(dropBadControl, from, fmt.Errorf("decode: %w", err))
		return
	}
	if p.Name == r.name && c.Op != OpElect {
		return // our own roll call or start, broadcast back to us
	}
	switch c.Op {
	case OpElect:
		req := electReq{from, p.Seq}
		if rc := r.coord; rc != nil && !rc.done && r.asked == req {
			r.log.WithField("from", from.String()).Debug("duplicate ring elect ignored")
			return
		}
		reply := func(res Result) { r.sendCtl(req.from, req.seq, Ctl{Op: OpResult, Result: &res}) }
		if r.Elect(c.Algorithm, c.Unit, reply) {
			r.asked = req // after Elect, which forgets the last one
		}
	case OpHello:
		r.sendCtl(from, p.Seq, Ctl{Op: OpHere})
	case OpHere:
		rc := r.coord
		if rc == nil || rc.id != p.Seq || rc.members != nil {
			return
		}
		if _, known := rc.here[p.Name]; !known && len(rc.here) >= maxMembers-1 {
			r.drop(dropFull, from, fmt.Errorf("roll call of %d daemons: %w", len(rc.here)+1, errOutOfRange))
			return
		}
		rc.here[p.Name] = from
	case OpStart:
		if err := r.start(c, from, p.Seq); err != nil {
			r.drop(dropBadStart, from, err)
		}
	case OpCollect:
		if nd := r.node; nd != nil && nd.id == p.Seq {
			rep := nd.rep
			rep.Final = true
			r.sendCtl(from, nd.id, Ctl{Op: OpReport, Report: &rep})
		}
	case OpReport:
		if c.Report != nil {
			r.reported(p.Seq, c.Report)
		}
	case OpResult:
		// timedc's answer, sent to us: not ours to take.
	default:
		r.drop(dropBadControl, from, fmt.Errorf("op %q: %w", c.Op, errUnknownOp))
	}
}

func (r *Runner) sendCtl(to netip.AddrPort, id uint16, c Ctl) {
	p, err := ctlPacket(r.name, id, c)
	if err == nil {
		err = r.h.Send(p, to)
	}
	if err != nil {
		r.log.WithError(err).WithField("op", c.Op).Warn("ring control not sent")
	}
}

// after asks the host to call fn once wait has passed.
func (r *Runner) after(wait time.Duration, fn func()) { r.h.At(r.h.Now().Add(wait), fn) }

package timed

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp/udp"
)

// netRuntime is one network's share of the daemon, as BSD keeps one state
// per network: its election machine, the machine's timers, its sync
// rounds, its date requests and its part of the status; it carries out
// its machine's actions (loop.go), broadcasting on its network. What is
// host-wide (transport, clock, probe, control socket, metrics, ring
// runner, tracing, admin sources, the -F list's resolution) stays on the
// Daemon, d. Only the loop touches it, like the rest of the daemon's
// state.
type netRuntime struct {
	d       *Daemon
	network udp.Network
	log     *logrus.Entry // the daemon's logger with this network's field
	m       *election.Machine
	timers  map[election.TimerID]*timerEntry
	st      netStatus // its part of `timedc status`
	date    dateState
}

// newNetRuntime builds the runtime of network n, its machine seeded with
// seed so that a run replays.
func newNetRuntime(d *Daemon, n udp.Network, ecfg election.Config, seed uint64) (*netRuntime, error) {
	ecfg.Name = d.hostname
	ecfg.Network = n.String()
	m, err := election.New(ecfg, rand.New(rand.NewPCG(seed, seed^0x5eed)))
	if err != nil {
		return nil, fmt.Errorf("election: %w", err)
	}
	return &netRuntime{
		d:       d,
		network: n,
		log:     d.log.WithField("network", n.String()),
		m:       m,
		timers:  map[election.TimerID]*timerEntry{},
		date:    dateState{seq: map[string]uint16{}, forwards: map[uint16]*dateForward{}},
	}, nil
}

// runtimeFor is the runtime of the network a packet came from. Packets
// from no served network (the types BSD accepts from anywhere) go to the
// first; so, until every network is served, do those from the ignored
// ones, as they all went to the one machine before.
func (d *Daemon) runtimeFor(n *udp.Network) *netRuntime {
	if n != nil {
		for _, rt := range d.runtimes {
			if rt.network == *n {
				return rt
			}
		}
	}
	return d.primary()
}

// primary is the first network's runtime: the only one served until
// multi-network support lands, and the one the single-network views
// (status, ring elections) show.
func (d *Daemon) primary() *netRuntime { return d.runtimes[0] }

// stop stops the machine and its timers (shutdown).
func (rt *netRuntime) stop() {
	rt.step(election.Stop{}, time.Time{})
	for id := range rt.timers {
		rt.cancelTimer(id)
	}
}

// Package probesim is a simulated network between a master's probe client
// and its slaves' probe responders, on Go timers: in real time for
// benchmarks, in virtual time under testing/synctest. It carries no
// sockets, so a test of thousands of slaves costs only their timers.
package probesim

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/tsp"
)

// Net delivers the client's probes to the responders it holds, and their
// replies back, each after the one-way delay; a probe to an address with
// no responder (a slave stopped, or never there) is lost.
type Net struct {
	Client *clocksync.ProbeClient
	master netip.AddrPort
	oneWay time.Duration
	sent   atomic.Int64

	mu   sync.RWMutex
	live map[netip.AddrPort]*clocksync.ProbeResponder
}

// New returns a network whose master, at address master, measures with a
// ProbeClient on clock configured by cfg.
func New(master netip.AddrPort, clock clocksync.Clock, cfg clocksync.ProbeConfig, oneWay time.Duration) *Net {
	n := &Net{master: master, oneWay: oneWay, live: map[netip.AddrPort]*clocksync.ProbeResponder{}}
	n.Client = clocksync.NewProbeClient(n, clock, "master", cfg)
	return n
}

// Start puts a slave answering with r at addr (replacing any there).
func (n *Net) Start(addr netip.AddrPort, r *clocksync.ProbeResponder) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.live[addr] = r
}

// Stop silences the slave at addr: its probes are lost from now on.
func (n *Net) Stop(addr netip.AddrPort) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.live, addr)
}

// Sent is how many probes the client has sent.
func (n *Net) Sent() int64 { return n.sent.Load() }

// WriteExt carries a probe to its slave and the reply back.
func (n *Net) WriteExt(p tsp.ExtPacket, to netip.AddrPort) error {
	n.sent.Add(1)
	n.mu.RLock()
	r := n.live[to]
	n.mu.RUnlock()
	if r == nil {
		return nil
	}
	time.AfterFunc(n.oneWay, func() {
		rep, err := r.Reply(clocksync.Datagram{Packet: p, From: n.master})
		if err != nil {
			return
		}
		time.AfterFunc(n.oneWay, func() { n.Client.Deliver(clocksync.Datagram{Packet: rep, From: to}) })
	})
	return nil
}

package timed

import (
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/config"
	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp/udp"
)

// netRuntime is one network's share of the daemon, as BSD keeps one state
// per network: its network's index in the daemon's election.Host, the
// timers of its machine (and the Host's TimerLook there), its sync rounds,
// its date requests and its part of the status; it carries out the Host's
// actions tagged with its network (loop.go), broadcasting on its network.
// The election itself is the Host's (Daemon.host): a runtime never steps
// its machine, only reads it (m). What is host-wide (transport, clock,
// probe, control socket, metrics, ring runner, tracing, admin sources, the
// -F list's resolution, the date requests forwarded to the master) stays
// on the Daemon, d. Only the loop touches it, like the rest of the
// daemon's state.
type netRuntime struct {
	d       *Daemon
	i       int // the network's index in d.host
	network udp.Network
	label   string        // the network's short name: metrics label, status
	log     *logrus.Entry // the daemon's logger with this network's field
	timers  map[election.TimerID]*timerEntry
	st      netStatus // its part of `timedc status`
	date    dateState
	// rounds chooses the interval between this network's sync rounds
	// while master (adaptive rounds; fixed when sync-interval-min is
	// sync-interval). roundAt and prevAt are when the last two
	// rounds began (time.Now()).
	rounds          *clocksync.IntervalController
	roundAt, prevAt time.Time
}

func newNetRuntime(d *Daemon, i int, n udp.Network) *netRuntime {
	return &netRuntime{
		d:       d,
		i:       i,
		network: n,
		label:   networkLabel(n),
		log:     d.log.WithField("network", n.String()),
		timers:  map[election.TimerID]*timerEntry{},
		date:    dateState{seq: map[string]uint16{}},
		rounds:  clocksync.NewIntervalController(intervalConfig(d.cfg)),
	}
}

// intervalConfig is the adaptive rounds' configuration.
func intervalConfig(cfg *config.Config) clocksync.IntervalConfig {
	return clocksync.IntervalConfig{Floor: cfg.Sync.IntervalFloor, Ceiling: cfg.Election.SyncInterval, Target: cfg.Sync.IntervalTarget}
}

// networkLabel names a network briefly: its prefix, or "peers". An IPv6
// link with only link-local addresses is fe80::/64 on every link, so its
// interface is added (fe80::/64%eth0).
func networkLabel(n udp.Network) string {
	switch {
	case n.Peers:
		return "peers"
	case n.IPv6() && n.Prefix.Addr().IsLinkLocalUnicast():
		return n.Prefix.String() + "%" + n.Interface
	}
	return n.Prefix.String()
}

// electionConfigs are the Host's configurations, one per served network:
// the configured timers and eligibility, with the host's name, the
// network's label and the daemon's own address there, so that the Host
// drops its own LOOPs (those it forwarded carry another host's name). In
// peers mode the daemons may share an address (127.0.0.1), so none is set:
// the transport drops our own packets by name, and with one network there
// is no LOOP of ours to forward. The answer delay is widened for the
// daemons that may answer one broadcast there (the peers configured, or
// the hosts the network's prefix holds), so that their answers do not
// reach the sender as one burst.
func electionConfigs(base election.Config, hostname string, nets []udp.Network, peers int, port uint16) []election.Config {
	cfgs := make([]election.Config, len(nets))
	for i, n := range nets {
		c := base
		c.Name = hostname
		c.Network = n.String()
		hosts := peers
		if !n.Peers {
			c.Addr = netip.AddrPortFrom(n.Addr, port)
			hosts = prefixHosts(n.Prefix)
		}
		c.AnswerDelay = c.AnswerDelayFor(hosts)
		c.Link = udp.LinkOf(nets, i) // --family both: one election across the link's families
		cfgs[i] = c
	}
	return cfgs
}

// prefixHosts is how many hosts a network's prefix holds besides us (its
// addresses less the network, broadcast and our own), at most 1<<16.
func prefixHosts(p netip.Prefix) int {
	bits := p.Addr().BitLen() - p.Bits()
	if bits >= 16 {
		return 1 << 16
	}
	return max(0, 1<<bits-3)
}

// m is this network's election machine, for queries only: the Host steps
// it.
func (rt *netRuntime) m() *election.Machine { return rt.d.host.Machine(rt.i) }

// runtimeFor is the runtime of the network a packet came from, or nil for
// a packet from no served network (only the types BSD accepts from
// anywhere come so: the host answers those itself).
func (d *Daemon) runtimeFor(n *udp.Network) *netRuntime {
	if n == nil {
		return nil
	}
	for _, rt := range d.runtimes {
		if rt.network == *n {
			return rt
		}
	}
	return nil
}

// primary is the network whose state stands for the host's where one is
// shown (the top-level state and master of `timedc status`): the
// slavenet, else the first network the host masters, else the first.
func (d *Daemon) primary() *netRuntime {
	if i, ok := d.host.SlaveNet(); ok {
		return d.runtimes[i]
	}
	for _, rt := range d.runtimes {
		if d.host.Running(rt.i) && d.host.State(rt.i).IsMaster() {
			return rt
		}
	}
	return d.runtimes[0]
}

// stopAll stops the Host and every timer (shutdown).
func (d *Daemon) stopAll() {
	d.carryOut(d.host.Stop(d.now()), time.Time{})
	for _, rt := range d.runtimes {
		for id := range rt.timers {
			rt.cancelTimer(id)
		}
	}
}

// now is the time the Host's events happen at: the kernel's clock, with
// its monotonic reading, so that steps of the clock the daemon disciplines
// (or of the kernel's wall clock) do not stretch or shrink the Host's
// windows (LOOPs heard, masters known, duplicates). The one place the
// machines' time reaches the network, SETTIME's stamp, is moved to the
// disciplined clock when it is sent (loop.go).
func (d *Daemon) now() time.Time { return time.Now() }

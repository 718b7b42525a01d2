package timed

import (
	"fmt"
	"maps"
	"net/netip"
	"sort"
	"time"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/timed/control"
)

// status is what the loop remembers for `timedc status` beyond what the
// machines and the transport already know, for the whole host; each
// network's part is its runtime's netStatus. Only the loop touches it.
type status struct {
	started        time.Time
	trace          bool
	lastCorrection *control.Correction // of the host clock, whichever network's master asked
	correctedAt    time.Time           // time.Now() of lastCorrection, for its age
	frequencyPPM   float64
	freqChange     float64   // the discipline's last change of frequencyPPM
	freqChangedAt  time.Time // when; zero if it has not changed since start
	basis          *basis    // what the offset from network time is estimated from (sync.go)
	dryRun         bool      // the clock is never moved (--clock dry-run)
	// probes: when each host last probed this one (sync.go's master's
	// method); bounded by maxProbers.
	probes        map[netip.AddrPort]time.Time
	unknownTypes  uint64
	refusedAdmins uint64 // admin packets from an unprivileged source
	alarm         bool   // the max-step alarm as systemd was last told
	loopsDetected uint64 // BSD's "loop detected": cycles, LOOPs of a second master (loop.go)
	extDropped    uint64 // version-2 datagrams dropped unread (--bsd-compat)
}

func (s *status) init(d *Daemon) {
	s.started = time.Now()
	s.trace = d.cfg.Trace
	_, s.dryRun = d.clock.(*clocksync.DryRunClock)
	if ppm, _, ok := d.applier.Frequency(); ok {
		s.frequencyPPM = ppm
	}
}

func (s *status) dropUnknownType() { s.unknownTypes++ }

func (s *status) refusedAdmin() { s.refusedAdmins++ }

func (s *status) dropExt() { s.extDropped++ }

// corrected records a correction applied to the clock at the request of
// from (a master's name, this host's for a master's own share,
// operatorFrom): the last correction, the frequency's change, and the
// estimate of the offset from network time that follows from it.
func (s *status) corrected(a clocksync.Applied, from string) {
	kind := "slew"
	if a.Action == clocksync.Stepped {
		kind = "step"
	}
	now := time.Now()
	s.lastCorrection = &control.Correction{Kind: kind, Secs: a.By.Seconds(), At: now, From: from}
	s.correctedAt = now
	if a.FreqChanged {
		s.freqChange, s.freqChangedAt = a.FrequencyPPM-s.frequencyPPM, now
		s.frequencyPPM = a.FrequencyPPM
	}
	if from == operatorFrom {
		// The operator's step moved the clock by what they chose: how far
		// it is now from network time, the next correction will say.
		s.basis = nil
		return
	}
	s.basis = s.correctionBasis(now, a, from)
}

// operatorFrom is the From of `timedc step`'s corrections.
const operatorFrom = "operator"

// maxProbers bounds status.probes; past it the table starts afresh.
const maxProbers = 64

// probedBy notes a clock probe from host (ext.go).
func (s *status) probedBy(host netip.AddrPort, at time.Time) {
	if s.probes == nil || len(s.probes) >= maxProbers && s.probes[host].IsZero() {
		s.probes = map[netip.AddrPort]time.Time{}
	}
	s.probes[host] = at
}

// netStatus is one network's part of the status: its elections, the
// slaves its master measured, the packets its machine refused.
type netStatus struct {
	elections     uint64
	electionStart time.Time // first sign of the election in progress; zero when none
	lastElection  time.Duration
	slaves        map[string]*control.Slave
	refused       map[election.RefuseReason]uint64 // packets the machine would not obey
	round         roundInfo                        // as master: its last sync round (sync.go)
	heard         heardMaster                      // as slave: the corrections its master sent (sync.go)
}

// stateChanged times elections: from the first candidacy (ours or one we
// saw) to the moment this daemon is master or follows one.
func (s *netStatus) stateChanged(a election.StateChange) {
	if (a.To == election.Master || a.To == election.Slave) && !s.electionStart.IsZero() {
		s.lastElection = time.Since(s.electionStart)
		s.electionStart = time.Time{}
	}
}

// electionSeen starts timing an election unless one is being timed; it
// reports whether this is a new one.
func (s *netStatus) electionSeen() bool {
	if !s.electionStart.IsZero() {
		return false
	}
	s.elections++
	s.electionStart = time.Now()
	return true
}

func (s *netStatus) refusedPacket(r election.RefuseReason) {
	if s.refused == nil {
		s.refused = map[election.RefuseReason]uint64{}
	}
	s.refused[r]++
}

// setSlaves follows the machine's slave list, keeping what was measured
// of the slaves that stay.
func (s *netStatus) setSlaves(list []election.Peer) {
	next := make(map[string]*control.Slave, len(list))
	for _, p := range list {
		sl := s.slaves[p.Name]
		if sl == nil {
			sl = &control.Slave{State: "new"}
		}
		sl.Peer = control.Peer{Name: p.Name, Address: p.Addr.String()}
		next[p.Name] = sl
	}
	s.slaves = next
}

// roundMeasured takes in a round's measurements: each slave's, its reach
// and whether its offset counted in the network time; and the round's
// own record (sync.go). method says how a host was measured.
func (s *netStatus) roundMeasured(r syncDone, now time.Time, method func(netip.AddrPort) string) {
	s.round = roundInfo{at: now, slaves: len(r.slaves), dictated: r.network.Voters == 0, offset: r.network.Offset}
	for i, m := range r.measured {
		ok := m.Err == nil
		if ok {
			s.round.measured++
			s.round.bound = max(s.round.bound, m.ErrorBound)
		}
		sl := s.slaves[r.slaves[i].Name]
		if sl == nil {
			continue
		}
		sl.Reach <<= 1
		if !ok {
			sl.Failures++
			sl.State = "unreachable"
			continue
		}
		sl.Reach |= 1
		sl.Failures = 0
		sl.OffsetSecs = m.Offset.Seconds()
		sl.ErrorBoundSecs = m.ErrorBound.Seconds()
		sl.RTTSecs = m.RTT.Seconds()
		sl.LastSeen = now
		sl.Method = method(m.Host)
		sl.Stamps = m.Stamps
		switch {
		case r.network.Used == nil:
			sl.State = "measured" // no vote: a date change's rounds, or no trusted slave
		case r.network.Used[i]:
			sl.State = "kept"
		default:
			sl.State = "outlier"
		}
	}
}

// snapshot builds the control socket's status: each network's state,
// master and slaves in its entry of Networks, and at the top the state,
// master and slaves of the network that stands for the host (primary: the
// slavenet, else the first network it masters, else the first).
func (d *Daemon) snapshot() *control.Status {
	s := &d.st
	st := &control.Status{
		Hostname:       d.hostname,
		Clock:          d.cfg.Clock,
		MayBeMaster:    d.cfg.MayBeMaster,
		Alarm:          d.alarmStatus(d.applier.Alarm()),
		LastCorrection: s.lastCorrection,
		FrequencyPPM:   s.frequencyPPM,
		Trace:          s.trace,
		UptimeSecs:     time.Since(s.started).Seconds(),
		Packets:        map[string]control.Counter{},
		Drops:          map[string]uint64{},
	}
	d.primary().fillStatus(st)
	st.Elections = 0
	for _, rt := range d.runtimes {
		st.Elections += rt.st.elections // seen on any network
	}
	st.LoopsDetected = s.loopsDetected
	if cs, err := d.clock.State(); err == nil {
		st.FrequencyPPM = cs.FrequencyPPM
	}
	if sim, ok := d.clock.(*clocksync.SimClock); ok {
		st.OffsetSecs = sim.Offset().Seconds()
	}
	st.Sync = d.syncFacts().view(time.Now(), d.applier.Alarm())
	st.KernelSync = d.ks.view(time.Now())
	st.Reference = d.ref.view()
	for _, rt := range d.runtimes {
		st.Networks = append(st.Networks, rt.networkStatus())
	}
	ts := d.tr.Stats()
	countPackets(st.Packets, ts.Received, true)
	countPackets(st.Packets, ts.Sent, false)
	countPackets(st.Packets, ts.ReceivedExt, true)
	countPackets(st.Packets, ts.SentExt, false)
	maps.Copy(st.Drops, ts.DropCounts())
	if ts.KernelDrops > 0 {
		st.Drops[kernelDropReason] = ts.KernelDrops
	}
	if s.unknownTypes > 0 {
		st.Drops["unknown type"] = s.unknownTypes
	}
	if s.refusedAdmins > 0 {
		st.Drops["refused admin-unprivileged"] = s.refusedAdmins
	}
	if s.extDropped > 0 {
		st.Drops["bsd-compat version 2"] = s.extDropped
	}
	for _, rt := range d.runtimes {
		for r, n := range rt.st.refused {
			st.Drops["refused "+string(r)] += n
		}
	}
	for reason, n := range d.ring.Drops() {
		st.Drops[reason] = n
	}
	return st
}

// fillStatus fills in the top of the status from this network: the
// state, the master, the slaves and the elections.
func (rt *netRuntime) fillStatus(st *control.Status) {
	st.State = rt.state()
	st.StateSince = rt.m().StateSince()
	if !st.StateSince.IsZero() {
		st.InStateSecs = time.Since(st.StateSince).Seconds() // the Host's times are the kernel's (d.now)
	}
	st.Elections = rt.st.elections
	st.LastElection = rt.st.lastElection.Seconds()
	st.Master = rt.master()
	st.Slaves = rt.slaves()
}

// networkStatus is this network's entry in the status: where it is, and
// the host's state, master and slaves there.
func (rt *netRuntime) networkStatus() control.Network {
	d, n := rt.d, rt.network
	net := control.Network{Address: d.tr.LocalAddr().String()}
	switch {
	case n.IPv6():
		// No broadcast, no ICMP timestamps: BSD's daemons cannot be here.
		net = control.Network{Interface: n.Interface, Address: n.Addr.String(), Prefix: n.Prefix.String(), Group: n.Broadcast.String(),
			Note: "IPv6: probe only, no BSD daemons"}
	case !n.Peers:
		net = control.Network{Interface: n.Interface, Address: n.Addr.String(), Prefix: n.Prefix.String(), Broadcast: n.Broadcast.String()}
	}
	net.Served = true
	net.State = rt.state()
	net.Master = rt.master()
	net.Slaves = rt.slaves()
	net.Slavenet = d.host.IsSlaveNet(rt.i)
	net.Link = rt.linkNote()
	if d.host.State(rt.i).IsMaster() {
		net.RoundIntervalSecs = rt.roundInterval().Seconds()
	}
	return net
}

// roundInterval is the interval this network's rounds run at now.
func (rt *netRuntime) roundInterval() time.Duration {
	if rt.rounds.Fixed() {
		return rt.d.cfg.Election.SyncInterval
	}
	return rt.rounds.Interval()
}

// state is the host's election state on this network, or "ignore".
func (rt *netRuntime) state() string {
	if rt.d.host.Ignored(rt.i) {
		return stateIgnore
	}
	return rt.d.host.State(rt.i).String()
}

// master is the master the host follows on this network, or itself where
// it is master (at its address there); nil when it knows none.
func (rt *netRuntime) master() *control.Peer {
	m, ok := rt.d.host.Master(rt.i)
	if !ok {
		return nil
	}
	addr := m.Addr.String()
	if m.Name == rt.d.hostname {
		addr = rt.ownAddr().String()
	}
	return &control.Peer{Name: m.Name, Address: addr}
}

// ownAddr is the daemon's address on this network: its address there and
// the transport's port; in peers mode, the transport's bound address.
func (rt *netRuntime) ownAddr() netip.AddrPort {
	if rt.network.Peers {
		return rt.d.tr.LocalAddr()
	}
	return netip.AddrPortFrom(rt.network.Addr, rt.d.tr.LocalAddr().Port())
}

// slaves are this network's slaves, with what the last rounds measured,
// where the host is master; nil elsewhere.
func (rt *netRuntime) slaves() []control.Slave {
	if rt.d.host.State(rt.i) != election.Master || !rt.d.host.Running(rt.i) {
		return nil
	}
	var out []control.Slave
	for _, sl := range rt.st.slaves {
		out = append(out, *sl)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// countPackets adds per-type counts (TSP types or extension kinds) to the
// status's rx or tx column.
func countPackets[K interface {
	comparable
	fmt.Stringer
}](into map[string]control.Counter, counts map[K]uint64, rx bool) {
	for k, n := range counts {
		c := into[k.String()]
		if rx {
			c.Rx = n
		} else {
			c.Tx = n
		}
		into[k.String()] = c
	}
}

// linkNote says, on a network that is one family of a link the daemon
// serves on both (--family both), which side it is and the address of
// the other: "" elsewhere.
func (rt *netRuntime) linkNote() string {
	for _, k := range rt.d.host.Siblings(rt.i) {
		if k >= len(rt.d.runtimes) {
			continue
		}
		side, o := "IPv4", rt.d.runtimes[k].network
		if rt.network.IPv6() {
			side = "IPv6"
		}
		return fmt.Sprintf("%s side of dual-stack %s, with %v", side, rt.network.Interface, o.Addr)
	}
	return ""
}

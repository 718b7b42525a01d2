package election

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/timed-project/timed/tsp"
)

// ErrInvalidConfig is wrapped by every error Validate returns; the message
// names the field and the range it must be in.
var ErrInvalidConfig = errors.New("invalid election config")

// Config holds one daemon's identity and every timer of the election on
// one network. DefaultConfig gives BSD's values (facts §3); FastConfig the
// same protocol scaled down for simulations.
type Config struct {
	// Name is the daemon's host name, sent in every packet and compared
	// with the name field of incoming ones (packets carrying it are the
	// daemon's own broadcasts coming back and are dropped). At most
	// tsp.MaxNameLen bytes, no NUL, not empty.
	Name string

	// Network labels the network this machine serves ("10.0.0.0/24"), for
	// logs only. A host on several networks runs a Host, with one Config
	// (and one Machine) per network; see the package documentation.
	Network string

	// Addr is the daemon's own address on this network, when the runtime
	// knows it. A Host drops the LOOPs that come from it: they are its own
	// broadcasts coming back, and one it forwarded carries another host's
	// name, so the name check cannot tell. The zero value: the runtime
	// does not hand the daemon its own packets. A lone Machine ignores it.
	Addr netip.AddrPort

	// MayBeMaster is BSD's -M: the host may become candidate and master.
	// A host without it never leaves the slave side: when it has no master
	// it keeps polling with MASTERREQ.
	MayBeMaster bool

	// Reference: a reference host (package documentation, References):
	// it may be master only while the runtime says it claims to be one
	// (Host.SetReference), whatever MayBeMaster says, and its claim
	// orders it before hosts that do not claim. A Host's alone.
	Reference bool

	// Link, when not zero, names the link this network is on: a Host's
	// networks with the same Link are the families of one link (IPv4 and
	// IPv6 of one interface, the daemon's --family both), and the host
	// spans it (package documentation, "One master per link"). A lone
	// Machine ignores it.
	Link int

	// Trusted is BSD's -F list resolved to addresses (the runtime resolves
	// the host names): the sources that may be master. Port 0 matches any
	// port. It is matched against the packet's source address, never its
	// name field, which anyone can forge. Nil trusts everyone; empty but
	// not nil trusts nobody. Untrusted candidates and masters are told to
	// QUIT.
	Trusted []netip.AddrPort

	// SyncInterval is the master's period between sync rounds (SAMPLEINTVL,
	// 240 s). Each round sends every slave an ADJTIME, which restarts its
	// election timer, and broadcasts LOOP.
	SyncInterval time.Duration

	// FirstSync is the delay from becoming master to the first round (3 s
	// in BSD), so that SLAVEUPs have come in.
	FirstSync time.Duration

	// ElectionMin and ElectionMax are r and r+R of the paper: a slave's
	// election timer is drawn uniformly from [ElectionMin, ElectionMin +
	// (ElectionMax−ElectionMin)·backoff] (BSD MINTOUT/MAXTOUT, 360–900 s).
	// ElectionMin must exceed SyncInterval, or slaves of a live master
	// would start elections between two rounds; ElectionMax must exceed
	// ElectionMin (R > 0), or equal timers would collide forever.
	ElectionMin, ElectionMax time.Duration

	// BackoffCap bounds the exponential backoff: after a failed candidacy
	// the width of the election range doubles, up to BackoffCap times its
	// base width (4.3BSD's backoff; FreeBSD dropped it). It resets to 1
	// when a master is seen again.
	BackoffCap int

	// FastElection is how soon a master-eligible slave runs its own
	// election after an untrusted daemon tried to be master (FASTTOUT, 3 s).
	FastElection time.Duration

	// CandidateWait is how long a candidate waits after its ELECTION, and
	// after each new ACCEPT, before it becomes master (ELECTIONWAIT, 3 s).
	// It must be long enough for every slave's ACCEPT to arrive.
	CandidateWait time.Duration

	// AcceptWindow is how long a slave that accepted a candidate refuses
	// other candidates (refusetime, 30 s). Must be below ElectionMin.
	AcceptWindow time.Duration

	// ConflictWindow is how long a starting daemon, having received one
	// MASTERACK, waits for a second master's (300 ms in BSD).
	ConflictWindow time.Duration

	// NoMasterWait is the paper's No Master timer: how long a daemon that
	// found no master waits for signs of others before it becomes master
	// (3 s, FASTTOUT; FreeBSD goes to master at once).
	NoMasterWait time.Duration

	// ColdStartDelay is the cold start's slot per daemon. A daemon that
	// may be master, is starting (or left start-up a slave with no
	// master), and has seen other daemons probe but no master, becomes
	// master when Retransmit[0] (in which a live master answers a probe)
	// and then a delay drawn uniformly from [0, ColdStartDelay·k] have
	// passed, k the daemons seen starting, itself included (the draw at
	// most ElectionMin); a master showing itself first cancels it. The
	// first of k draws falls about ColdStartDelay in, whatever k, and the
	// others follow its MASTERUP; two within one latency δ of each other
	// (probability about δ/ColdStartDelay) make two masters, which merge
	// at once. Without it daemons that start together each see the others
	// probing and wait for an election timer (BSD does). 0 turns it off;
	// at most ElectionMin, beyond which the election timer runs first.
	ColdStartDelay time.Duration

	// SetTimeGuard: a SLAVEUP that arrives at least this long after the
	// master's MASTERUP, from a daemon not listed before it, is a new
	// daemon, answered at once with SETTIME (BSD newslave); earlier ones
	// are the MASTERUP's answers, set at the first round (3 s), or
	// adjusted there if measured near (Correction.Near). A late one from
	// a slave listed before the MASTERUP and not set since (it accepted
	// the candidacy) is a late answer: a round brought forward measures
	// it.
	SetTimeGuard time.Duration

	// AnswerDelay bounds the random delay (BSD delay1, up to 100 ms) before
	// answering a broadcast (ACCEPT to ELECTION, SLAVEUP to MASTERUP), so
	// that N answers do not reach the sender at the same instant. Zero
	// answers at once. Must be below CandidateWait.
	AnswerDelay time.Duration

	// Retransmit is the reliable-send schedule (acksend): a reliable packet
	// is sent once per element, each copy waiting that long for its answer
	// (200, 400, 800, 1600, 3200 ms: 6.2 s in all) before the next copy or,
	// after the last, failure.
	Retransmit []time.Duration

	// LostHost is how many failed sync rounds in a row drop a slave from
	// the master's list (LOSTHOST, 3).
	LostHost int

	// ResolveRounds bounds the RESOLVE rounds of a master in Conflict (3).
	ResolveRounds int

	// JoinSync, if positive, brings the master's next round forward to at
	// most JoinSync after a slave joins (a SLAVEUP answered with SETTIME
	// at once): adaptive rounds, whose controller then goes to its floor
	// while the newcomer's frequency is learnt. 0: the newcomer waits for
	// the next round, as in BSD. At most SyncInterval.
	JoinSync time.Duration

	// MaxSlaves bounds the master's slave table (BSD NHOSTS: 1013), so a
	// flood of SLAVEUPs under forged names cannot grow it without end.
	// Slaves beyond it are Refused.
	MaxSlaves int
}

// DefaultConfig returns BSD's timers (facts §3) for a daemon called name,
// and the cold start BSD lacks (ColdStartDelay 100 ms: one master about
// 0.3 s after daemons start together; 0 restores BSD's wait for an
// election timer).
func DefaultConfig(name string) Config {
	return Config{
		Name:           name,
		MayBeMaster:    true,
		SyncInterval:   240 * time.Second,
		FirstSync:      3 * time.Second,
		ElectionMin:    360 * time.Second,
		ElectionMax:    900 * time.Second,
		BackoffCap:     8,
		FastElection:   3 * time.Second,
		CandidateWait:  3 * time.Second,
		AcceptWindow:   30 * time.Second,
		ConflictWindow: 300 * time.Millisecond,
		NoMasterWait:   3 * time.Second,
		ColdStartDelay: 100 * time.Millisecond,
		SetTimeGuard:   3 * time.Second,
		AnswerDelay:    100 * time.Millisecond,
		Retransmit: []time.Duration{
			200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
			1600 * time.Millisecond, 3200 * time.Millisecond,
		},
		LostHost:      3,
		ResolveRounds: 3,
		MaxSlaves:     1013,
	}
}

// FastConfig is DefaultConfig scaled down for simulations and tests: the
// sync interval is 4 s (1/60), the election range 6–15 s, the candidate
// wait 100 ms, the retransmit schedule a tenth of BSD's (20…320 ms), the
// cold-start slot half the default's (50 ms: collisions depend on the
// latency, which does not shrink with the timers). It assumes network
// latencies of a few milliseconds.
func FastConfig(name string) Config {
	c := DefaultConfig(name)
	c.SyncInterval = 4 * time.Second
	c.FirstSync = 50 * time.Millisecond
	c.ElectionMin = 6 * time.Second
	c.ElectionMax = 15 * time.Second
	c.BackoffCap = 4
	c.FastElection = 50 * time.Millisecond
	c.CandidateWait = 100 * time.Millisecond
	c.AcceptWindow = 500 * time.Millisecond
	c.ConflictWindow = 30 * time.Millisecond
	c.NoMasterWait = 100 * time.Millisecond
	c.ColdStartDelay = 50 * time.Millisecond
	c.SetTimeGuard = 50 * time.Millisecond
	c.AnswerDelay = 2 * time.Millisecond
	c.Retransmit = []time.Duration{
		20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond,
		160 * time.Millisecond, 320 * time.Millisecond,
	}
	return c
}

// AnswerSpacing is the mean gap AnswerDelayFor leaves between the answers
// of many hosts to one broadcast: 20,000 a second, which the receiver's
// reader keeps up with on a loaded core, its socket buffer holding the
// rest.
const AnswerSpacing = 50 * time.Microsecond

// AnswerDelayFor is the answer delay for a network where hosts daemons may
// answer one broadcast (SLAVEUPs to a MASTERUP, ACCEPTs to an ELECTION).
// Each waits a uniform draw from [0, AnswerDelay], so they arrive about
// AnswerDelay/hosts apart: the delay is widened to hosts·AnswerSpacing
// (hosts counted up to MaxSlaves), never shortened, and kept to half of
// CandidateWait, which must still see every ACCEPT. BSD's 100 ms already
// spreads NHOSTS answers; the fast profile's 2 ms does not.
func (c Config) AnswerDelayFor(hosts int) time.Duration {
	hosts = max(0, min(hosts, c.MaxSlaves))
	want := min(time.Duration(hosts)*AnswerSpacing, c.CandidateWait/2)
	return max(c.AnswerDelay, want)
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// Validate checks every field and returns the first problem, wrapping
// ErrInvalidConfig.
func (c *Config) Validate() error {
	switch {
	case c.Name == "":
		return invalid("Name", "must not be empty")
	case len(c.Name) > tsp.MaxNameLen:
		return invalid("Name", "is %d bytes, must be at most %d", len(c.Name), tsp.MaxNameLen)
	case strings.IndexByte(c.Name, 0) >= 0:
		return invalid("Name", "must not contain NUL")
	case c.SyncInterval <= 0:
		return invalid("SyncInterval", "is %v, must be > 0", c.SyncInterval)
	case c.FirstSync <= 0 || c.FirstSync > c.SyncInterval:
		return invalid("FirstSync", "is %v, must be in (0, SyncInterval=%v]", c.FirstSync, c.SyncInterval)
	case c.ElectionMin <= c.SyncInterval:
		return invalid("ElectionMin", "is %v, must be > SyncInterval=%v", c.ElectionMin, c.SyncInterval)
	case c.ElectionMax <= c.ElectionMin:
		// R = 0 would make backoff useless: equal timers collide forever.
		return invalid("ElectionMax", "is %v, must be > ElectionMin=%v", c.ElectionMax, c.ElectionMin)
	case c.BackoffCap < 1 || c.BackoffCap > 1024:
		return invalid("BackoffCap", "is %d, must be in [1, 1024]", c.BackoffCap)
	case c.FastElection <= 0 || c.FastElection > c.ElectionMin:
		return invalid("FastElection", "is %v, must be in (0, ElectionMin=%v]", c.FastElection, c.ElectionMin)
	case c.CandidateWait <= 0:
		return invalid("CandidateWait", "is %v, must be > 0", c.CandidateWait)
	case c.AcceptWindow <= 0 || c.AcceptWindow >= c.ElectionMin:
		return invalid("AcceptWindow", "is %v, must be in (0, ElectionMin=%v)", c.AcceptWindow, c.ElectionMin)
	case c.ConflictWindow <= 0:
		return invalid("ConflictWindow", "is %v, must be > 0", c.ConflictWindow)
	case c.NoMasterWait <= 0:
		return invalid("NoMasterWait", "is %v, must be > 0", c.NoMasterWait)
	case c.ColdStartDelay < 0 || c.ColdStartDelay > c.ElectionMin:
		return invalid("ColdStartDelay", "is %v, must be in [0, ElectionMin=%v] (0: off)", c.ColdStartDelay, c.ElectionMin)
	case c.SetTimeGuard < 0:
		return invalid("SetTimeGuard", "is %v, must be ≥ 0", c.SetTimeGuard)
	case c.AnswerDelay < 0 || c.AnswerDelay >= c.CandidateWait:
		return invalid("AnswerDelay", "is %v, must be in [0, CandidateWait=%v)", c.AnswerDelay, c.CandidateWait)
	case len(c.Retransmit) == 0 || len(c.Retransmit) > 16:
		return invalid("Retransmit", "has %d steps, must have 1 to 16", len(c.Retransmit))
	case c.LostHost < 1:
		return invalid("LostHost", "is %d, must be ≥ 1", c.LostHost)
	case c.ResolveRounds < 1:
		return invalid("ResolveRounds", "is %d, must be ≥ 1", c.ResolveRounds)
	case c.MaxSlaves < 1:
		return invalid("MaxSlaves", "is %d, must be ≥ 1", c.MaxSlaves)
	case c.JoinSync < 0 || c.JoinSync > c.SyncInterval:
		return invalid("JoinSync", "is %v, must be in [0, SyncInterval=%v] (0: off)", c.JoinSync, c.SyncInterval)
	}
	for i, d := range c.Retransmit {
		if d <= 0 {
			return invalid(fmt.Sprintf("Retransmit[%d]", i), "is %v, must be > 0", d)
		}
	}
	for i, a := range c.Trusted {
		if !a.Addr().IsValid() {
			return invalid(fmt.Sprintf("Trusted[%d]", i), "must be a valid address")
		}
	}
	return nil
}

// RetransmitSpan is how long a reliable send can take to fail: the sum of
// the schedule (6.2 s with BSD's).
func (c Config) RetransmitSpan() time.Duration {
	var s time.Duration
	for _, d := range c.Retransmit {
		s += d
	}
	return s
}

// lastCopyAt is when the last copy of a reliable send leaves, measured from
// the first.
func (c Config) lastCopyAt() time.Duration {
	return c.RetransmitSpan() - c.Retransmit[len(c.Retransmit)-1]
}

// ElectionTimeoutMax is the longest election timer a slave can draw: with
// the backoff at its cap, r + R·BackoffCap.
func (c Config) ElectionTimeoutMax() time.Duration {
	return c.ElectionMin + (c.ElectionMax-c.ElectionMin)*time.Duration(c.BackoffCap)
}

// StateTimeout is the longest a daemon stays in a transient state when
// every packet arrives within maxLatency (a bound, derived from the code;
// the simulator checks it after every step). It returns 0 for the states
// that have no time limit (StartUp while polling, Slave, Master).
//
//   - Candidate: the candidate wait restarts at each new ACCEPT. The last
//     new ACCEPT leaves its sender at most AnswerDelay after the ELECTION
//     arrived, and its last copy lastCopyAt later; so CandidateWait +
//     2·maxLatency + AnswerDelay + lastCopyAt.
//   - Accept: AcceptWindow.
//   - Consistency: ConflictWindow.
//   - Conflict: ResolveRounds RESOLVE rounds, each ending at its first
//     answer or failing after RetransmitSpan.
//   - NoMaster: NoMasterWait.
func (c Config) StateTimeout(s State, maxLatency time.Duration) time.Duration {
	switch s {
	case Candidate:
		return c.CandidateWait + 2*maxLatency + c.AnswerDelay + c.lastCopyAt()
	case Accept:
		return c.AcceptWindow
	case Consistency:
		return c.ConflictWindow
	case Conflict:
		return time.Duration(c.ResolveRounds) * c.RetransmitSpan()
	case NoMaster:
		return c.NoMasterWait
	}
	return 0
}

// ConvergenceBound is the bound B of the simulator's first invariant: once
// a network has been connected and fault-free (no loss, no crash, no
// partition change, every packet delivered within maxLatency) for B, it
// has exactly one master and every live daemon follows it. The bound
// allows failedElections elections that end without a master (two
// candidates whose timers expire within one latency of each other, or a
// candidate that gives up on a MASTERREQ); the appendix bounds each
// collision's probability by Nδ/R, so the bound fails with probability
// of order (Nδ/R)^(failedElections+1).
//
// Derivation, every term from the code (all nodes use this config):
//
//  1. settle = RetransmitSpan + NoMasterWait + max StateTimeout: by then
//     every daemon that was starting has probed and, if it found nobody,
//     become master, and every transient state (Candidate, Accept,
//     Consistency, Conflict) entered before the network healed has ended.
//  2. If no master exists then, the eligible slaves' election timers run
//     (each at most ElectionTimeoutMax, backoff at its cap). The first
//     expiry starts an election that, without a collision, ends with a
//     master within StateTimeout(Candidate). Each failed election costs at
//     most one more ElectionTimeoutMax + StateTimeout(Candidate), since
//     every slave redrew its timer when it saw the ELECTION:
//     elect = (failedElections+1)·(ElectionTimeoutMax + StateTimeout(Candidate)).
//  3. Two masters in one network meet within one SyncInterval: each sends
//     LOOP every round, the one with the lower name QUITs the other (a
//     higher-named master answers a LOOP with its own LOOP), and the
//     winner's MASTERUP brings the loser's slaves over: merge =
//     SyncInterval + 6·maxLatency + 2·AnswerDelay.
//  4. A daemon that follows no master or a master that dropped it (after
//     LostHost failed rounds during the partition) is not sent ADJTIME;
//     its election timer, at most ElectionTimeoutMax, makes it a candidate
//     (eligible hosts: the master QUITs it and lists it) or makes it poll
//     (other hosts: MASTERACK, ConflictWindow, SLAVEUP), and the master
//     lists it at once: straggle = ElectionTimeoutMax + RetransmitSpan +
//     ConflictWindow + AnswerDelay + 4·maxLatency. A daemon the master
//     still lists gets ADJTIME within one SyncInterval and follows it.
//
// B = settle + elect + merge + straggle + SyncInterval.
func (c Config) ConvergenceBound(maxLatency time.Duration, failedElections int) time.Duration {
	maxState := c.StateTimeout(Candidate, maxLatency)
	for _, s := range []State{Accept, Consistency, Conflict, NoMaster} {
		maxState = max(maxState, c.StateTimeout(s, maxLatency))
	}
	settle := c.RetransmitSpan() + c.NoMasterWait + maxState
	elect := time.Duration(failedElections+1) * (c.ElectionTimeoutMax() + c.StateTimeout(Candidate, maxLatency))
	merge := c.SyncInterval + 6*maxLatency + 2*c.AnswerDelay
	straggle := c.ElectionTimeoutMax() + c.RetransmitSpan() + c.ConflictWindow + c.AnswerDelay + 4*maxLatency
	return settle + elect + merge + straggle + c.SyncInterval
}

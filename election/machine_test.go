package election

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// harness drives one machine by hand and keeps its timers.
type harness struct {
	t      *testing.T
	m      *Machine
	now    time.Time
	timers map[TimerID]time.Time
	last   []Action
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	m, err := New(cfg, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, m: m, now: t0, timers: map[TimerID]time.Time{}}
}

func (h *harness) step(ev Event) []Action {
	rd := h.m.Step(h.now, ev)
	for _, a := range rd.Actions {
		switch a := a.(type) {
		case SetTimer:
			h.timers[a.ID] = h.now.Add(a.After)
		case CancelTimer:
			delete(h.timers, a.ID)
		}
	}
	h.last = rd.Actions
	return rd.Actions
}

// fire advances time to the timer's deadline and fires it.
func (h *harness) fire(id TimerID) []Action {
	h.t.Helper()
	at, ok := h.timers[id]
	if !ok {
		h.t.Fatalf("timer %v not set; state %v", id, h.m.State())
	}
	delete(h.timers, id)
	h.now = at
	return h.step(TimerFired{ID: id})
}

// fireSends fires pending send timers until none is left, and returns
// what they sent.
func (h *harness) fireSends() []Send {
	var out []Send
	for {
		var next TimerID
		for id := range h.timers {
			if id >= firstSendTimer && (next == 0 || h.timers[id].Before(h.timers[next])) {
				next = id
			}
		}
		if next == 0 {
			return out
		}
		out = append(out, sends(h.fire(next))...)
	}
}

func addr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 525)
}

func (h *harness) recv(t tsp.Type, seq uint16, name string, from netip.AddrPort) []Action {
	return h.step(Recv{Packet: tsp.Packet{Type: t, Version: 1, Seq: seq, Name: name}, From: from})
}

func sends(as []Action) []Send {
	var out []Send
	for _, a := range as {
		if s, ok := a.(Send); ok {
			out = append(out, s)
		}
	}
	return out
}

func sendTypes(as []Action) string {
	var out []string
	for _, s := range sends(as) {
		to := s.To.String()
		if s.Broadcast {
			to = "*"
		}
		out = append(out, s.Packet.Type.String()+">"+to)
	}
	return strings.Join(out, " ")
}

// toMaster brings a fresh machine to Master through Start-up and No Master.
func (h *harness) toMaster() {
	h.t.Helper()
	h.step(Start{})
	h.fireSends()
	h.fire(TimerNoMaster)
	if h.m.State() != Master {
		h.t.Fatalf("state %v, want master", h.m.State())
	}
}

// toSlave brings a fresh machine to Slave of "m" at addr(9).
func (h *harness) toSlave() {
	h.t.Helper()
	acts := h.step(Start{})
	req := sends(acts)[0].Packet
	h.recv(tsp.MasterAck, req.Seq, "m", addr(9))
	h.fire(TimerConsistency)
	if h.m.State() != Slave {
		h.t.Fatalf("state %v, want slave", h.m.State())
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{DefaultConfig("a"), FastConfig("a")} {
		if err := c.Validate(); err != nil {
			t.Fatalf("%v", err)
		}
	}
	bad := []struct {
		field string
		mod   func(*Config)
	}{
		{"Name", func(c *Config) { c.Name = "" }},
		{"Name", func(c *Config) { c.Name = strings.Repeat("x", 300) }},
		{"SyncInterval", func(c *Config) { c.SyncInterval = 0 }},
		{"ElectionMin", func(c *Config) { c.ElectionMin = c.SyncInterval }},
		{"ElectionMax", func(c *Config) { c.ElectionMax = c.ElectionMin }},
		{"BackoffCap", func(c *Config) { c.BackoffCap = 0 }},
		{"AcceptWindow", func(c *Config) { c.AcceptWindow = c.ElectionMin }},
		{"AnswerDelay", func(c *Config) { c.AnswerDelay = c.CandidateWait }},
		{"Retransmit", func(c *Config) { c.Retransmit = nil }},
		{"Retransmit[2]", func(c *Config) { c.Retransmit = []time.Duration{1, 2, 0} }},
		{"LostHost", func(c *Config) { c.LostHost = 0 }},
		{"ColdStartDelay", func(c *Config) { c.ColdStartDelay = -1 }},
		{"ColdStartDelay", func(c *Config) { c.ColdStartDelay = c.ElectionMin + 1 }},
		{"Trusted[0]", func(c *Config) { c.Trusted = []netip.AddrPort{{}} }},
	}
	for _, b := range bad {
		c := DefaultConfig("a")
		b.mod(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), b.field+" ") {
			t.Errorf("%s: got %v", b.field, err)
		}
	}
	if _, err := New(DefaultConfig("a"), nil); !errors.Is(err, ErrNoRand) {
		t.Errorf("nil rng: %v", err)
	}
}

func TestStateNames(t *testing.T) {
	want := "startup nomaster slave candidate accept master conflict consistency"
	var got []string
	for s := StartUp; s < numStates; s++ {
		got = append(got, s.String())
	}
	if strings.Join(got, " ") != want {
		t.Fatalf("got %q", got)
	}
}

// Start-up: MASTERREQ is broadcast on BSD's schedule (200, 400, 800, 1600,
// 3200 ms), then No Master, then Master with MASTERUP.
func TestStartUpRetransmitSchedule(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	acts := h.step(Start{})
	if got := sendTypes(acts); got != "MASTERREQ>*" {
		t.Fatalf("start sent %q", got)
	}
	seq := sends(acts)[0].Packet.Seq
	var waits []time.Duration
	start := h.now
	for h.m.State() == StartUp {
		var id TimerID
		for i := range h.timers {
			id = i
		}
		prev := h.now
		acts = h.fire(id)
		waits = append(waits, h.now.Sub(prev))
		for _, s := range sends(acts) {
			if s.Packet.Seq != seq || s.Packet.Type != tsp.MasterReq {
				t.Fatalf("retransmission %v, want MASTERREQ seq %d", s.Packet, seq)
			}
		}
	}
	want := []time.Duration{200, 400, 800, 1600, 3200}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if !reflect.DeepEqual(waits, want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	if h.now.Sub(start) != 6200*time.Millisecond || h.m.State() != NoMaster {
		t.Fatalf("after %v state %v", h.now.Sub(start), h.m.State())
	}
	acts = h.fire(TimerNoMaster)
	if got := sendTypes(acts); got != "MASTERUP>*" || h.m.State() != Master {
		t.Fatalf("sent %q, state %v", got, h.m.State())
	}
	// Sequence numbers are always set and increase: MASTERUP follows MASTERREQ.
	if up := sends(acts)[0].Packet.Seq; up != seq+1 {
		t.Fatalf("MASTERUP seq %d, want %d", up, seq+1)
	}
}

// CONFLICT is acknowledged (BSD waited for an ACK nobody sent), and the
// master goes to Conflict and broadcasts RESOLVE.
func TestConflictIsAcked(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toMaster()
	acts := h.recv(tsp.Conflict, 77, "b", addr(2))
	if got := sendTypes(acts); got != "ACK>10.0.0.2:525 RESOLVE>*" {
		t.Fatalf("sent %q", got)
	}
	if s := sends(acts)[0]; s.Packet.Seq != 77 {
		t.Fatalf("ACK seq %d, want 77", s.Packet.Seq)
	}
	if h.m.State() != Conflict {
		t.Fatalf("state %v", h.m.State())
	}
	// Another master answers: it is told to QUIT.
	res := sends(acts)[1].Packet
	acts = h.recv(tsp.MasterAck, res.Seq, "c", addr(3))
	if got := sendTypes(acts); !strings.Contains(got, "QUIT>10.0.0.3:525") {
		t.Fatalf("sent %q", got)
	}
}

// A foreign master's LOOP gets a QUIT (lower name wins) or our own LOOP
// (higher name), and nothing else: BSD's missing break fell through into
// TEST and started a sync round.
func TestLoopDoesNotFallThrough(t *testing.T) {
	h := newHarness(t, DefaultConfig("b"))
	h.toMaster()
	acts := h.recv(tsp.Loop, 5, "c", addr(3))
	if got := sendTypes(acts); got != "QUIT>10.0.0.3:525" {
		t.Fatalf("LOOP from higher name: sent %q", got)
	}
	acts = h.recv(tsp.Loop, 6, "a", addr(1))
	if got := sendTypes(acts); got != "LOOP>10.0.0.1:525" {
		t.Fatalf("LOOP from lower name: sent %q", got)
	}
	for _, a := range acts {
		if _, ok := a.(SyncRound); ok {
			t.Fatal("LOOP started a sync round")
		}
	}
}

// Every packet the machine originates carries a fresh sequence number;
// ELECTION too (BSD left it unset).
func TestSequenceAlwaysSet(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toSlave()
	acts := h.step(ForceElection{})
	el := sends(acts)
	if len(el) != 1 || el[0].Packet.Type != tsp.Election {
		t.Fatalf("sent %v", el)
	}
	acts = h.fire(TimerCandidate)
	up := sends(acts)[0].Packet
	if up.Type != tsp.MasterUp || up.Seq != el[0].Packet.Seq+1 {
		t.Fatalf("MASTERUP %v after ELECTION seq %d", up, el[0].Packet.Seq)
	}
}

// A slave that never answers is dropped after LostHost failed rounds.
func TestLostHostAfterThreeRounds(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toMaster()
	h.recv(tsp.SlaveUp, 1, "s", addr(2))
	if !h.m.IsSlave("s") {
		t.Fatal("SLAVEUP did not add the slave")
	}
	for round := 0; round < 3; round++ {
		acts := h.fire(TimerSync)
		var sr SyncRound
		for _, a := range acts {
			if r, ok := a.(SyncRound); ok {
				sr = r
			}
		}
		if len(sr.Slaves) != 1 {
			t.Fatalf("round %d: %v", round, acts)
		}
		acts = h.step(SyncResult{Round: sr.Round, Corrections: []Correction{{Name: "s", Delta: 10 * time.Millisecond}}})
		if !strings.Contains(sendTypes(acts), "10.0.0.2:525") {
			t.Fatalf("round %d: no correction sent: %q", round, sendTypes(acts))
		}
		h.fireSends()
	}
	if h.m.IsSlave("s") {
		t.Fatal("slave still listed after 3 failed rounds")
	}
}

// Answered rounds reset the failure count.
func TestAdjTimeAckKeepsSlave(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toMaster()
	h.recv(tsp.SlaveUp, 1, "s", addr(2))
	for round := 0; round < 5; round++ {
		acts := h.fire(TimerSync)
		var sr SyncRound
		for _, a := range acts {
			if r, ok := a.(SyncRound); ok {
				sr = r
			}
		}
		acts = h.step(SyncResult{Round: sr.Round, Corrections: []Correction{{Name: "s"}}})
		for _, s := range sends(acts) {
			if s.To == addr(2) {
				h.recv(tsp.Ack, s.Packet.Seq, "s", addr(2))
			}
		}
	}
	if !h.m.IsSlave("s") {
		t.Fatal("answering slave dropped")
	}
}

func TestSlaveAppliesAdjTimeOnce(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toSlave()
	p := tsp.Packet{Type: tsp.AdjTime, Version: 1, Seq: 9, Name: "m", Time: tsp.Timeval{Sec: -1, Usec: 990000}}
	var adj []AdjustClock
	for range 2 {
		acts := h.step(Recv{Packet: p, From: addr(9)})
		if got := sendTypes(acts); got != "ACK>10.0.0.9:525" {
			t.Fatalf("sent %q", got)
		}
		for _, a := range acts {
			if a, ok := a.(AdjustClock); ok {
				adj = append(adj, a)
			}
		}
		if _, ok := h.timers[TimerElection]; !ok {
			t.Fatal("election timer not restarted")
		}
	}
	if len(adj) != 1 || adj[0].Delta != -10*time.Millisecond {
		t.Fatalf("adjustments %v, want one of -10ms", adj)
	}
}

// Candidate: REFUSE → Slave with the election range doubled, up to the
// cap; a MASTERUP resets the backoff.
func TestBackoff(t *testing.T) {
	cfg := DefaultConfig("a")
	h := newHarness(t, cfg)
	h.toSlave()
	for i, want := range []int{2, 4, 8, 8} {
		h.step(ForceElection{})
		h.recv(tsp.Refuse, uint16(100+i), "b", addr(2))
		if h.m.State() != Slave || h.m.Backoff() != want {
			t.Fatalf("after refusal %d: %v backoff %d, want slave %d", i, h.m.State(), h.m.Backoff(), want)
		}
		d := h.timers[TimerElection].Sub(h.now)
		if d < cfg.ElectionMin || d > cfg.ElectionMin+(cfg.ElectionMax-cfg.ElectionMin)*time.Duration(want) {
			t.Fatalf("election timer %v outside the range for backoff %d", d, want)
		}
	}
	h.recv(tsp.MasterUp, 200, "m", addr(9))
	if h.m.Backoff() != 1 {
		t.Fatalf("backoff %d after MASTERUP", h.m.Backoff())
	}
}

// Slaves: the first candidate gets ACCEPT, later ones REFUSE until the
// accept window ends.
func TestAcceptThenRefuse(t *testing.T) {
	cfg := DefaultConfig("a")
	cfg.AnswerDelay = 0
	h := newHarness(t, cfg)
	h.toSlave()
	if got := sendTypes(h.recv(tsp.Election, 1, "b", addr(2))); got != "ACCEPT>10.0.0.2:525" {
		t.Fatalf("first ELECTION: %q", got)
	}
	if h.m.State() != Accept {
		t.Fatalf("state %v", h.m.State())
	}
	if got := sendTypes(h.recv(tsp.Election, 1, "c", addr(3))); got != "REFUSE>10.0.0.3:525" {
		t.Fatalf("second ELECTION: %q", got)
	}
	h.fire(TimerAccept)
	if h.m.State() != Slave {
		t.Fatalf("state %v after the window", h.m.State())
	}
}

func TestTrust(t *testing.T) {
	cfg := DefaultConfig("a")
	cfg.Trusted = []netip.AddrPort{netip.AddrPortFrom(addr(9).Addr(), 0)}
	h := newHarness(t, cfg)
	acts := h.step(Start{})
	req := sends(acts)[0].Packet
	// An untrusted master's MASTERACK is suppressed with QUIT, even when
	// it carries the trusted master's name: trust binds to the address.
	acts = h.recv(tsp.MasterAck, req.Seq, "m", addr(6))
	if got := sendTypes(acts); got != "QUIT>10.0.0.6:525" {
		t.Fatalf("untrusted MASTERACK: %q", got)
	}
	h.recv(tsp.Ack, sends(acts)[0].Packet.Seq, "m", addr(6))
	h.recv(tsp.MasterAck, req.Seq, "m", addr(9)) // trusted: its address is listed
	h.fire(TimerConsistency)
	if mp, _ := h.m.Master(); h.m.State() != Slave || mp.Name != "m" {
		t.Fatalf("state %v master %v", h.m.State(), mp)
	}
	// An untrusted ADJTIME is not applied.
	acts = h.step(Recv{Packet: tsp.Packet{Type: tsp.AdjTime, Version: 1, Seq: 3, Name: "evil"}, From: addr(6)})
	for _, a := range acts {
		if _, ok := a.(AdjustClock); ok {
			t.Fatal("applied an untrusted ADJTIME")
		}
	}
	for _, s := range sends(acts) {
		if s.Packet.Type == tsp.Quit {
			h.recv(tsp.Ack, s.Packet.Seq, "evil", addr(6))
		}
	}
	// An untrusted candidate is told to QUIT.
	if got := sendTypes(h.recv(tsp.Election, 4, "evil", addr(6))); !strings.Contains(got, "QUIT>10.0.0.6:525") {
		t.Fatalf("untrusted ELECTION: %q", got)
	}
}

// A host that may not be master never becomes a candidate: its election
// timer makes it poll.
func TestNotEligibleNeverCandidate(t *testing.T) {
	cfg := DefaultConfig("a")
	cfg.MayBeMaster = false
	h := newHarness(t, cfg)
	h.toSlave()
	h.step(ForceElection{})
	if h.m.State() != Slave {
		t.Fatalf("forced election: %v", h.m.State())
	}
	acts := h.fire(TimerElection)
	if h.m.State() != StartUp || sendTypes(acts) != "MASTERREQ>*" {
		t.Fatalf("timer: %v, sent %q", h.m.State(), sendTypes(acts))
	}
	h.fireSends()
	if h.m.State() != StartUp {
		t.Fatalf("no answer: %v, want startup (polling)", h.m.State())
	}
	if _, ok := h.timers[TimerElection]; !ok {
		t.Fatal("no re-poll timer")
	}
}

// A cancelled timer's late expiry is ignored; a live timer's expiry is
// taken even if now (a host clock, stepped back) is before its deadline.
func TestTimerExpiry(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toSlave()
	h.step(ForceElection{})
	h.fire(TimerCandidate)
	if h.m.State() != Master {
		t.Fatalf("state %v", h.m.State())
	}
	// The election timer was cancelled on the way: a late expiry does nothing.
	if acts := h.step(TimerFired{ID: TimerElection}); len(acts) != 0 {
		t.Fatalf("cancelled timer acted: %v", acts)
	}
	// The clock is stepped back an hour; the sync timer still fires.
	h.now = h.now.Add(-time.Hour)
	acts := h.step(TimerFired{ID: TimerSync})
	if got := sendTypes(acts); got != "LOOP>*" {
		t.Fatalf("sync timer after a backward step: %q", got)
	}
	h.step(Stop{})
	if acts := h.step(TimerFired{ID: TimerSync}); len(acts) != 0 {
		t.Fatalf("timer after stop acted: %v", acts)
	}
}

// The same seed replays the same actions.
func TestDeterministic(t *testing.T) {
	run := func() string {
		h := newHarness(t, DefaultConfig("a"))
		h.toSlave()
		h.fire(TimerElection)
		h.fire(TimerCandidate)
		return fmt.Sprint(h.last, h.m.seq)
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("runs differ:\n%s\n%s", a, b)
	}
}

func TestStopCancelsTimers(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toMaster()
	h.step(Stop{})
	if len(h.timers) != 0 {
		t.Fatalf("timers left: %v", h.timers)
	}
	if acts := h.recv(tsp.MasterReq, 1, "b", addr(2)); len(acts) != 0 {
		t.Fatalf("stopped machine answered: %v", acts)
	}
}

// BSD leaves ELECTION's seq unset, so a BSD candidate may repeat the same
// value at its next election: the duplicate filter forgets after twice the
// retransmit span.
func TestRepeatedElectionSeqHeardLater(t *testing.T) {
	cfg := DefaultConfig("a")
	cfg.AnswerDelay = 0
	h := newHarness(t, cfg)
	h.toSlave()
	if got := sendTypes(h.recv(tsp.Election, 0, "b", addr(2))); got != "ACCEPT>10.0.0.2:525" {
		t.Fatalf("first: %q", got)
	}
	if got := sendTypes(h.recv(tsp.Election, 0, "b", addr(2))); got != "" {
		t.Fatalf("network duplicate answered: %q", got)
	}
	h.fire(TimerAccept)
	h.now = h.now.Add(2 * cfg.RetransmitSpan())
	if got := sendTypes(h.recv(tsp.Election, 0, "b", addr(2))); got != "ACCEPT>10.0.0.2:525" {
		t.Fatalf("next election: %q", got)
	}
}

// Two masters that QUIT each other: the lower name keeps its place.
func TestMutualQuitLowerNameStays(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toMaster()
	acts := h.recv(tsp.Loop, 5, "b", addr(2)) // a < b: QUIT b
	if got := sendTypes(acts); got != "QUIT>10.0.0.2:525" {
		t.Fatalf("sent %q", got)
	}
	h.recv(tsp.Quit, 9, "b", addr(2)) // b's QUIT crossed ours
	if h.m.State() != Master {
		t.Fatalf("state %v, want master", h.m.State())
	}
	// Once b has acknowledged, a broadcasts MASTERUP to collect b's slaves.
	acts = h.recv(tsp.Ack, sends(acts)[0].Packet.Seq, "b", addr(2))
	if got := sendTypes(acts); got != "MASTERUP>*" {
		t.Fatalf("after the ACK: %q", got)
	}
}

// TestSetTrustedReload: a SIGHUP can change the trusted list; an address
// with port 0 matches any port, one with a port only that port, and an
// empty list trusts everyone again.
func TestSetTrustedReload(t *testing.T) {
	m, err := New(FastConfig("self"), rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if !m.isTrusted(addr(7)) {
		t.Fatal("no list must trust everyone")
	}
	anyPort := netip.AddrPortFrom(addr(2).Addr(), 0)
	onePort := netip.MustParseAddrPort("127.0.0.1:15250")
	m.SetTrusted([]netip.AddrPort{anyPort, onePort})
	for _, c := range []struct {
		from netip.AddrPort
		want bool
	}{
		{addr(2), true},
		{netip.AddrPortFrom(addr(2).Addr(), 40000), true},
		{addr(7), false},
		{onePort, true},
		{netip.MustParseAddrPort("127.0.0.1:15251"), false},
		{netip.MustParseAddrPort("[::ffff:127.0.0.1]:15250"), true},
	} {
		if got := m.isTrusted(c.from); got != c.want {
			t.Errorf("trusted(%v) = %v, want %v", c.from, got, c.want)
		}
	}
	m.SetTrusted([]netip.AddrPort{})
	if m.isTrusted(addr(2)) {
		t.Fatal("an empty list (nothing resolved) must trust nobody")
	}
	m.SetTrusted(nil)
	if !m.isTrusted(addr(7)) {
		t.Fatal("no list must trust everyone again")
	}
}

// TestLargeCorrectionIsSetTime: a correction the clock layer marks Set
// (at or above its step threshold) goes out as SETTIME, a small one as
// ADJTIME, once the new slave's first SETTIME was acknowledged.
func TestLargeCorrectionIsSetTime(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toMaster()
	h.recv(tsp.SlaveUp, 1, "s", addr(2))
	var got []tsp.Type
	for _, c := range []Correction{{Name: "s"}, {Name: "s", Delta: 30 * time.Second, Set: true}, {Name: "s", Delta: 10 * time.Millisecond}} {
		var sr SyncRound
		for _, a := range h.fire(TimerSync) {
			if r, ok := a.(SyncRound); ok {
				sr = r
			}
		}
		for _, s := range sends(h.step(SyncResult{Round: sr.Round, Corrections: []Correction{c}})) {
			if s.To == addr(2) {
				got = append(got, s.Packet.Type)
				h.recv(tsp.Ack, s.Packet.Seq, "s", addr(2))
			}
		}
	}
	want := []tsp.Type{tsp.SetTime, tsp.SetTime, tsp.AdjTime} // new slave, Set, small
	if !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
}

// RoundOpen says which round a SyncResult would be taken for, and the
// runtime applies the master's own share only then: the current round,
// before its result, while master. A round overtaken by a forced one (a
// date change starts one) is closed, as is every round once the machine
// has stopped.
func TestRoundOpen(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toMaster()
	h.recv(tsp.SlaveUp, 1, "s", addr(2))
	round := func(acts []Action) uint64 {
		t.Helper()
		for _, a := range acts {
			if r, ok := a.(SyncRound); ok {
				return r.Round
			}
		}
		t.Fatalf("no round started: %v", acts)
		return 0
	}
	r1 := round(h.fire(TimerSync))
	if !h.m.RoundOpen(r1) {
		t.Fatalf("round %d not open once started", r1)
	}
	r2 := round(h.step(ForceElection{}))
	if h.m.RoundOpen(r1) || !h.m.RoundOpen(r2) {
		t.Fatalf("after a forced round: round %d open %v, round %d open %v", r1, h.m.RoundOpen(r1), r2, h.m.RoundOpen(r2))
	}
	h.step(SyncResult{Round: r2, Corrections: []Correction{{Name: "s"}}})
	if h.m.RoundOpen(r2) {
		t.Fatalf("round %d still open after its result", r2)
	}
	r3 := round(h.fire(TimerSync))
	h.step(Stop{})
	if h.m.RoundOpen(r3) {
		t.Fatalf("round %d open on a stopped machine", r3)
	}
}

// syncRoundOf is the SyncRound among acts.
func syncRoundOf(t *testing.T, acts []Action) SyncRound {
	t.Helper()
	for _, a := range acts {
		if r, ok := a.(SyncRound); ok {
			return r
		}
	}
	t.Fatalf("no SyncRound in %v", acts)
	return SyncRound{}
}

// Adaptive rounds: SyncResult.Next moves the next round to Next after the
// start of this one, capped at SyncInterval; without it the rounds stay
// SyncInterval apart, as BSD's.
func TestSyncResultNext(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toMaster()
	h.recv(tsp.SlaveUp, 1, "s", addr(2))
	for _, c := range []struct{ next, want time.Duration }{
		{8 * time.Second, 8 * time.Second},
		{0, 240 * time.Second},
		{64 * time.Second, 64 * time.Second},
		{time.Hour, 240 * time.Second},
	} {
		sr := syncRoundOf(t, h.fire(TimerSync))
		start := h.now
		h.now = h.now.Add(2 * time.Second) // the round measured for 2 s
		h.step(SyncResult{Round: sr.Round, Corrections: []Correction{{Name: "s"}}, Next: c.next})
		if got := h.timers[TimerSync].Sub(start); got != c.want {
			t.Fatalf("Next %v: next round %v after this one, want %v", c.next, got, c.want)
		}
		for _, s := range sends(h.last) {
			h.recv(tsp.Ack, s.Packet.Seq, "s", addr(2))
		}
	}
}

// A correction still unanswered when the next round's goes out is
// cancelled: retransmitted after the new one, it would move the slave
// back by the old amount.
func TestStaleCorrectionCancelled(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toMaster()
	h.recv(tsp.SlaveUp, 1, "s", addr(2))
	sr := syncRoundOf(t, h.fire(TimerSync))
	acts := h.step(SyncResult{Round: sr.Round, Corrections: []Correction{{Name: "s", Delta: time.Millisecond}}, Next: time.Second})
	first := sends(acts)
	if len(first) != 1 {
		t.Fatalf("round 1 sent %v", first)
	}
	// Unanswered; the next round comes before the retransmissions end.
	sr = syncRoundOf(t, h.fire(TimerSync))
	h.step(SyncResult{Round: sr.Round, Corrections: []Correction{{Name: "s", Delta: 2 * time.Millisecond}}, Next: time.Second})
	copies := h.fireSends()
	for _, c := range copies {
		if c.Packet.Seq == first[0].Packet.Seq {
			t.Fatalf("round 1's ADJTIME (seq %d) retransmitted after round 2's", c.Packet.Seq)
		}
	}
	if len(copies) == 0 {
		t.Fatal("round 2's ADJTIME was not retransmitted either")
	}
}

// JoinSync: a slave joining between rounds brings the next round forward
// to JoinSync from its SLAVEUP, never later than it was; off (0), it
// waits for the round as in BSD.
func TestJoinSync(t *testing.T) {
	for _, c := range []struct {
		join, want time.Duration
	}{{8 * time.Second, 8 * time.Second}, {0, 240*time.Second - 100*time.Second}} {
		cfg := DefaultConfig("a")
		cfg.JoinSync = c.join
		h := newHarness(t, cfg)
		h.toMaster()
		h.recv(tsp.SlaveUp, 1, "s", addr(2))
		sr := syncRoundOf(t, h.fire(TimerSync))
		h.step(SyncResult{Round: sr.Round, Corrections: []Correction{{Name: "s"}}})
		h.now = h.now.Add(100 * time.Second)
		h.recv(tsp.SlaveUp, 2, "new", addr(3))
		if got := h.timers[TimerSync].Sub(h.now); got != c.want {
			t.Errorf("JoinSync %v: next round %v after the SLAVEUP, want %v", c.join, got, c.want)
		}
		// A second newcomer does not push it later.
		h.now = h.now.Add(time.Second)
		h.recv(tsp.SlaveUp, 3, "newer", addr(4))
		if got := h.timers[TimerSync].Sub(h.now); c.join > 0 && got != c.join-time.Second {
			t.Errorf("JoinSync %v: a second SLAVEUP moved the round to %v from now", c.join, got)
		}
	}
	bad := DefaultConfig("a")
	bad.JoinSync = time.Hour
	if _, err := New(bad, nil); err == nil || !strings.Contains(err.Error(), "JoinSync") {
		t.Errorf("JoinSync beyond SyncInterval: %v", err)
	}
}

package election

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/timed-project/timed/tsp"
)

func refusedReasons(as []Action) []RefuseReason {
	var out []RefuseReason
	for _, a := range as {
		if r, ok := a.(Refused); ok {
			out = append(out, r.Reason)
		}
	}
	return out
}

func appliesClock(as []Action) bool {
	for _, a := range as {
		switch a.(type) {
		case AdjustClock, SetClock:
			return true
		}
	}
	return false
}

// TestForgedCorrectionRefused: an ADJTIME or SETTIME carrying the
// master's name from another address is refused, unacknowledged and
// reported; the same packet from the master's address is applied.
func TestForgedCorrectionRefused(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toSlave() // master "m" at addr(9)
	for _, ty := range []tsp.Type{tsp.AdjTime, tsp.SetTime} {
		acts := h.step(Recv{Packet: tsp.Packet{Type: ty, Version: 1, Seq: 40, Name: "m", Time: tsp.Timeval{Sec: 4995}}, From: addr(6)})
		if appliesClock(acts) || len(sends(acts)) != 0 {
			t.Fatalf("forged %v: applied or answered: %v", ty, acts)
		}
		if got := refusedReasons(acts); len(got) != 1 || got[0] != RefusedNotFollowed {
			t.Fatalf("forged %v: refused %v", ty, got)
		}
	}
	acts := h.step(Recv{Packet: tsp.Packet{Type: tsp.AdjTime, Version: 1, Seq: 41, Name: "m", Time: tsp.Timeval{Usec: 5000}}, From: addr(9)})
	if !appliesClock(acts) || sendTypes(acts) != "ACK>10.0.0.9:525" {
		t.Fatalf("master's own ADJTIME: %v", acts)
	}
	if m, _ := h.m.Master(); m.Addr != addr(9) {
		t.Fatalf("master now %v", m)
	}
}

// TestStartUpTakesNoCorrection: before a master is followed no
// correction is taken from anyone; the probe finds the master.
func TestStartUpTakesNoCorrection(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.step(Start{})
	acts := h.step(Recv{Packet: tsp.Packet{Type: tsp.SetTime, Version: 1, Seq: 7, Name: "m", Time: tsp.Timeval{Sec: 900}}, From: addr(6)})
	if appliesClock(acts) || h.m.State() != StartUp {
		t.Fatalf("start-up took a SETTIME: state %v, %v", h.m.State(), acts)
	}
}

// TestQuitStormIgnored: QUITs from an address that never acted as a
// master leave a master in place; it asks the sender once whether it is
// a master, and a forger who cannot answer changes nothing.
func TestQuitStormIgnored(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toMaster()
	asks := 0
	for i := range 20 {
		acts := h.recv(tsp.Quit, uint16(100+i), "zz", addr(6))
		for _, s := range sends(acts) {
			switch s.Packet.Type {
			case tsp.MasterReq:
				asks++
			case tsp.Ack:
				t.Fatal("a refused QUIT was acknowledged")
			}
		}
	}
	if h.m.State() != Master || asks != 1 {
		t.Fatalf("state %v after the storm, %d MASTERREQs (want master, 1)", h.m.State(), asks)
	}
	// A MASTERACK that does not answer our question proves nothing.
	h.recv(tsp.MasterAck, 1, "zz", addr(6))
	h.recv(tsp.Quit, 200, "zz", addr(6))
	if h.m.State() != Master {
		t.Fatalf("state %v after an unsolicited MASTERACK", h.m.State())
	}
}

// TestQuitFromMasterObeyed: a rival master unknown to us is asked; once
// it answers our MASTERREQ, its retransmitted QUIT (same seq) is obeyed.
func TestQuitFromMasterObeyed(t *testing.T) {
	h := newHarness(t, DefaultConfig("b"))
	h.toMaster()
	acts := h.recv(tsp.Quit, 300, "a", addr(5))
	var ask tsp.Packet
	for _, s := range sends(acts) {
		if s.Packet.Type == tsp.MasterReq && s.To == addr(5) {
			ask = s.Packet
		}
	}
	if ask.Type != tsp.MasterReq {
		t.Fatalf("no MASTERREQ to the unknown QUIT sender: %v", acts)
	}
	h.recv(tsp.MasterAck, ask.Seq, "a", addr(5))
	acts = h.recv(tsp.Quit, 300, "a", addr(5))
	if h.m.State() != Slave || !containsSend(acts, tsp.Ack, addr(5)) {
		t.Fatalf("state %v after the master's QUIT, %v", h.m.State(), acts)
	}
	if m, _ := h.m.Master(); m.Addr != addr(5) {
		t.Fatalf("following %v, want the rival master", m)
	}
}

// TestCandidateIgnoresForgedQuit: with no -F list a candidate obeys only
// a host that acted as a master; the master it followed before counts.
func TestCandidateIgnoresForgedQuit(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toSlave()
	h.step(ForceElection{})
	if h.m.State() != Candidate {
		t.Fatalf("state %v, want candidate", h.m.State())
	}
	h.recv(tsp.Quit, 9, "x", addr(6))
	if h.m.State() != Candidate {
		t.Fatalf("a forged QUIT ended the candidacy: %v", h.m.State())
	}
	h.recv(tsp.Quit, 10, "m", addr(9)) // the master followed before
	if h.m.State() != Slave {
		t.Fatalf("the known master's QUIT was not obeyed: %v", h.m.State())
	}
}

// TestAcceptedCandidateCorrects: a slave that accepted a candidate takes
// the new master's first ADJTIME even if its MASTERUP was lost.
func TestAcceptedCandidateCorrects(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toSlave()
	h.recv(tsp.Election, 5, "c", addr(3))
	if h.m.State() != Accept {
		t.Fatalf("state %v, want accept", h.m.State())
	}
	acts := h.step(Recv{Packet: tsp.Packet{Type: tsp.AdjTime, Version: 1, Seq: 6, Name: "c"}, From: addr(3)})
	if !appliesClock(acts) {
		t.Fatalf("the accepted candidate's ADJTIME was refused: %v", acts)
	}
}

func containsSend(as []Action, ty tsp.Type, to any) bool {
	for _, s := range sends(as) {
		if s.Packet.Type == ty && any(s.To) == to {
			return true
		}
	}
	return false
}

// TestSlaveTableBounded: the master lists at most MaxSlaves slaves, and a
// SLAVEUP carrying a listed slave's name from another address neither
// replaces its address nor gets answered.
func TestSlaveTableBounded(t *testing.T) {
	cfg := DefaultConfig("a")
	cfg.MaxSlaves = 3
	h := newHarness(t, cfg)
	h.toMaster()
	for i := range 10 {
		h.recv(tsp.SlaveUp, 0, string(rune('b'+i)), addr(10+i))
	}
	if n := len(h.m.Slaves()); n != 3 {
		t.Fatalf("%d slaves listed, want the cap of 3", n)
	}
	acts := h.recv(tsp.SlaveUp, 0, "b", addr(99))
	if got := refusedReasons(acts); len(got) != 1 || got[0] != RefusedNameTaken || len(sends(acts)) != 0 {
		t.Fatalf("hijack of b's entry: refused %v, sent %v", got, sendTypes(acts))
	}
	if !h.m.IsSlaveAt("b", addr(10)) || h.m.IsSlaveAt("b", addr(99)) {
		t.Fatal("b's entry moved to the forger's address")
	}
}

// TestFloodBounded: ELECTIONs under 20000 made-up names (each would be
// answered with a reliable REFUSE) leave the machine's tables bounded, and
// a master's own sends are not crowded out by them.
func TestFloodBounded(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toSlave()
	h.recv(tsp.Election, 1, "c", addr(3)) // Accept: every other candidate is REFUSEd
	refused := 0
	for i := range 20000 {
		acts := h.recv(tsp.Election, uint16(i), fmt.Sprintf("x%d", i), addr(100+i%100))
		for _, r := range refusedReasons(acts) {
			if r == RefusedSendsFull {
				refused++
			}
		}
	}
	if len(h.m.sends) > maxAnswers || len(h.m.seen) > maxSeen {
		t.Fatalf("tables grew: %d sends (bound %d), %d seen (bound %d)", len(h.m.sends), maxAnswers, len(h.m.seen), maxSeen)
	}
	if refused == 0 {
		t.Fatal("no send was refused: the bound was never reached")
	}
	if h.m.pending[roleAny] != len(h.m.sends) {
		t.Fatalf("pending count %d, sends %d", h.m.pending[roleAny], len(h.m.sends))
	}
	// The master's own sends have a bound of their own.
	if got := h.m.pendingBound(roleMaster); got <= h.m.cfg.MaxSlaves {
		t.Fatalf("master bound %d leaves no room for MaxSlaves %d", got, h.m.cfg.MaxSlaves)
	}
}

// TestUntrustedMasterAckKeepsProbing: at start-up a MASTERACK from an
// untrusted master is suppressed and does not end the probe: the probe is
// sent again, and with nobody trusted answering the daemon looks for a
// master no further (No Master), as if none had answered.
func TestUntrustedMasterAckKeepsProbing(t *testing.T) {
	cfg := DefaultConfig("a")
	cfg.Trusted = []netip.AddrPort{addr(2)}
	h := newHarness(t, cfg)
	req := sends(h.step(Start{}))[0].Packet
	acts := h.recv(tsp.MasterAck, req.Seq, "evil", addr(6))
	if !containsSend(acts, tsp.Quit, addr(6)) {
		t.Fatalf("untrusted MASTERACK not suppressed: %s", sendTypes(acts))
	}
	h.fireSends()
	if h.m.State() != NoMaster {
		t.Fatalf("state %v after the probe ran out with only an untrusted answer, want nomaster", h.m.State())
	}
}

// TestTimedcElectionFromThisHost: TEST under this host's own name (timedc
// election run beside the daemon) starts an election.
func TestTimedcElectionFromThisHost(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toSlave()
	h.recv(tsp.Test, 0, "a", addr(1))
	if h.m.State() != Candidate {
		t.Fatalf("state %v after TEST under our own name, want candidate", h.m.State())
	}
}

// TestForgedElectionsLeaveCorrections: a master QUITs every ELECTION's
// sender, so ELECTIONs under thousands of made-up names draw thousands of
// pending QUITs. Those have a bound of their own: the next round's
// corrections to the real slaves still go out (SETTIME here, as to any
// slave new to the master). (They shared the master's
// bound once, and a flood left the slaves uncorrected until their
// election timers ran out.)
func TestForgedElectionsLeaveCorrections(t *testing.T) {
	h := newHarness(t, DefaultConfig("a"))
	h.toMaster()
	h.recv(tsp.SlaveUp, 1, "s1", addr(2))
	h.recv(tsp.SlaveUp, 1, "s2", addr(3))
	for i := range 3000 {
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 525)
		h.recv(tsp.Election, uint16(i), fmt.Sprintf("x%d", i), from)
	}
	if got, bound := h.m.pending[roleRival], h.m.pendingBound(roleRival); got == 0 || got > bound {
		t.Fatalf("%d QUITs pending, want between 1 and the bound %d", got, bound)
	}
	var sr SyncRound
	for _, a := range h.fire(TimerSync) {
		if r, ok := a.(SyncRound); ok {
			sr = r
		}
	}
	acts := h.step(SyncResult{Round: sr.Round, Corrections: []Correction{{Name: "s1"}, {Name: "s2"}}})
	for _, to := range []netip.AddrPort{addr(2), addr(3)} {
		if !containsSend(acts, tsp.AdjTime, to) && !containsSend(acts, tsp.SetTime, to) {
			t.Errorf("no correction to %v after the flood; round %d of %d slaves; refused %v; sent %.300s", to, sr.Round, len(sr.Slaves), refusedReasons(acts), sendTypes(acts))
		}
	}
}

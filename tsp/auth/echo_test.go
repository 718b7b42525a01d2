package auth

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// The freshness of datagrams that move a clock (package doc,
// "Freshness"): each must echo the receiver's nonce of this run, which
// its sender learnt from a datagram of the receiver.

const (
	adjTime = tspAdjTime
	setTime = tspSetTime
)

// daemon is one host's signer and the verifier paired with it.
type daemon struct {
	s *Signer
	v *Verifier
}

func newDaemon(t testing.TB, cfg Config, now time.Time) daemon {
	t.Helper()
	s := newSigner(t, cfg, now)
	v, err := NewVerifier(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	return daemon{s, v}
}

// hear: d accepts a datagram that from (at fromAddr) signed, so that d
// echoes from's nonce to fromAddr from now on.
func (d daemon) hear(t testing.TB, from daemon, fromAddr netip.AddrPort, now time.Time) {
	t.Helper()
	expect(t, d.v, fromAddr, sign(t, from.s, tspPacket(slaveUp, 1, "slave"), now), now, Valid, ReasonNone)
}

func signTo(t testing.TB, s *Signer, p []byte, to netip.AddrPort, now time.Time) []byte {
	t.Helper()
	d, err := s.SignTo(append([]byte(nil), p...), to, now)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestEchoProvesFreshness: the fall. A master's correction
// echoes its slave's nonce and passes; the same bytes replayed pass no
// more, neither in the same run (the counter), nor to a slave restarted
// without state (a new nonce) a few minutes later, with the master's
// state gone as well, well inside the first-contact window.
func TestEchoProvesFreshness(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	cfg := Config{Mode: Required, Keys: kr}
	master, slave := newDaemon(t, cfg, t0), newDaemon(t, cfg, t0)

	// Before the master heard the slave it cannot prove anything.
	adj := signTo(t, master.s, tspPacket(adjTime, 1, "master"), hostB, t0)
	expect(t, slave.v, hostA, adj, t0, Bad, ReasonNoEcho)
	if slave.v.Len() != 0 {
		t.Fatal("a datagram dropped for its echo made an entry")
	}
	// Broadcasts echo nothing: moved no clock even once heard.
	master.hear(t, slave, hostB, t0)
	expect(t, slave.v, hostA, sign(t, master.s, tspPacket(setTime, 2, "master"), t0), t0, Bad, ReasonNoEcho)

	// Heard: the correction echoes the slave's nonce.
	up := sign(t, master.s, tspPacket(slaveUp, 4, "master"), t0) // captured before the correction
	captured := signTo(t, master.s, tspPacket(adjTime, 3, "master"), hostB, t0)
	expect(t, slave.v, hostA, captured, t0, Valid, ReasonNone)
	expect(t, slave.v, hostA, captured, t0.Add(time.Second), Bad, ReasonReplay)

	// A datagram that moves no clock needs no echo; an entry it made does
	// not stand for the echo of one that does.
	newSlave := newDaemon(t, cfg, t0)
	expect(t, newSlave.v, hostA, up, t0, Valid, ReasonNone)
	expect(t, newSlave.v, hostA, captured, t0, Bad, ReasonNoEcho)

	// Both sides new, four minutes later: nothing the capture holds moves
	// the slave's clock, whatever the window admits.
	later := t0.Add(4 * time.Minute)
	reinstalled := newDaemon(t, cfg, later)
	expect(t, reinstalled.v, hostA, captured, later, Bad, ReasonNoEcho)
	expect(t, reinstalled.v, hostA, adj, later, Bad, ReasonNoEcho)

	// A new master that hears the reinstalled slave corrects it at once.
	newMaster := newDaemon(t, cfg, later)
	newMaster.hear(t, reinstalled, hostB, later)
	expect(t, reinstalled.v, hostA, signTo(t, newMaster.s, tspPacket(adjTime, 1, "master"), hostB, later), later, Valid, ReasonNone)
}

// TestEchoAcrossRestart: with state on both sides, a slave restarted
// (cleanly or not) has a new nonce: a correction the master made for its
// last run is refused, counted as a replay where the saved ceiling covers
// it and as unproven where it does not (a correction the slave never
// received: sent while it was down). The master's next correction,
// after it heard the slave again, passes.
func TestEchoAcrossRestart(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	mcfg := stateConfig(t, kr, t.TempDir())
	scfg := stateConfig(t, kr, t.TempDir())
	master, slave := newDaemon(t, mcfg, t0), newDaemon(t, scfg, t0)
	master.hear(t, slave, hostB, t0)
	taken := signTo(t, master.s, tspPacket(adjTime, 1, "master"), hostB, t0)
	expect(t, slave.v, hostA, taken, t0, Valid, ReasonNone)
	if err := slave.s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := slave.v.Close(); err != nil {
		t.Fatal(err)
	}
	missed := signTo(t, master.s, tspPacket(adjTime, 2, "master"), hostB, t0.Add(time.Second))

	slave = newDaemon(t, scfg, t0.Add(2*time.Second))
	expect(t, slave.v, hostA, taken, t0.Add(2*time.Second), Bad, ReasonReplay)
	expect(t, slave.v, hostA, missed, t0.Add(2*time.Second), Bad, ReasonNoEcho)
	master.hear(t, slave, hostB, t0.Add(2*time.Second))
	expect(t, slave.v, hostA, signTo(t, master.s, tspPacket(adjTime, 3, "master"), hostB, t0.Add(3*time.Second)), t0.Add(3*time.Second), Valid, ReasonNone)
}

// TestOwnEcho: a datagram of our own identity that comes back is Own,
// whatever its counter, even after a crash has put its counter below
// the ceiling this daemon saved for itself; it makes no entry. Forged
// under our identity (a bad MAC), it is a bad MAC.
func TestOwnEcho(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	cfg := stateConfig(t, kr, t.TempDir())
	d := newDaemon(t, cfg, t0)
	up := sign(t, d.s, tspPacket(slaveUp, 1, "me"), t0)
	expect(t, d.v, hostA, up, t0, Own, ReasonNone)
	expect(t, d.v, hostA, up, t0, Own, ReasonNone)
	if d.v.Len() != 0 {
		t.Fatalf("own datagrams made %d entries", d.v.Len())
	}
	bad := append([]byte(nil), up...)
	bad[len(bad)-1] ^= 1
	expect(t, d.v, hostA, bad, t0, Bad, ReasonBadMAC)

	// A crash: no Close. The next run starts above the saved reservation,
	// its echoes are still its own.
	d = newDaemon(t, cfg, t0.Add(time.Second))
	expect(t, d.v, hostA, sign(t, d.s, tspPacket(slaveUp, 2, "me"), t0.Add(time.Second)), t0.Add(time.Second), Own, ReasonNone)
	expect(t, d.v, hostA, up, t0.Add(time.Second), Own, ReasonNone)
}

// TestEvictionRenewsNonce: a sender evicted from the table is a first
// contact again, so a correction of it accepted before, replayed, would
// be taken but for the nonce, which the eviction renewed.
func TestEvictionRenewsNonce(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	cfg := Config{Mode: Required, Keys: kr, MaxSenders: 1}
	master, slave, other := newDaemon(t, cfg, t0), newDaemon(t, cfg, t0), newSigner(t, cfg, t0)
	master.hear(t, slave, hostB, t0)
	adj := signTo(t, master.s, tspPacket(adjTime, 1, "master"), hostB, t0)
	expect(t, slave.v, hostA, adj, t0, Valid, ReasonNone)
	before := slave.s.Nonce()
	expect(t, slave.v, hostA, sign(t, other, tspPacket(slaveUp, 1, "other"), t0), t0, Valid, ReasonNone) // evicts the master
	if slave.s.Nonce() == before {
		t.Fatal("eviction kept the nonce")
	}
	expect(t, slave.v, hostA, adj, t0, Bad, ReasonNoEcho)
}

// TestEchoTableBounded: the nonces a signer echoes are bounded by
// MaxSenders; the address heard least recently is forgotten first.
func TestEchoTableBounded(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	cfg := Config{Mode: Required, Keys: kr, MaxSenders: 3}
	d := newDaemon(t, cfg, t0)
	peers := make([]daemon, 5)
	for i := range peers {
		peers[i] = newDaemon(t, cfg, t0)
		addr := netip.MustParseAddrPort(fmt.Sprintf("192.0.2.%d:525", i+1))
		d.hear(t, peers[i], addr, t0)
	}
	if n := len(d.s.echoes.from); n != 3 {
		t.Fatalf("%d addresses kept, want 3", n)
	}
	for i, p := range peers {
		addr := netip.MustParseAddrPort(fmt.Sprintf("192.0.2.%d:525", i+1))
		if got, want := d.s.echoes.of(addr), p.s.Nonce(); (got == want) != (i >= 2) {
			t.Errorf("peer %d: echo %016x, its nonce %016x", i, got, want)
		}
	}
}

// TestConfigClock: with Config.Clock the timestamps and the window read
// that clock (the daemon's), not the times given to Sign and Check; the
// counter still follows Sign's time.
func TestConfigClock(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	ahead := func() time.Time { return t0.Add(4 * time.Minute) }
	s := newSigner(t, Config{Mode: Required, Keys: kr, Clock: ahead}, t0)
	d := sign(t, s, tspPacket(slaveUp, 1, "a"), t0)
	tr, _, err := ParseTrailer(d[tspPacketSize:])
	if err != nil || tr.Timestamp != ahead().UnixNano() || tr.Counter != 1 {
		t.Fatalf("trailer %+v, %v: want the clock's time and counter 1", tr, err)
	}
	// Four minutes ahead of Check's time, but not of the verifier's clock.
	v := newVerifier(t, Config{Mode: Required, Keys: kr, Window: time.Minute, Clock: ahead})
	expect(t, v, hostA, d, t0, Valid, ReasonNone)
	v = newVerifier(t, Config{Mode: Required, Keys: kr, Window: time.Minute})
	expect(t, v, hostA, d, t0, Bad, ReasonWindow)
}

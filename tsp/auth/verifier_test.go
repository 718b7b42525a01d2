package auth

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestSignVerifyEveryHash(t *testing.T) {
	for _, h := range []Hash{SHA1, SHA256, SHA384, SHA512} {
		t.Run(h.String(), func(t *testing.T) {
			cfg := Config{Mode: Required, Keys: keyring(t, testKey(t, 7, h))}
			s, v := newSigner(t, cfg, t0), newVerifier(t, cfg)
			for i, p := range [][]byte{tspPacket(slaveUp, 42, "tsa"), extPacket(0x82, "tsb", bytes.Repeat([]byte{9}, 300))} {
				now := t0.Add(time.Duration(i) * time.Second)
				d := sign(t, s, p, now)
				got := expect(t, v, hostA, d, now, Valid, ReasonNone)
				if !bytes.Equal(got, p) {
					t.Fatalf("Check returned % x, want the packet % x", got, p)
				}
				tr, _, err := ParseTrailer(d[len(p):])
				if err != nil || tr.KeyID != 7 || tr.Sender != s.Sender() || tr.Timestamp != now.UnixNano() || tr.MACLen != h.Size() {
					t.Fatalf("trailer %+v, %v", tr, err)
				}
			}
		})
	}
}

// TestDropReasons: each reason for dropping, in required mode unless the
// case says otherwise.
func TestDropReasons(t *testing.T) {
	k1, k2 := testKey(t, 1, SHA256), testKey(t, 2, SHA256)
	cfg := Config{Mode: Required, Keys: keyring(t, k1)}
	s := newSigner(t, cfg, t0)
	p := tspPacket(slaveUp, 1, "tsa")
	other, _ := NewKey(1, SHA256, bytes.Repeat([]byte("other material "), 3))
	otherHash := testKey(t, 1, SHA384)
	for _, tc := range []struct {
		name string
		d    func() []byte
		now  time.Time
		why  Reason
	}{
		{"unsigned", func() []byte { return p }, t0, ReasonUnsigned},
		{"unsigned ext", func() []byte { return extPacket(0x80, "a", nil) }, t0, ReasonUnsigned},
		{"junk after the packet", func() []byte { return append(bytes.Clone(p), "junk"...) }, t0, ReasonMalformed},
		{"unknown key ID", func() []byte {
			return sign(t, newSigner(t, Config{Mode: Required, Keys: keyring(t, k2)}, t0), p, t0)
		}, t0, ReasonUnknownKey},
		{"other key material, same ID", func() []byte {
			return sign(t, newSigner(t, Config{Mode: Required, Keys: keyring(t, other)}, t0), p, t0)
		}, t0, ReasonBadMAC},
		{"other hash, same ID", func() []byte {
			return sign(t, newSigner(t, Config{Mode: Required, Keys: keyring(t, otherHash)}, t0), p, t0)
		}, t0, ReasonBadMAC},
		{"packet byte altered", func() []byte { d := sign(t, s, p, t0); d[3] ^= 1; return d }, t0, ReasonBadMAC},
		{"name byte altered", func() []byte { d := sign(t, s, p, t0); d[200] ^= 1; return d }, t0, ReasonBadMAC},
		{"counter altered", func() []byte { d := sign(t, s, p, t0); d[tspPacketSize+27] ^= 1; return d }, t0, ReasonBadMAC},
		{"timestamp altered", func() []byte { d := sign(t, s, p, t0); d[tspPacketSize+35] ^= 1; return d }, t0, ReasonBadMAC},
		{"sender altered", func() []byte { d := sign(t, s, p, t0); d[tspPacketSize+19] ^= 1; return d }, t0, ReasonBadMAC},
		{"MAC altered", func() []byte { d := sign(t, s, p, t0); d[len(d)-1] ^= 1; return d }, t0, ReasonBadMAC},
		{"first contact, sender 2h ahead", func() []byte { return sign(t, s, p, t0.Add(2*time.Hour)) }, t0, ReasonWindow},
		{"first contact, sender 2h behind", func() []byte { return sign(t, s, p, t0) }, t0.Add(2 * time.Hour), ReasonWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerifier(t, cfg)
			_, res, err := v.Check(hostA, tc.d(), tc.now)
			if res != Bad || ReasonOf(err) != tc.why || !errors.Is(err, tc.why.Err()) {
				t.Fatalf("Check = %v, %v; want Bad, %v", res, err, tc.why)
			}
			if v.Len() != 0 {
				t.Error("a dropped datagram made a replay table entry")
			}
			t.Log(err)
		})
	}

	t.Run("replay", func(t *testing.T) {
		v := newVerifier(t, cfg)
		d := sign(t, s, p, t0)
		expect(t, v, hostA, d, t0, Valid, ReasonNone)
		_, _, err := v.Check(hostA, d, t0)
		expect(t, v, hostA, d, t0, Bad, ReasonReplay)
		if !strings.Contains(err.Error(), "already accepted or older than") {
			t.Errorf("replay error %q", err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		v := newVerifier(t, cfg)
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		expect(t, v, hostA, sign(t, s, p, t0), t0, Bad, ReasonClosed)
	})
}

func TestOptionalUnsignedPeers(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA1))
	var peers []netip.Prefix
	for _, s := range []string{"198.51.100.7", "203.0.113.0/28"} {
		p, err := ParsePeer(s)
		if err != nil {
			t.Fatal(err)
		}
		peers = append(peers, p)
	}
	cfg := Config{Mode: Optional, Keys: kr, UnsignedPeers: peers}
	v := newVerifier(t, cfg)
	p := tspPacket(6, 1, "bsd")
	for src, want := range map[string]Result{
		"198.51.100.7:525":          Unsigned,
		"[::ffff:198.51.100.7]:525": Unsigned, // a v4-mapped source is unmapped
		"198.51.100.8:525":          Bad,
		"203.0.113.0:525":           Unsigned,
		"203.0.113.15:525":          Unsigned,
		"203.0.113.16:525":          Bad,
		"192.0.2.10:525":            Bad,
	} {
		why := ReasonNone
		if want == Bad {
			why = ReasonUnsigned
		}
		got := expect(t, v, netip.MustParseAddrPort(src), p, t0, want, why)
		if want == Unsigned && !bytes.Equal(got, p) {
			t.Errorf("%s: the packet is not returned whole", src)
		}
	}
	// An unsigned peer's signed datagram must still verify.
	s := newSigner(t, cfg, t0)
	d := sign(t, s, p, t0)
	d[20] ^= 1
	expect(t, v, bsd, d, t0, Bad, ReasonBadMAC)
	// And junk after a packet is no excuse to skip verifying.
	expect(t, v, bsd, append(bytes.Clone(p), "junk"...), t0, Bad, ReasonMalformed)
	// Required ignores the list.
	cfg.Mode = Required
	expect(t, newVerifier(t, cfg), bsd, p, t0, Bad, ReasonUnsigned)
}

func TestOff(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	on := newSigner(t, Config{Mode: Required, Keys: kr}, t0)
	off := newSigner(t, Config{}, t0)
	ext := extPacket(0x80, "n", []byte("payload"))
	if d, err := off.Sign(ext, t0); err != nil || !bytes.Equal(d, ext) {
		t.Fatalf("Off signs: %x, %v", d, err)
	}
	var nilSigner *Signer
	if d, err := nilSigner.Sign(ext, t0); err != nil || !bytes.Equal(d, ext) || nilSigner.Save() != nil || nilSigner.Close() != nil {
		t.Fatalf("nil signer signs: %x, %v", d, err)
	}
	var nilVerifier *Verifier
	for _, v := range []*Verifier{newVerifier(t, Config{Mode: Off}), nilVerifier} {
		// Unsigned, signed by a host with auth on (the trailer is cut, so
		// the extension still decodes), badly signed, junk: all unchecked.
		expect(t, v, hostA, ext, t0, Unchecked, ReasonNone)
		if got := expect(t, v, hostA, sign(t, on, ext, t0), t0, Unchecked, ReasonNone); !bytes.Equal(got, ext) {
			t.Errorf("Off does not cut a trailer: %x", got)
		}
		bad := sign(t, on, ext, t0)
		bad[len(bad)-1] ^= 1
		expect(t, v, hostA, bad, t0, Unchecked, ReasonNone)
		junk := append(bytes.Clone(ext), "junk"...)
		if got := expect(t, v, hostA, junk, t0, Unchecked, ReasonNone); !bytes.Equal(got, junk) {
			t.Error("Off cut bytes that are no trailer")
		}
		if v.Save() != nil || v.Close() != nil || v.Len() != 0 {
			t.Error("Off saves or records")
		}
	}
}

func TestKeyRotation(t *testing.T) {
	k1, k2 := testKey(t, 1, SHA256), testKey(t, 2, SHA512)
	p := tspPacket(slaveUp, 1, "tsa")
	both := keyring(t, k1, k2)
	// Step 1: k2 added everywhere; senders still sign with the lowest ID.
	old := newSigner(t, Config{Mode: Required, Keys: both}, t0)
	// Step 2: a host switched to k2.
	updated := newSigner(t, Config{Mode: Required, Keys: both, SignKey: 2}, t0)
	for _, tc := range []struct {
		name string
		s    *Signer
		keys *Keyring
		want Reason
	}{
		{"k1 to a host with both", old, both, ReasonNone},
		{"k2 to a host with both", updated, both, ReasonNone},
		{"k1 to a host with only k1", old, keyring(t, k1), ReasonNone},
		{"k2 to a host with only k2 (step 3)", updated, keyring(t, k2), ReasonNone},
		{"k2 to a host with only k1", updated, keyring(t, k1), ReasonUnknownKey},
		{"k1 to a host with only k2", old, keyring(t, k2), ReasonUnknownKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := Valid
			if tc.want != ReasonNone {
				want = Bad
			}
			expect(t, newVerifier(t, Config{Mode: Required, Keys: tc.keys}), hostA, sign(t, tc.s, p, t0), t0, want, tc.want)
		})
	}
	if _, err := NewSigner(Config{Mode: Required, Keys: both, SignKey: 3}, t0); !errors.Is(err, ErrConfig) {
		t.Errorf("signing key not in the file: %v", err)
	}
	if _, err := NewVerifier(Config{Mode: Optional}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("no keys: %v", err)
	}
}

// TestReplayWhileRunning: a datagram passes once; an older one from the
// same sender never, whichever address it comes from.
func TestReplayWhileRunning(t *testing.T) {
	cfg := Config{Mode: Required, Keys: keyring(t, testKey(t, 1, SHA256))}
	s, v := newSigner(t, cfg, t0), newVerifier(t, cfg)
	p := tspPacket(slaveUp, 1, "tsa")
	d1 := sign(t, s, p, t0.Add(time.Second))
	d2 := sign(t, s, p, t0.Add(2*time.Second))
	d3 := sign(t, s, p, t0.Add(3*time.Second))
	expect(t, v, hostA, d1, t0, Valid, ReasonNone)
	expect(t, v, hostA, d3, t0, Valid, ReasonNone)
	expect(t, v, hostA, d3, t0, Bad, ReasonReplay)
	expect(t, v, hostA, d1, t0, Bad, ReasonReplay)
	// Overtaken by a later one (two goroutines sending, a network that
	// reorders) but never accepted: it passes, once.
	expect(t, v, hostA, d2, t0, Valid, ReasonNone)
	expect(t, v, hostA, d2, t0, Bad, ReasonReplay)
	// The table is keyed on the sender in the trailer, which the MAC
	// covers: a replay from a spoofed new address is no first contact.
	expect(t, v, hostB, d3, t0, Bad, ReasonReplay)
	expect(t, v, netip.MustParseAddrPort("10.9.9.9:1"), d1, t0, Bad, ReasonReplay)
}

// TestClockSteps: after first contact the counter decides, so a sender
// whose wall clock is stepped back (or forward) by the master, or a
// receiver whose clock is, keeps being accepted.
func TestClockSteps(t *testing.T) {
	cfg := Config{Mode: Required, Keys: keyring(t, testKey(t, 1, SHA256)), Window: time.Minute}
	s, v := newSigner(t, cfg, t0), newVerifier(t, cfg)
	p := tspPacket(slaveUp, 1, "tsa")
	expect(t, v, hostA, sign(t, s, p, t0), t0, Valid, ReasonNone)
	// The sender's clock is stepped back 1000 s: every later datagram
	// carries a timestamp 1000 s behind, and the counter still rises.
	prev := uint64(0)
	for i := 1; i <= 5; i++ {
		sent := t0.Add(time.Duration(i)*time.Second - 1000*time.Second)
		d := sign(t, s, p, sent)
		if c := counterOf(d); c <= prev {
			t.Fatalf("counter %d after %d", c, prev)
		} else {
			prev = c
		}
		expect(t, v, hostA, d, t0.Add(time.Duration(i)*time.Second), Valid, ReasonNone)
	}
	// Stepped forward two hours, then back again.
	expect(t, v, hostA, sign(t, s, p, t0.Add(2*time.Hour)), t0.Add(6*time.Second), Valid, ReasonNone)
	expect(t, v, hostA, sign(t, s, p, t0.Add(7*time.Second)), t0.Add(7*time.Second), Valid, ReasonNone)
	// The receiver's clock is stepped by hours: nothing changes either.
	expect(t, v, hostA, sign(t, s, p, t0.Add(8*time.Second)), t0.Add(-5*time.Hour), Valid, ReasonNone)
	expect(t, v, hostA, sign(t, s, p, t0.Add(9*time.Second)), t0.Add(50*time.Hour), Valid, ReasonNone)
}

func TestWindow(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	p := tspPacket(slaveUp, 1, "tsa")
	for _, tc := range []struct {
		window time.Duration
		off    time.Duration
		want   Result
	}{
		{0, DefaultWindow, Valid},
		{0, -DefaultWindow, Valid},
		{0, DefaultWindow + 1, Bad},
		{0, -DefaultWindow - 1, Bad},
		{time.Minute, time.Minute, Valid},
		{time.Minute, -time.Minute - time.Millisecond, Bad},
		{NoWindow, 100 * 365 * 24 * time.Hour, Valid},
	} {
		cfg := Config{Mode: Required, Keys: kr, Window: tc.window}
		s := newSigner(t, cfg, t0)
		why := ReasonNone
		if tc.want == Bad {
			why = ReasonWindow
		}
		expect(t, newVerifier(t, cfg), hostA, sign(t, s, p, t0.Add(tc.off)), t0, tc.want, why)
	}
	if d, ahead := clockDiff(-1<<63, 1<<63-1); d != 1<<64-1 || ahead {
		t.Errorf("clockDiff at the extremes = %d, %v", d, ahead)
	}
	if fmtNanos(1<<64-1) == "" {
		t.Error("fmtNanos")
	}
}

// TestEviction: the table holds MaxSenders; a new sender evicts the one
// accepted least recently, which is then a first contact again.
func TestEviction(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	v := newVerifier(t, Config{Mode: Required, Keys: kr, MaxSenders: 3})
	p := tspPacket(slaveUp, 1, "tsa")
	var signers []*Signer
	var first [][]byte
	for i := range 4 {
		s := newSigner(t, Config{Mode: Required, Keys: kr}, t0)
		signers = append(signers, s)
		first = append(first, sign(t, s, p, t0.Add(time.Duration(i)*time.Second)))
	}
	for i := range 3 {
		expect(t, v, hostA, first[i], t0, Valid, ReasonNone)
	}
	// Sender 0 speaks again: sender 1 is now the least recent.
	expect(t, v, hostA, sign(t, signers[0], p, t0.Add(10*time.Second)), t0, Valid, ReasonNone)
	expect(t, v, hostA, first[3], t0, Valid, ReasonNone)
	if v.Len() != 3 {
		t.Fatalf("%d senders, cap 3", v.Len())
	}
	expect(t, v, hostA, first[0], t0, Bad, ReasonReplay)
	expect(t, v, hostA, first[2], t0, Bad, ReasonReplay)
	// Sender 1 was forgotten: its old datagram is a first contact, which
	// only the window bounds (the cost of eviction).
	expect(t, v, hostA, first[1], t0, Valid, ReasonNone)
}

// TestReplayWindow: a datagram overtaken by ReplayWindow later ones still
// passes, once; one overtaken by more is dropped, since the verifier can
// no longer tell it from a replay.
func TestReplayWindow(t *testing.T) {
	cfg := Config{Mode: Required, Keys: keyring(t, testKey(t, 1, SHA256))}
	s, v := newSigner(t, cfg, t0), newVerifier(t, cfg)
	p := tspPacket(slaveUp, 1, "tsa")
	at := t0
	next := func() []byte { at = at.Add(time.Millisecond); return sign(t, s, p, at) }
	expect(t, v, hostA, next(), t0, Valid, ReasonNone)
	overtaken := func(by int) []byte {
		held := next()
		for range by {
			expect(t, v, hostA, next(), t0, Valid, ReasonNone)
		}
		return held
	}
	a := overtaken(ReplayWindow)
	expect(t, v, hostA, a, t0, Valid, ReasonNone)
	expect(t, v, hostA, a, t0, Bad, ReasonReplay)
	b := overtaken(ReplayWindow + 1)
	expect(t, v, hostA, b, t0, Bad, ReasonReplay)
}

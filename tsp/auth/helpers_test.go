package auth

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

// Tests in package auth build packets by hand: tsp will import this
// package, so only the external tests (package auth_test) may import tsp.

// t0 is the tests' wall clock origin; times carry no monotonic reading,
// so every duration below is what the test says it is.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var (
	hostA = netip.MustParseAddrPort("192.0.2.10:525")
	hostB = netip.MustParseAddrPort("192.0.2.20:525")
	bsd   = netip.MustParseAddrPort("198.51.100.7:525")
)

// slaveUp is SLAVEUP's type: a packet that moves no clock, for the tests
// of the replay table (those that move a clock must also echo the
// receiver's nonce: echo_test.go).
const slaveUp = 7

// tspPacket is a 268-byte version-1 packet of the given type and name.
func tspPacket(typ byte, seq uint16, name string) []byte {
	b := make([]byte, tspPacketSize)
	b[0], b[1] = typ, 1
	binary.BigEndian.PutUint16(b[2:4], seq)
	copy(b[12:], name)
	return b
}

// extPacket is an extension packet as tsp.ExtPacket.Marshal makes it.
func extPacket(kind byte, name string, payload []byte) []byte {
	b := []byte{kind, tspVersionExt, 0, 1, 0, 0, byte(len(name)), 0}
	binary.BigEndian.PutUint16(b[4:6], uint16(len(payload)))
	b = append(b, name...)
	return append(b, payload...)
}

// testKey is a key of hash h whose material is derived from id.
func testKey(t testing.TB, id uint32, h Hash) *Key {
	t.Helper()
	k, err := NewKey(id, h, bytes.Repeat([]byte{byte(id), 0x5a}, h.Size()/2))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func keyring(t testing.TB, keys ...*Key) *Keyring {
	t.Helper()
	kr, err := NewKeyring(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func newSigner(t testing.TB, cfg Config, now time.Time) *Signer {
	t.Helper()
	s, err := NewSigner(cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newVerifier(t testing.TB, cfg Config) *Verifier {
	t.Helper()
	v, err := NewVerifier(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sign(t testing.TB, s *Signer, p []byte, now time.Time) []byte {
	t.Helper()
	d, err := s.Sign(bytes.Clone(p), now)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// expect checks one verdict: res, and the drop reason for Bad.
func expect(t testing.TB, v *Verifier, src netip.AddrPort, d []byte, now time.Time, want Result, why Reason) []byte {
	t.Helper()
	p, res, err := v.Check(src, d, now)
	if res != want || ReasonOf(err) != why {
		t.Fatalf("Check = %v, %v (reason %v); want %v, reason %v", res, err, ReasonOf(err), want, why)
	}
	if (res == Bad) != (err != nil) || (res == Bad) != (p == nil) {
		t.Fatalf("Check = %v with packet %d bytes and error %v: Bad goes with an error and no packet, only Bad", res, len(p), err)
	}
	return p
}

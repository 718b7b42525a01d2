package auth

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// fuzzSeeds are datagrams signed by a sender of fixed identity and nonce
// (so that seeds are the same bytes on every run), with both keys of
// fuzzKeys: a correction echoing the nonce of the receiver fuzzReceiver
// makes, one echoing none, an extension packet; and one of the
// receiver's own.
func fuzzSeeds(f *testing.F) (*Keyring, [][]byte) {
	kr := keyring(f, testKey(f, 1, SHA1), testKey(f, 2, SHA512))
	var seeds [][]byte
	for _, id := range []uint32{1, 2} {
		s := fixedSigner(f, Config{Mode: Required, Keys: kr, SignKey: id}, 0x0123456789abcdef, 0x1111)
		s.echoes.heard(fuzzDst, fuzzNonce)
		seeds = append(seeds,
			signTo(f, s, tspPacket(adjTime, 9, "tsa"), fuzzDst, t0),
			sign(f, s, tspPacket(adjTime, 10, "tsa"), t0),
			sign(f, s, extPacket(0x81, "tsb", []byte("reply")), t0))
	}
	seeds = append(seeds, sign(f, fuzzReceiver(f, kr), tspPacket(slaveUp, 1, "rx"), t0))
	return kr, seeds
}

// fuzzDst and fuzzNonce are the receiver's address and nonce.
var fuzzDst = netip.MustParseAddrPort("192.0.2.99:525")

const fuzzNonce = 0x2222

// fixedSigner is a signer of the given identity and nonce.
func fixedSigner(f *testing.F, cfg Config, sender, nonce uint64) *Signer {
	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, SenderStateFile), fmt.Appendf(nil, "%s\nsender %016x\nreserved 99\n", senderHeader, sender), 0o600); err != nil {
		f.Fatal(err)
	}
	cfg.StateDir = dir
	s := newSigner(f, cfg, t0)
	s.nonce.Store(nonce)
	return s
}

// fuzzReceiver is the signer the fuzzed verifiers are paired with.
func fuzzReceiver(f *testing.F, kr *Keyring) *Signer {
	return fixedSigner(f, Config{Mode: Required, Keys: kr}, 0xfedcba9876543210, fuzzNonce)
}

func addSeeds(f *testing.F, seeds [][]byte) {
	for _, d := range seeds {
		f.Add(d)
		f.Add(d[:len(d)-1])
	}
	f.Add(tspPacket(6, 1, "bsd"))
	f.Add(append(tspPacket(6, 1, "bsd"), Magic...))
	f.Add(extPacket(0x80, "", nil))
	f.Add([]byte{})
	f.Add([]byte{0, 2, 0, 0, 0xff, 0xff, 0xff, 0})
}

// FuzzSplit: Split never panics; it cuts the datagram in two at the
// packet's framing, or refuses the bytes after it as malformed.
func FuzzSplit(f *testing.F) {
	_, seeds := fuzzSeeds(f)
	addSeeds(f, seeds)
	f.Fuzz(func(t *testing.T, d []byte) {
		p, tr, err := Split(d)
		if err != nil {
			if ReasonOf(err) != ReasonMalformed || !errors.Is(err, ErrMalformed) || tr != nil || !bytes.Equal(p, d) {
				t.Fatalf("Split error %v with %d+%d bytes", err, len(p), len(tr))
			}
			return
		}
		if !bytes.Equal(append(bytes.Clone(p), tr...), d) {
			t.Fatal("packet and trailer are not the datagram cut in two")
		}
		if tr == nil {
			return
		}
		if len(p) != packetEnd(d) {
			t.Fatalf("packet of %d bytes, framing says %d", len(p), packetEnd(d))
		}
		h, mac, err := ParseTrailer(tr)
		if err != nil || len(mac) != h.MACLen || len(tr) != TrailerHeaderSize+h.MACLen {
			t.Fatalf("Split's trailer does not parse: %+v, %v", h, err)
		}
		if again := h.appendHeader(nil); !bytes.Equal(again, tr[:TrailerHeaderSize]) {
			t.Fatalf("header does not re-encode:\n% x\n% x", again, tr[:TrailerHeaderSize])
		}
	})
}

// FuzzVerify: Check never panics, and never calls valid (or own) anything
// but the datagrams signed for the seeds: anything else would be a
// forgery; nor valid one that moves a clock without the receiver's nonce. In
// optional mode, from a listed peer, the unsigned pass, whole.
func FuzzVerify(f *testing.F) {
	kr, seeds := fuzzSeeds(f)
	addSeeds(f, seeds)
	signed := map[string]bool{}
	for _, d := range seeds {
		signed[string(d)] = true
	}
	rx := fuzzReceiver(f, kr)
	src := netip.MustParseAddrPort("198.51.100.7:525")
	peers := []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	f.Fuzz(func(t *testing.T, d []byte) {
		for _, mode := range []Mode{Off, Optional, Required} {
			v, err := NewVerifier(Config{Mode: mode, Keys: kr, UnsignedPeers: peers}, rx)
			if err != nil {
				t.Fatal(err)
			}
			p, res, err := v.Check(src, d, t0)
			switch res {
			case Bad:
				if r := ReasonOf(err); p != nil || r == ReasonNone || r >= NumReasons || !errors.Is(err, r.Err()) {
					t.Fatalf("%v: Bad with %d bytes, reason %v, error %v", mode, len(p), r, err)
				}
			case Valid:
				if !signed[string(d)] || mode == Off {
					t.Fatalf("%v: valid, and not a signed seed: % x", mode, d)
				}
				_, tr, _ := Split(d)
				if h, _, _ := ParseTrailer(tr); MovesClock(p) && h.Echo != fuzzNonce {
					t.Fatalf("%v: valid, moves a clock, and echoes %016x, not the receiver's nonce", mode, h.Echo)
				}
			case Unsigned:
				if mode != Optional || !bytes.Equal(p, d) {
					t.Fatalf("%v: unsigned, packet %d of %d bytes", mode, len(p), len(d))
				}
			case Unchecked:
				if mode != Off {
					t.Fatalf("%v: unchecked", mode)
				}
			case Own:
				if !signed[string(d)] || mode == Off {
					t.Fatalf("%v: own, and not a signed seed: % x", mode, d)
				}
			default:
				t.Fatalf("result %v", res)
			}
			if res != Bad && !bytes.HasPrefix(d, p) {
				t.Fatalf("%v: %v, and the packet is not the datagram's start", mode, res)
			}
		}
	})
}

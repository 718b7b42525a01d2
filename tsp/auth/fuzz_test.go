package auth

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// fuzzSeeds are datagrams signed by a sender of fixed identity (so that
// seeds are the same bytes on every run), with both keys of fuzzKeys.
func fuzzSeeds(f *testing.F) (*Keyring, [][]byte) {
	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, SenderStateFile), []byte(senderHeader+"\nsender 0123456789abcdef\nreserved 99\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	kr := keyring(f, testKey(f, 1, SHA1), testKey(f, 2, SHA512))
	var seeds [][]byte
	for _, id := range []uint32{1, 2} {
		s := newSigner(f, Config{Mode: Required, Keys: kr, SignKey: id, StateDir: dir}, t0)
		seeds = append(seeds,
			sign(f, s, tspPacket(1, 9, "tsa"), t0),
			sign(f, s, extPacket(0x81, "tsb", []byte("reply")), t0))
	}
	return kr, seeds
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

// FuzzVerify: Check never panics, and never calls valid anything but the
// datagrams signed for the seeds: anything else would be a forgery. In
// optional mode, from a listed peer, the unsigned pass, whole.
func FuzzVerify(f *testing.F) {
	kr, seeds := fuzzSeeds(f)
	addSeeds(f, seeds)
	signed := map[string]bool{}
	for _, d := range seeds {
		signed[string(d)] = true
	}
	src := netip.MustParseAddrPort("198.51.100.7:525")
	peers := []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	f.Fuzz(func(t *testing.T, d []byte) {
		for _, mode := range []Mode{Off, Optional, Required} {
			v := newVerifier(t, Config{Mode: mode, Keys: kr, UnsignedPeers: peers})
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
			case Unsigned:
				if mode != Optional || !bytes.Equal(p, d) {
					t.Fatalf("%v: unsigned, packet %d of %d bytes", mode, len(p), len(d))
				}
			case Unchecked:
				if mode != Off {
					t.Fatalf("%v: unchecked", mode)
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

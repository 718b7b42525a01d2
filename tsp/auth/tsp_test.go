package auth_test

// External tests: they import tsp, which package auth itself cannot
// (tsp's transport will import auth).

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/internal/vectors"
	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/auth"
)

var (
	now  = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	peer = netip.MustParseAddrPort("198.51.100.7:525")
)

func pair(t *testing.T, mode auth.Mode, h auth.Hash) (*auth.Signer, *auth.Verifier) {
	t.Helper()
	k, err := auth.NewKey(1, h, bytes.Repeat([]byte("k"), h.Size()))
	if err != nil {
		t.Fatal(err)
	}
	kr, err := auth.NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	cfg := auth.Config{Mode: mode, Keys: kr, UnsignedPeers: []netip.Prefix{netip.PrefixFrom(peer.Addr(), 32)}}
	s, err := auth.NewSigner(cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	// The receiver is another daemon, with a signer of its own.
	self, err := auth.NewSigner(cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(cfg, self)
	if err != nil {
		t.Fatal(err)
	}
	receivers[v] = receiverOf{self, cfg}
	return s, v
}

// receivers are pair's receiving daemons: their own signers and config.
var receivers = map[*auth.Verifier]receiverOf{}

type receiverOf struct {
	self *auth.Signer
	cfg  auth.Config
}

// receiver is the address of pair's verifier, as its sender sends to it.
var receiver = netip.MustParseAddrPort("192.0.2.99:525")

// learn makes s (the sender of a pair) hear v's daemon: s's own verifier,
// paired with s, accepts a SLAVEUP that v's signer sent from receiver, so
// that s echoes its nonce from then on.
func learn(t *testing.T, s *auth.Signer, v *auth.Verifier) {
	t.Helper()
	rx := receivers[v]
	mine, err := auth.NewVerifier(rx.cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	up, err := (&tsp.Packet{Type: tsp.SlaveUp, Version: tsp.Version, Name: "rx"}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	d, err := rx.self.Sign(up, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, res, err := mine.Check(receiver, d, now); res != auth.Valid {
		t.Fatalf("the receiver's SLAVEUP: %v, %v", res, err)
	}
}

// TestMovesClockMatchesTSP pins the types auth makes echo the receiver's
// nonce (it cannot import tsp): those that carry a time, and DATEACK.
func TestMovesClockMatchesTSP(t *testing.T) {
	for ty := range tsp.Type(255) {
		for _, ver := range []uint8{0, tsp.Version, tsp.VersionExt} {
			b, err := (&tsp.Packet{Type: ty, Version: ver, Name: "a"}).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			want := ver <= tsp.Version && (ty.CarriesTime() || ty == tsp.DateAck)
			if got := auth.MovesClock(b); got != want {
				t.Errorf("%v version %d: MovesClock %v, want %v", ty, ver, got, want)
			}
		}
	}
}

// TestFramingMatchesTSP pins the framing auth repeats (it cannot import
// tsp) to tsp's: what tsp marshals, auth signs and splits back exactly,
// and what Check returns tsp decodes. The ADJTIME echoes the receiver's
// nonce, which the sender learnt from a datagram of the receiver.
func TestFramingMatchesTSP(t *testing.T) {
	s, v := pair(t, auth.Required, auth.SHA512)
	learn(t, s, v)
	pkt, err := (&tsp.Packet{Type: tsp.AdjTime, Version: tsp.Version, Seq: 7, Time: tsp.Timeval{Sec: -1, Usec: 5}, Name: "tsa"}).Marshal()
	if err != nil || len(pkt) != tsp.PacketSize {
		t.Fatal(len(pkt), err)
	}
	ext := tsp.ExtPacket{Kind: tsp.ExtProbe, Seq: 3, Name: strings.Repeat("n", tsp.MaxNameLen), Payload: bytes.Repeat([]byte{1}, tsp.MaxExtPayload)}
	extB, err := ext.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	empty, _ := (&tsp.ExtPacket{Kind: tsp.ExtRing}).Marshal()
	for _, p := range [][]byte{pkt, extB, empty} {
		d, err := s.SignTo(bytes.Clone(p), receiver, now)
		if err != nil {
			t.Fatalf("%d-byte packet: %v", len(p), err)
		}
		got, tr, err := auth.Split(d)
		if err != nil || !bytes.Equal(got, p) || len(tr) != auth.TrailerHeaderSize+64 {
			t.Fatalf("Split = %d+%d bytes, %v", len(got), len(tr), err)
		}
		got, res, err := v.Check(peer, d, now)
		if res != auth.Valid || !bytes.Equal(got, p) {
			t.Fatalf("Check = %v, %v", res, err)
		}
		if tsp.IsExt(got) {
			e, err := tsp.UnmarshalExt(got)
			if err != nil || e.Name != "" && e.Name != ext.Name {
				t.Fatalf("UnmarshalExt after Check: %+v, %v", e, err)
			}
		} else if q, err := tsp.Unmarshal(got); err != nil || q.Seq != 7 {
			t.Fatalf("Unmarshal after Check: %+v, %v", q, err)
		}
	}
	// The largest extension datagram plus the largest trailer: what the
	// transport's read buffer must hold, past one Ethernet frame's 1472.
	if len(extB) != 1472 {
		t.Errorf("largest extension datagram %d bytes, want 1472", len(extB))
	}
	if _, err := s.Sign(pkt[:tsp.MinPacketSize], now); !errors.Is(err, auth.ErrFraming) {
		t.Errorf("a 44-byte packet signed: %v", err)
	}
}

// vector is the part of a ../shared/vectors line these tests need (the
// README there describes the lines).
type vector struct {
	RawHex string `json:"raw_hex"`
	Length int    `json:"length"`
	Reject bool   `json:"reject"`
	Note   string `json:"note"`
	where  string
}

// loadVectors reads every vector (internal/vectors), as tsp's tests do;
// it skips only where the shared folder is absent.
func loadVectors(t *testing.T) []vector {
	t.Helper()
	return vectors.Load(t, func(v *vector, at string) { v.where = at })
}

// TestBSDVectorsStayReadable: a signed BSD packet is the same 268 bytes
// followed by the trailer, so a BSD daemon, which reads 268 bytes, sees
// the packet unchanged; tsp.Unmarshal of the whole datagram (which
// ignores bytes past 268) decodes it too; Check gives it back whole.
// Unsigned, the packets pass optional mode from a listed peer only.
func TestBSDVectorsStayReadable(t *testing.T) {
	var signed, legacy int
	for _, vec := range loadVectors(t) {
		raw, err := hex.DecodeString(vec.RawHex)
		if err != nil || len(raw) != vec.Length {
			t.Fatalf("%s: raw_hex: %d bytes, %v", vec.where, len(raw), err)
		}
		want, decErr := tsp.Unmarshal(raw)
		if vec.Reject || decErr != nil {
			// Whatever a receiver must refuse, auth never calls valid.
			_, v := pair(t, auth.Optional, auth.SHA256)
			if _, res, _ := v.Check(peer, raw, now); res == auth.Valid {
				t.Errorf("%s: a rejected vector is valid", vec.where)
			}
			continue
		}
		for _, h := range []auth.Hash{auth.SHA1, auth.SHA256, auth.SHA384, auth.SHA512} {
			s, v := pair(t, auth.Required, h)
			learn(t, s, v) // an ADJTIME or SETTIME must echo the receiver's nonce
			d, err := s.SignTo(bytes.Clone(raw), receiver, now)
			if len(raw) != tsp.PacketSize {
				// The 4.3BSD 44- and 76-byte forms: we never send them.
				if !errors.Is(err, auth.ErrFraming) {
					t.Errorf("%s: %d-byte packet signed: %v", vec.where, len(raw), err)
				}
				legacy++
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", vec.where, err)
			}
			if !bytes.Equal(d[:tsp.PacketSize], raw) || len(d) != tsp.PacketSize+auth.TrailerHeaderSize+h.Size() {
				t.Fatalf("%s %v: the first 268 bytes changed, or the trailer is %d bytes", vec.where, h, len(d)-tsp.PacketSize)
			}
			bsdSees, err := tsp.Unmarshal(d[:tsp.PacketSize]) // BSD's 268-byte recvfrom
			if err != nil || bsdSees != want {
				t.Fatalf("%s %v: BSD would read %+v, %v; want %+v", vec.where, h, bsdSees, err, want)
			}
			weSee, err := tsp.Unmarshal(d)
			if err != nil || weSee != want {
				t.Fatalf("%s %v: tsp.Unmarshal(signed) = %+v, %v; want %+v", vec.where, h, weSee, err, want)
			}
			p, res, err := v.Check(peer, d, now)
			if res != auth.Valid || !bytes.Equal(p, raw) {
				t.Fatalf("%s %v: Check = %v, %v", vec.where, h, res, err)
			}
			signed++
		}
		// Unsigned, as a BSD host sends it.
		_, opt := pair(t, auth.Optional, auth.SHA256)
		if p, res, err := opt.Check(peer, raw, now); res != auth.Unsigned || !bytes.Equal(p, raw) {
			t.Errorf("%s: optional, unsigned peer: %v, %v", vec.where, res, err)
		}
		if _, res, err := opt.Check(netip.MustParseAddrPort("192.0.2.1:525"), raw, now); res != auth.Bad || !errors.Is(err, auth.ErrUnsigned) {
			t.Errorf("%s: optional, other host: %v, %v", vec.where, res, err)
		}
		_, req := pair(t, auth.Required, auth.SHA256)
		if _, res, err := req.Check(peer, raw, now); res != auth.Bad || !errors.Is(err, auth.ErrUnsigned) {
			t.Errorf("%s: required: %v, %v", vec.where, res, err)
		}
	}
	if signed == 0 {
		t.Fatal("no 268-byte vector signed")
	}
	t.Logf("%d signed (vector × hash), %d legacy short forms refused for signing", signed, legacy)
}

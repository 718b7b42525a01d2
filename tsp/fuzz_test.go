package tsp

import (
	"bytes"
	"encoding/hex"
	"testing"
	"time"

	"github.com/timed-project/timed/internal/vectors"
)

// FuzzUnmarshal: decoding never panics, and whatever decodes re-encodes to
// a packet that decodes to the same fields (decode → encode → decode is
// stable). Seeds are the shared vectors, when present, and a few shapes of
// our own.
func FuzzUnmarshal(f *testing.F) {
	if vectors.Present() {
		for _, v := range loadVectors(f) {
			if b, err := hex.DecodeString(v.RawHex); err == nil {
				f.Add(b)
			}
		}
	}
	ok, _ := (&Packet{Type: Loop, Version: 1, Seq: 9, HopCount: 10, Name: "seed"}).Marshal()
	f.Add(ok)
	f.Add(ok[:MinPacketSize])
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xFF}, PacketSize+1))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Unmarshal(b)
		if err != nil {
			if p != (Packet{}) {
				t.Fatalf("error %v with a non-zero packet %+v", err, p)
			}
			return
		}
		enc, err := p.Marshal()
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", p, err)
		}
		again, err := Unmarshal(enc)
		if err != nil || again != p {
			t.Fatalf("unstable: %+v → %x → %+v, %v", p, enc, again, err)
		}
		if again.String() == "" {
			t.Fatal("empty formatted line")
		}
	})
}

// FuzzUnmarshalExt: the extension decoder never panics, and decode →
// encode → decode is stable.
func FuzzUnmarshalExt(f *testing.F) {
	seed, _ := (&ExtPacket{Kind: ExtRing, Seq: 1, Name: "n", Payload: []byte("payload")}).Marshal()
	f.Add(seed)
	f.Add([]byte{1, 2, 0, 0, 0xFF, 0xFF, 0xFF, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := UnmarshalExt(b)
		if err != nil {
			return
		}
		enc, err := e.Marshal()
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", e, err)
		}
		again, err := UnmarshalExt(enc)
		if err != nil || again.Kind != e.Kind || again.Seq != e.Seq || again.Name != e.Name || !bytes.Equal(again.Payload, e.Payload) {
			t.Fatalf("unstable: %+v → %x → %+v, %v", e, enc, again, err)
		}
	})
}

// FuzzUnmarshalSource: the time-source payload decoder never panics, what
// it accepts has a valid non-empty name, and decode → encode is the
// identity on the bytes.
func FuzzUnmarshalSource(f *testing.F) {
	seed, _ := SourcePayload{Name: "a1", Hops: 2}.Marshal()
	f.Add(seed)
	f.Add([]byte{0, 0})
	f.Add([]byte{1, 0xFF, 'x'})
	f.Add([]byte{0, 2, 'a', 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := UnmarshalSource(b)
		if err != nil {
			if s != (SourcePayload{}) {
				t.Fatalf("error %v with a non-zero payload %+v", err, s)
			}
			return
		}
		if s.Name == "" || !ValidName(s.Name) {
			t.Fatalf("accepted name %q", s.Name)
		}
		enc, err := s.Marshal()
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", s, err)
		}
		if !bytes.Equal(enc, b) {
			t.Fatalf("unstable: %x → %+v → %x", b, s, enc)
		}
	})
}

// FuzzUnmarshalReference: the reference payload decoder never panics,
// what it accepts is within [0, MaxReferenceError], and decode → encode
// is the identity on the bytes.
func FuzzUnmarshalReference(f *testing.F) {
	seed, _ := ReferencePayload{MaxError: 1500 * time.Microsecond}.Marshal()
	f.Add(seed)
	f.Add([]byte{})
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF})
	f.Add([]byte{0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := UnmarshalReference(b)
		if err != nil {
			if r != (ReferencePayload{}) {
				t.Fatalf("error %v with a non-zero payload %+v", err, r)
			}
			return
		}
		if r.MaxError < 0 || r.MaxError > MaxReferenceError {
			t.Fatalf("accepted maxerror %v", r.MaxError)
		}
		enc, err := r.Marshal()
		if err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("unstable: %x → %+v → %x, %v", b, r, enc, err)
		}
	})
}

// FuzzUnmarshalResign: the resign payload decoder never panics, what it
// accepts is within [0, MaxResignSlaves], and decode → encode is the
// identity on the bytes.
func FuzzUnmarshalResign(f *testing.F) {
	seed, _ := ResignPayload{Slaves: 9}.Marshal()
	f.Add(seed)
	f.Add([]byte{})
	f.Add([]byte{0xFF, 0xFF})
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := UnmarshalResign(b)
		if err != nil {
			if r != (ResignPayload{}) {
				t.Fatalf("error %v with a non-zero payload %+v", err, r)
			}
			return
		}
		if r.Slaves < 0 || r.Slaves > MaxResignSlaves {
			t.Fatalf("accepted %d slaves", r.Slaves)
		}
		enc, err := r.Marshal()
		if err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("unstable: %x → %+v → %x, %v", b, r, enc, err)
		}
	})
}

package ring

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/timed-project/timed/tsp"
)

func TestMsgRoundTrip(t *testing.T) {
	for _, m := range []Msg{
		{Kind: KWakeup},
		{Kind: KSleepwell},
		{Kind: KElect, ID: 1},
		{Kind: KElect, ID: math.MaxUint64, Phase: math.MaxUint32, Q: true},
		{Kind: KProbe, ID: 300, Phase: 7, Hops: 128},
		{Kind: KPeterson2, ID: 5},
	} {
		b := m.Marshal()
		if len(b)*8 != m.Bits() {
			t.Errorf("%v: Bits %d, encoding %d bytes", m, m.Bits(), len(b))
		}
		got, err := Unmarshal(b)
		if err != nil || got != m {
			t.Errorf("%v: round trip gave %v, %v", m, got, err)
		}
	}
	// A wakeup is one byte, an election message for id 1 two.
	if n := len(Msg{Kind: KWakeup}.Marshal()); n != 1 {
		t.Errorf("wakeup is %d bytes", n)
	}
}

func TestUnmarshalRejects(t *testing.T) {
	for _, c := range []struct {
		b    []byte
		want error
	}{
		{nil, ErrShort},
		{[]byte{0x00}, ErrBadKind},
		{[]byte{0x0f}, ErrBadKind},
		{[]byte{byte(KElect) | flagID}, ErrShort},
		{[]byte{byte(KElect) | flagID, 0x00}, ErrZeroField},
		{[]byte{byte(KElect) | flagID, 0x81, 0x00}, ErrVarint},
		{[]byte{byte(KElect), 0x01}, ErrTrailing},
		{[]byte{byte(KElect) | flagPhase, 0x80, 0x80, 0x80, 0x80, 0x10}, ErrOverflow},
	} {
		if _, err := Unmarshal(c.b); !errors.Is(err, c.want) {
			t.Errorf("Unmarshal(% x) = %v, want %v", c.b, err, c.want)
		}
	}
}

// FuzzUnmarshal: decoding never panics, and whatever decodes re-encodes to
// the same bytes (one encoding per message).
func FuzzUnmarshal(f *testing.F) {
	for _, m := range []Msg{{Kind: KWakeup}, {Kind: KElect, ID: 7, Phase: 3, Q: true}, {Kind: KProbe, ID: 9, Phase: 2, Hops: 4}} {
		f.Add(m.Marshal())
	}
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Unmarshal(b)
		if err != nil {
			return
		}
		if again := m.Marshal(); !bytes.Equal(again, b) {
			t.Fatalf("% x decoded to %v, re-encoded as % x", b, m, again)
		}
	})
}

// A ring message survives the daemon's extension framing.
func TestExtRoundTrip(t *testing.T) {
	m := Msg{Kind: KProbe, ID: 123456, Phase: 4, Hops: 9}
	e := ToExt(m, "host-a", 7)
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p, err := tsp.UnmarshalExt(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromExt(p)
	if err != nil || got != m || p.Name != "host-a" || p.Seq != 7 {
		t.Fatalf("got %v %v from %+v", got, err, p)
	}
	if _, err := FromExt(tsp.ExtPacket{Kind: tsp.ExtProbe, Payload: b}); !errors.Is(err, ErrNotRing) {
		t.Errorf("probe packet accepted: %v", err)
	}
}

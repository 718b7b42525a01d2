package tsp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/timed-project/timed/internal/vectors"
)

// vector is one line of ../shared/vectors/*.jsonl (see its README).
type vector struct {
	Note         string        `json:"note"`
	Capture      string        `json:"capture"`
	Frame        int           `json:"frame"`
	Length       int           `json:"length"`
	RawHex       string        `json:"raw_hex"`
	CanonicalHex string        `json:"canonical_hex"`
	Reject       bool          `json:"reject"`
	Fields       *vectorFields `json:"fields"`

	where string // file:line, for failure messages
}

type vectorFields struct {
	Type     int     `json:"type"`
	TypeName *string `json:"type_name"`
	Version  int     `json:"version"`
	Seq      int     `json:"seq"`
	Name     string  `json:"name"`
	Sec      *int32  `json:"sec"`
	Usec     *int32  `json:"usec"`
	Hopcount *uint8  `json:"hopcount"`
}

// packet is the Packet the fields describe.
func (f *vectorFields) packet() Packet {
	p := Packet{Type: Type(f.Type), Version: uint8(f.Version), Seq: uint16(f.Seq), Name: f.Name}
	if f.Sec != nil {
		p.Time.Sec = *f.Sec
	}
	if f.Usec != nil {
		p.Time.Usec = *f.Usec
	}
	if f.Hopcount != nil {
		p.HopCount = *f.Hopcount
	}
	return p
}

// loadVectors reads every vector (internal/vectors); it skips only where
// the shared folder is absent.
func loadVectors(tb testing.TB) []vector {
	tb.Helper()
	return vectors.Load(tb, func(v *vector, at string) { v.where = at })
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex: %v", err)
	}
	return b
}

func TestVectors(t *testing.T) {
	vs := loadVectors(t)
	var accepted, rejected int
	for _, v := range vs {
		t.Run(v.where, func(t *testing.T) {
			raw := mustHex(t, v.RawHex)
			if len(raw) != v.Length {
				t.Fatalf("raw_hex is %d bytes, line says length %d", len(raw), v.Length)
			}
			got, err := Unmarshal(raw)
			if v.Reject {
				rejected++
				var de *DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("%s: decoded to %+v, want a *DecodeError", v.Note, got)
				}
				t.Logf("refused as it should be: %v", err)
				return
			}
			accepted++
			if err != nil {
				t.Fatalf("%s: %v", v.Note, err)
			}
			want := v.Fields.packet()
			if got != want {
				t.Fatalf("decode(raw) = %+v, want %+v", got, want)
			}
			if v.Fields.TypeName != nil && got.Type.String() != *v.Fields.TypeName {
				t.Errorf("type name %q, want %q", got.Type, *v.Fields.TypeName)
			}
			if v.Fields.TypeName == nil && got.Type.Known() {
				t.Errorf("type %d should be unknown", got.Type)
			}
			enc, err := want.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if canon := mustHex(t, v.CanonicalHex); !bytes.Equal(enc, canon) {
				t.Fatalf("encode(fields) differs from canonical_hex:\n got %x\nwant %x", enc, canon)
			}
			again, err := Unmarshal(enc)
			if err != nil || again != want {
				t.Fatalf("decode(canonical) = %+v, %v; want %+v", again, err, want)
			}
		})
	}
	if accepted == 0 || rejected == 0 {
		t.Fatalf("vectors hold %d accepted and %d rejected lines; expected both kinds", accepted, rejected)
	}
}

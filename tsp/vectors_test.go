package tsp

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
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

// vectorsDir is ../shared/vectors beside the checkout, or $TIMED_VECTORS.
func vectorsDir() string {
	if d := os.Getenv("TIMED_VECTORS"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "shared", "vectors")
}

// loadVectors reads every *.jsonl file. Only these tests of shared data may
// skip, and only when the folder is absent.
func loadVectors(tb testing.TB) []vector {
	tb.Helper()
	dir := vectorsDir()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		if _, statErr := os.Stat(dir); os.IsNotExist(statErr) {
			tb.Skipf("test vectors not found at %s (set TIMED_VECTORS): the shared folder is absent", dir)
		}
		tb.Fatalf("no *.jsonl vectors in %s: %v", dir, err)
	}
	var vs []vector
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for line := 1; sc.Scan(); line++ {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			var v vector
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				tb.Fatalf("%s:%d: %v", file, line, err)
			}
			v.where = fmt.Sprintf("%s:%d", filepath.Base(file), line)
			vs = append(vs, v)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			tb.Fatal(err)
		}
	}
	return vs
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

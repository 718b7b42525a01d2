package tsp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestTypeNames(t *testing.T) {
	want := []string{"ANY", "ADJTIME", "ACK", "MASTERREQ", "MASTERACK", "SETTIME", "MASTERUP",
		"SLAVEUP", "ELECTION", "ACCEPT", "REFUSE", "CONFLICT", "RESOLVE", "QUIT", "DATE",
		"DATEREQ", "DATEACK", "TRACEON", "TRACEOFF", "MSITE", "MSITEREQ", "TEST", "SETDATE",
		"SETDATEREQ", "LOOP"}
	if len(want) != NumTypes {
		t.Fatalf("%d names for %d types", len(want), NumTypes)
	}
	for i, name := range want {
		if got := Type(i).String(); got != name {
			t.Errorf("Type(%d) = %q, want %q", i, got, name)
		}
		if back, ok := ParseType(strings.ToLower(name)); !ok || back != Type(i) {
			t.Errorf("ParseType(%q) = %v, %v", name, back, ok)
		}
	}
	if got := Type(30).String(); got != "TYPE(30)" {
		t.Errorf("unknown type prints %q", got)
	}
	if _, ok := ParseType("NOSUCH"); ok {
		t.Error("ParseType accepted an unknown name")
	}
}

// TestEncodeEveryType checks the layout of each type: header, union and
// name, with every other byte zero.
func TestEncodeEveryType(t *testing.T) {
	for typ := Type(0); typ < NumTypes; typ++ {
		p := Packet{Type: typ, Version: Version, Seq: 0xBEEF, Name: "host.example",
			Time: Timeval{Sec: -2, Usec: 750000}, HopCount: 7}
		b, err := p.Marshal()
		if err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		if len(b) != PacketSize {
			t.Fatalf("%v: %d bytes, want %d", typ, len(b), PacketSize)
		}
		want := make([]byte, PacketSize)
		want[0], want[1], want[2], want[3] = byte(typ), 1, 0xBE, 0xEF
		switch typ {
		case AdjTime, SetTime, SetDate, SetDateReq:
			binary.BigEndian.PutUint32(want[4:], uint32(0xFFFFFFFE))
			binary.BigEndian.PutUint32(want[8:], 750000)
		case Loop:
			want[4] = 7
		}
		copy(want[12:], "host.example")
		if !bytes.Equal(b, want) {
			t.Fatalf("%v:\n got %x\nwant %x", typ, b, want)
		}
		got, err := Unmarshal(b)
		if err != nil {
			t.Fatalf("%v: decode: %v", typ, err)
		}
		// The union survives only where the type carries it.
		exp := p
		if !typ.CarriesTime() {
			exp.Time = Timeval{}
		}
		if typ != Loop {
			exp.HopCount = 0
		}
		if got != exp {
			t.Fatalf("%v: round trip %+v, want %+v", typ, got, exp)
		}
	}
}

func TestUnmarshalRejects(t *testing.T) {
	valid, _ := (&Packet{Type: Ack, Version: 1, Name: "a"}).Marshal()
	noNUL := bytes.Repeat([]byte{'x'}, PacketSize)
	copy(noNUL, valid[:headerSize])
	badVersion := append([]byte(nil), valid...)
	badVersion[1] = 2
	shortNoNUL := bytes.Repeat([]byte{'y'}, MinPacketSize)
	copy(shortNoNUL, valid[:headerSize])
	cases := []struct {
		name string
		in   []byte
		want error
		msg  string
	}{
		{"empty", nil, ErrShort, "short packet: 0 bytes, need ≥ 44"},
		{"43 bytes", valid[:43], ErrShort, "short packet: 43 bytes, need ≥ 44"},
		{"version 2", badVersion, ErrBadVersion, "bad version: version 2, accept 0 or 1"},
		{"no NUL", noNUL, ErrNameNoNUL, "name not NUL-terminated: no NUL in 256 name bytes"},
		{"44 bytes no NUL", shortNoNUL, ErrNameNoNUL, "name not NUL-terminated: no NUL in 32 name bytes"},
	}
	for _, c := range cases {
		_, err := Unmarshal(c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
			continue
		}
		if err.Error() != c.msg {
			t.Errorf("%s: message %q, want %q", c.name, err, c.msg)
		}
	}
}

func TestUnmarshalLenient(t *testing.T) {
	p := Packet{Type: SetTime, Version: 0, Seq: 3, Time: Timeval{Sec: 100, Usec: 5}, Name: "n"}
	b, _ := p.Marshal()
	// Garbage after the NUL and past 268 bytes is ignored.
	long := append(append([]byte(nil), b...), bytes.Repeat([]byte{0xAA}, 10_000)...)
	for i := headerSize + 2; i < PacketSize; i++ {
		long[i] = 0x55
	}
	got, err := Unmarshal(long)
	if err != nil || got != p {
		t.Fatalf("got %+v, %v; want %+v", got, err, p)
	}
	// The 44-byte form: NUL inside the 32 name bytes received.
	got, err = Unmarshal(b[:MinPacketSize])
	if err != nil || got != p {
		t.Fatalf("44-byte form: %+v, %v", got, err)
	}
}

func TestMarshalNameLimits(t *testing.T) {
	p := Packet{Type: Ack, Version: 1, Name: strings.Repeat("a", MaxNameLen)}
	if _, err := p.Marshal(); err != nil {
		t.Fatalf("255-byte name: %v", err)
	}
	p.Name += "a"
	if _, err := p.Marshal(); !errors.Is(err, ErrNameTooLong) {
		t.Fatalf("256-byte name: err = %v, want ErrNameTooLong", err)
	}
	p.Name = "a\x00b"
	if _, err := p.Marshal(); !errors.Is(err, ErrNameHasNUL) {
		t.Fatalf("name with NUL: err = %v, want ErrNameHasNUL", err)
	}
}

func TestTruncateName(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes of two-byte runes
	got := TruncateName(long)
	if len(got) > MaxNameLen || len(got) != 254 || !strings.HasPrefix(long, got) {
		t.Fatalf("cut to %d bytes, want 254 on a rune boundary", len(got))
	}
	if got := TruncateName("host\x00junk"); got != "host" {
		t.Fatalf("NUL not cut: %q", got)
	}
	if got := TruncateName("short"); got != "short" {
		t.Fatalf("short name changed: %q", got)
	}
}

func TestTimevalDuration(t *testing.T) {
	cases := []struct {
		d  time.Duration
		tv Timeval
	}{
		{0, Timeval{0, 0}},
		{-10 * time.Millisecond, Timeval{-1, 990000}},
		{1500 * time.Millisecond, Timeval{1, 500000}},
		{-1500 * time.Millisecond, Timeval{-2, 500000}},
		{-time.Second, Timeval{-1, 0}},
		{-time.Microsecond, Timeval{-1, 999999}},
		{20*time.Second + 5*time.Millisecond, Timeval{20, 5000}},
	}
	for _, c := range cases {
		got, err := DurationTimeval(c.d)
		if err != nil || got != c.tv {
			t.Errorf("DurationTimeval(%v) = %+v, %v; want %+v", c.d, got, err, c.tv)
		}
		if back := c.tv.Duration(); back != c.d {
			t.Errorf("%+v.Duration() = %v, want %v", c.tv, back, c.d)
		}
	}
	if got, _ := DurationTimeval(1499 * time.Nanosecond); got != (Timeval{0, 1}) {
		t.Errorf("rounding to µs: %+v", got)
	}
	if _, err := DurationTimeval(time.Duration(1<<31) * time.Second); err == nil {
		t.Error("2^31 s accepted")
	}
	if s := (Timeval{-1, 990000}).String(); s != "-0.010000" {
		t.Errorf("String = %q, want -0.010000 (tcpdump's form)", s)
	}
}

func TestTimevalTime(t *testing.T) {
	at := time.Unix(1795311569, 42327000)
	tv, err := TimeTimeval(at)
	if err != nil || tv != (Timeval{1795311569, 42327}) {
		t.Fatalf("TimeTimeval = %+v, %v", tv, err)
	}
	if !tv.Time().Equal(at) {
		t.Fatalf("Time() = %v, want %v", tv.Time(), at)
	}
	// After 2038 the seconds wrap into the sign bit and still read back.
	late := time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC)
	tv, err = TimeTimeval(late)
	if err != nil || tv.Sec >= 0 || !tv.Time().Equal(late) {
		t.Fatalf("2050: %+v, %v, reads back %v", tv, err, tv.Time())
	}
	if _, err := TimeTimeval(time.Unix(-1, 0)); err == nil {
		t.Error("time before 1970 accepted")
	}
}

func TestFormat(t *testing.T) {
	cases := []struct {
		p    Packet
		from string
		want string
	}{
		{Packet{Type: AdjTime, Version: 1, Seq: 58761, Time: Timeval{-1, 990000}, Name: "tsa"}, "10.0.0.1:525",
			`ADJTIME v1 seq=58761 time=-0.010000 from=10.0.0.1:525 name="tsa"`},
		{Packet{Type: Loop, Version: 1, Seq: 2, HopCount: 10, Name: "m"}, "",
			`LOOP v1 seq=2 hops=10 name="m"`},
		{Packet{Type: 30, Version: 1, Seq: 1, Name: "future"}, "",
			`TYPE(30) v1 seq=1 name="future"`},
		{Packet{Type: MasterReq, Version: 0, Name: "bad\nname"}, "",
			`MASTERREQ v0 seq=0 name="bad\nname"`},
	}
	for _, c := range cases {
		if got := c.p.Format(c.from); got != c.want {
			t.Errorf("Format = %s\n          want %s", got, c.want)
		}
	}
}

func TestExtRoundTrip(t *testing.T) {
	e := ExtPacket{Kind: ExtProbe, Seq: 513, Name: "node-1", Payload: []byte{1, 2, 3, 4}}
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !IsExt(b) {
		t.Fatal("IsExt false for an extension packet")
	}
	// A BSD receiver drops it on the version byte.
	if _, err := Unmarshal(append(b, make([]byte, PacketSize)...)); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("BSD-style decode of an extension: %v, want ErrBadVersion", err)
	}
	got, err := UnmarshalExt(b)
	if err != nil || got.Kind != e.Kind || got.Seq != e.Seq || got.Name != e.Name || !bytes.Equal(got.Payload, e.Payload) {
		t.Fatalf("round trip %+v, %v", got, err)
	}
	if _, err := UnmarshalExt(b[:len(b)-1]); !errors.Is(err, ErrExtBadLength) {
		t.Fatalf("truncated: %v", err)
	}
	if _, err := UnmarshalExt(b[:3]); !errors.Is(err, ErrShort) {
		t.Fatalf("3 bytes: %v", err)
	}
	if _, err := (&ExtPacket{Payload: make([]byte, MaxExtPayload+1)}).Marshal(); err == nil {
		t.Fatal("oversized payload accepted")
	}
}

// TestHostileNameRejected: a name with control bytes, spaces or bytes
// beyond ASCII is not a host name; it is refused at decode, in both
// framings, and the error shows it escaped, never raw.
func TestHostileNameRejected(t *testing.T) {
	for _, name := range []string{"evil\x1b[2J", "a b", "tab\there", "csi\xc2\x9b", "del\x7f", "bell\a"} {
		b := make([]byte, PacketSize)
		b[0], b[1] = byte(MasterUp), Version
		copy(b[12:], name)
		_, err := Unmarshal(b)
		if !errors.Is(err, ErrBadName) {
			t.Errorf("%q: %v, want ErrBadName", name, err)
			continue
		}
		for _, c := range err.Error() {
			if c < ' ' || c == 0x7f {
				t.Errorf("%q: the error prints a control byte: %q", name, err.Error())
			}
		}
		e := ExtPacket{Kind: ExtProbe, Name: name}
		eb, merr := e.Marshal()
		if merr != nil {
			t.Fatal(merr)
		}
		if _, err := UnmarshalExt(eb); !errors.Is(err, ErrBadName) {
			t.Errorf("ext %q: %v, want ErrBadName", name, err)
		}
	}
	for _, name := range []string{"", "tsa", "hostb.example.com", "host_1-a"} {
		if !ValidName(name) {
			t.Errorf("%q refused", name)
		}
	}
}

func TestSourcePayload(t *testing.T) {
	b, err := SourcePayload{Name: "a1.example", Hops: 3}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalSource(b)
	if err != nil || got != (SourcePayload{Name: "a1.example", Hops: 3}) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for name, bad := range map[string][]byte{
		"empty":       {},
		"no name":     {0, 0},
		"short name":  {0, 5, 'a'},
		"extra bytes": append(slices.Clone(b), 0),
	} {
		if _, err := UnmarshalSource(bad); !errors.Is(err, ErrBadSource) {
			t.Errorf("%s: err %v, want ErrBadSource", name, err)
		}
	}
	if _, err := UnmarshalSource([]byte{0, 3, 'a', '\n', 'b'}); !errors.Is(err, ErrBadName) {
		t.Errorf("control byte in the name: err %v, want ErrBadName", err)
	}
	for _, s := range []SourcePayload{{}, {Name: "a b"}, {Name: strings.Repeat("x", MaxNameLen+1)}} {
		if _, err := s.Marshal(); err == nil {
			t.Errorf("%q encoded", s.Name)
		}
	}
}

func TestResignPayload(t *testing.T) {
	for _, n := range []int{0, 9, MaxResignSlaves} {
		b, err := ResignPayload{Slaves: n}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := UnmarshalResign(b); err != nil || got.Slaves != n {
			t.Errorf("%d: round trip %+v, %v", n, got, err)
		}
	}
	for name, bad := range map[string][]byte{"empty": {}, "short": {0}, "long": {0, 0, 1}, "beyond NHOSTS": {0xFF, 0xFF}} {
		if _, err := UnmarshalResign(bad); !errors.Is(err, ErrBadResign) {
			t.Errorf("%s: err %v, want ErrBadResign", name, err)
		}
	}
	for _, n := range []int{-1, MaxResignSlaves + 1} {
		if _, err := (ResignPayload{Slaves: n}).Marshal(); !errors.Is(err, ErrBadResign) {
			t.Errorf("%d encoded: %v", n, err)
		}
	}
	if ExtResign.String() != "RESIGN" {
		t.Errorf("name %q", ExtResign.String())
	}
}

func TestReferencePayload(t *testing.T) {
	for _, d := range []time.Duration{0, 1500 * time.Microsecond, MaxReferenceError} {
		b, err := ReferencePayload{MaxError: d}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := UnmarshalReference(b); err != nil || got.MaxError != d {
			t.Errorf("%v: round trip %+v, %v", d, got, err)
		}
	}
	for name, bad := range map[string][]byte{
		"empty": {}, "short": {0, 0, 1}, "long": {0, 0, 0, 1, 0},
		"beyond 16s": {0xFF, 0xFF, 0xFF, 0xFF},
	} {
		if _, err := UnmarshalReference(bad); !errors.Is(err, ErrBadReference) {
			t.Errorf("%s: err %v, want ErrBadReference", name, err)
		}
	}
	for _, d := range []time.Duration{-time.Microsecond, MaxReferenceError + time.Microsecond} {
		if _, err := (ReferencePayload{MaxError: d}).Marshal(); !errors.Is(err, ErrBadReference) {
			t.Errorf("%v encoded: %v", d, err)
		}
	}
	if ExtReference.String() != "REFERENCE" {
		t.Errorf("ExtReference is %q", ExtReference.String())
	}
}

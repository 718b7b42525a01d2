package clocksync

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMsSinceMidnight(t *testing.T) {
	cases := map[time.Time]uint32{
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC):                   0,
		time.Date(2026, 1, 1, 0, 0, 1, 999_999_999, time.UTC):         1999,
		time.Date(2026, 1, 1, 23, 59, 59, 999_000_000, time.UTC):      86_399_999,
		time.Date(2026, 1, 1, 12, 0, 0, 0, time.FixedZone("X", 3600)): 39_600_000, // 11:00 UT
		time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC):                82_800_000,
	}
	for tm, want := range cases {
		if got := MsSinceMidnight(tm); got != want {
			t.Errorf("MsSinceMidnight(%v) = %d, want %d", tm, got, want)
		}
	}
}

func TestFold12h(t *testing.T) {
	cases := map[int64]int64{
		0:               0,
		5:               5,
		-5:              -5,
		msHalfDay - 1:   msHalfDay - 1,
		msHalfDay:       -msHalfDay,
		-msHalfDay:      -msHalfDay,
		-msHalfDay - 1:  msHalfDay - 1,
		msPerDay - 3:    -3, // our stamp before midnight, theirs after
		-(msPerDay - 3): 3,
		3*msPerDay + 7:  7,
	}
	for in, want := range cases {
		if got := Fold12h(in); got != want {
			t.Errorf("Fold12h(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestTimestampBuildParse(t *testing.T) {
	req, err := BuildTimestampRequest(0x1234, 0x0a0b, 86_399_999)
	if err != nil {
		t.Fatal(err)
	}
	if len(req) != 20 || req[0] != 13 || req[1] != 0 {
		t.Fatalf("request % x", req)
	}
	if got := binary.BigEndian.Uint32(req[8:]); got != 86_399_999 {
		t.Fatalf("originate %d", got)
	}
	if onesSum(req) != 0xffff {
		t.Fatalf("bad checksum in % x", req)
	}
	// A reply as a remote host builds it: type 14, its stamps filled in.
	rep := append([]byte(nil), req...)
	rep[0] = 14
	binary.BigEndian.PutUint32(rep[12:], 5)
	binary.BigEndian.PutUint32(rep[16:], 6)
	ts, err := ParseTimestampReply(rep)
	if err != nil {
		t.Fatal(err)
	}
	want := ICMPTimestamp{ID: 0x1234, Seq: 0x0a0b, Originate: 86_399_999, Receive: 5, Transmit: 6}
	if ts != want {
		t.Fatalf("parsed %+v, want %+v", ts, want)
	}
	if _, err := ParseTimestampReply(req); err == nil {
		t.Fatal("a request parsed as a reply")
	}
	if _, err := ParseTimestampReply(rep[:12]); err == nil {
		t.Fatal("short reply parsed")
	}
	if _, err := ParseTimestampReply(nil); err == nil {
		t.Fatal("empty parsed")
	}
}

func onesSum(b []byte) uint32 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return s
}

func TestICMPSample(t *testing.T) {
	// Remote 250 ms ahead, 2 ms each way: sent at 1000, received there at
	// 1252, sent back at 1253, back here at 1005.
	off, rtt, err := ICMPSample(ICMPTimestamp{Originate: 1000, Receive: 1252, Transmit: 1253}, 1005)
	if err != nil || off != 250*time.Millisecond || rtt != 5*time.Millisecond {
		t.Fatalf("ahead: %v %v %v", off, rtt, err)
	}
	// Across midnight: we send at 23:59:59.999, the remote (3 ms behind)
	// stamps 23:59:59.997 + 1; we receive at 00:00:00.001.
	off, rtt, err = ICMPSample(ICMPTimestamp{Originate: 86_399_999, Receive: 86_399_997, Transmit: 86_399_997}, 1)
	if err != nil || off != -3*time.Millisecond || rtt != 2*time.Millisecond {
		t.Fatalf("midnight: %v %v %v", off, rtt, err)
	}
	// A remote 11 h ahead still folds to +11 h; 13 h ahead reads −11 h.
	off, _, _ = ICMPSample(ICMPTimestamp{Originate: 0, Receive: 11 * 3_600_000, Transmit: 11 * 3_600_000}, 0)
	if off != 11*time.Hour {
		t.Fatalf("+11 h: %v", off)
	}
	off, _, _ = ICMPSample(ICMPTimestamp{Originate: 0, Receive: 13 * 3_600_000, Transmit: 13 * 3_600_000}, 0)
	if off != -11*time.Hour {
		t.Fatalf("+13 h folds to %v, want −11h", off)
	}
	if _, _, err := ICMPSample(ICMPTimestamp{Originate: 10, Receive: 1 << 31, Transmit: 5}, 12); !errors.Is(err, ErrNonStdTime) {
		t.Fatalf("non-standard: %v", err)
	}
	if _, _, err := ICMPSample(ICMPTimestamp{Originate: 10, Receive: 5, Transmit: 5}, 9); !errors.Is(err, ErrBadSample) {
		t.Fatalf("negative rtt: %v", err)
	}
}

func TestRawSocketErrorNamesCapability(t *testing.T) {
	err := mapRawSocketErr(&os.SyscallError{Syscall: "socket", Err: syscall.EPERM})
	if !errors.Is(err, ErrNoRawSocket) || !strings.Contains(err.Error(), "CAP_NET_RAW") {
		t.Fatalf("EPERM: %v", err)
	}
	if err := mapRawSocketErr(syscall.EPROTONOSUPPORT); errors.Is(err, ErrNoRawSocket) {
		t.Fatalf("other errors mapped to the capability: %v", err)
	}
}

package auth

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
)

func TestTrailerLayout(t *testing.T) {
	tr := Trailer{KeyID: 0x01020304, Sender: 0x1112131415161718, Counter: 0x2122232425262728, Timestamp: -2,
		Nonce: 0x3132333435363738, Echo: 0x4142434445464748, MACLen: 32}
	h := tr.appendHeader(nil)
	want := []byte{
		'T', 'S', 'P', 'A', 2, 32, 0, 0, // magic, version, MAC length, reserved
		1, 2, 3, 4, // key ID
		0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, // sender
		0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, // counter
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, // timestamp
		0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, // nonce
		0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, // echo
	}
	if !bytes.Equal(h, want) || len(h) != TrailerHeaderSize {
		t.Fatalf("header\n got % x\nwant % x", h, want)
	}
	got, mac, err := ParseTrailer(append(h, make([]byte, 32)...))
	if err != nil || got != tr || len(mac) != 32 {
		t.Fatalf("ParseTrailer = %+v, %d-byte MAC, %v; want %+v", got, len(mac), err, tr)
	}
}

func TestSplit(t *testing.T) {
	s := newSigner(t, Config{Mode: Required, Keys: keyring(t, testKey(t, 1, SHA256))}, t0)
	v1 := tspPacket(8, 3, "tsa")
	ext := extPacket(0x80, "tsb", []byte("probe payload"))
	signedV1, signedExt := sign(t, s, v1, t0), sign(t, s, ext, t0)

	withTrailer := func(p []byte, mutate func(tr []byte)) []byte {
		d := sign(t, s, p, t0)
		mutate(d[len(p):])
		return d
	}
	for _, tc := range []struct {
		name            string
		d               []byte
		packet, trailer int // lengths; -1 trailer: an error
	}{
		{"empty", nil, 0, 0},
		{"one byte", []byte{1}, 1, 0},
		{"v1 packet", v1, 268, 0},
		{"v0 packet", append([]byte{1, 0}, v1[2:]...), 268, 0},
		{"4.3BSD 44-byte packet", v1[:44], 44, 0},
		{"signed v1", signedV1, 268, 84},
		{"ext packet", ext, len(ext), 0},
		{"ext packet cut short", ext[:len(ext)-1], len(ext) - 1, 0},
		{"ext header cut short", ext[:7], 7, 0},
		{"signed ext", signedExt, len(ext), 84},
		{"unknown version, extra bytes", append([]byte{1, 3}, signedV1[2:]...), len(signedV1), 0},
		{"v1 with junk after", append(bytes.Clone(v1), "junk"...), -1, -1},
		{"v1 with 52 zero bytes after", append(bytes.Clone(v1), make([]byte, 52)...), -1, -1},
		{"trailer one byte short", signedV1[:len(signedV1)-1], -1, -1},
		{"trailer one byte long", append(bytes.Clone(signedV1), 0), -1, -1},
		{"bad magic", withTrailer(v1, func(tr []byte) { tr[0] = 't' }), -1, -1},
		{"trailer version 1 (before nonce and echo)", withTrailer(v1, func(tr []byte) { tr[4] = 1 }), -1, -1},
		{"trailer version 3", withTrailer(v1, func(tr []byte) { tr[4] = 3 }), -1, -1},
		{"MAC length 33", withTrailer(v1, func(tr []byte) { tr[5] = 33 }), -1, -1},
		{"MAC length 20 on 32 bytes", withTrailer(v1, func(tr []byte) { tr[5] = 20 }), -1, -1},
		{"reserved byte set", withTrailer(v1, func(tr []byte) { tr[7] = 1 }), -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, tr, err := Split(tc.d)
			if tc.trailer < 0 {
				if !errors.Is(err, ErrMalformed) || ReasonOf(err) != ReasonMalformed {
					t.Fatalf("Split = %d+%d bytes, %v; want ErrMalformed", len(p), len(tr), err)
				}
				return
			}
			if err != nil || len(p) != tc.packet || len(tr) != tc.trailer {
				t.Fatalf("Split = %d+%d bytes, %v; want %d+%d", len(p), len(tr), err, tc.packet, tc.trailer)
			}
			if !bytes.Equal(append(bytes.Clone(p), tr...), tc.d) {
				t.Fatal("packet and trailer are not the datagram cut in two")
			}
		})
	}
}

func TestTrailerSizes(t *testing.T) {
	for _, h := range []Hash{SHA1, SHA256, SHA384, SHA512} {
		s := newSigner(t, Config{Mode: Required, Keys: keyring(t, testKey(t, 1, h))}, t0)
		d := sign(t, s, tspPacket(1, 1, "a"), t0)
		if got, want := len(d)-tspPacketSize, TrailerHeaderSize+h.Size(); got != want || got > MaxTrailerSize {
			t.Errorf("%v: trailer of %d bytes, want %d (at most %d)", h, got, want, MaxTrailerSize)
		}
		if got, ok := hashBySize(h.Size()); !ok || got != h {
			t.Errorf("hashBySize(%d) = %v", h.Size(), got)
		}
	}
}

func TestSignRefusesBadFraming(t *testing.T) {
	s := newSigner(t, Config{Mode: Optional, Keys: keyring(t, testKey(t, 1, SHA1))}, t0)
	ext := extPacket(0x80, "n", []byte("p"))
	for name, p := range map[string][]byte{
		"short v1":        tspPacket(1, 1, "a")[:267],
		"4.3BSD form":     tspPacket(1, 1, "a")[:76],
		"long v1":         append(tspPacket(1, 1, "a"), 0),
		"ext cut":         ext[:len(ext)-1],
		"ext with extra":  append(bytes.Clone(ext), 0),
		"unknown version": {1, 9, 0, 0},
		"empty":           nil,
	} {
		if _, err := s.Sign(p, t0); !errors.Is(err, ErrFraming) {
			t.Errorf("%s: %v, want ErrFraming", name, err)
		}
	}
}

func TestModeAndPeers(t *testing.T) {
	for _, m := range []Mode{Off, Optional, Required} {
		got, err := ParseMode(m.String())
		b, _ := m.MarshalText()
		var u Mode
		if err != nil || got != m || u.UnmarshalText(b) != nil || u != m {
			t.Errorf("%v: ParseMode → %v, %v; text %q → %v", m, got, err, b, u)
		}
	}
	if m, err := ParseMode("REQUIRED"); m != Required || err != nil {
		t.Errorf("any case: %v, %v", m, err)
	}
	if _, err := ParseMode("on"); !errors.Is(err, ErrBadMode) {
		t.Errorf("on: %v", err)
	}
	if Off.Signs() || !Optional.Signs() || !Required.Signs() {
		t.Error("Signs")
	}
	for in, want := range map[string]string{
		"10.0.0.5":            "10.0.0.5/32",
		" 10.0.0.0/8 ":        "10.0.0.0/8",
		"10.1.2.3/24":         "10.1.2.0/24",
		"::ffff:10.0.0.5":     "10.0.0.5/32",
		"::ffff:10.0.0.0/120": "10.0.0.0/24",
		"2001:db8::1":         "2001:db8::1/128",
	} {
		p, err := ParsePeer(in)
		if err != nil || p != netip.MustParsePrefix(want) {
			t.Errorf("ParsePeer(%q) = %v, %v; want %v", in, p, err, want)
		}
	}
	for _, in := range []string{"", "host.example", "10.0.0.0/33", "10.0.0.1:525"} {
		if _, err := ParsePeer(in); err == nil {
			t.Errorf("ParsePeer(%q) accepted", in)
		}
	}
}

// A trailer's counter field is where the test says it is.
func counterOf(d []byte) uint64 {
	_, tr, _ := Split(d)
	return binary.BigEndian.Uint64(tr[20:28])
}

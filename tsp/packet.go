package tsp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Sizes of the wire format (facts §1).
const (
	// PacketSize is sizeof(struct tsp) on FreeBSD: 12 header bytes and a
	// 256-byte name. Every BSD sender sends exactly this many bytes.
	PacketSize = 268
	// NameSize is FreeBSD's MAXHOSTNAMELEN, the size of the name field.
	NameSize = 256
	// MaxNameLen is the longest name that still leaves room for the NUL.
	MaxNameLen = NameSize - 1
	// MinPacketSize is what readmsg accepts at the least: the 1985 form
	// with a 32-byte name (sizeof(struct tsp) − MAXHOSTNAMELEN + 32).
	MinPacketSize = 44

	headerSize = 12
)

// Versions seen in the version byte.
const (
	// Version is TSPVERSION, written by every BSD sender.
	Version = 1
	// VersionExt frames this project's extensions (probes, ring
	// elections). BSD receivers drop any version above 1, so they ignore
	// these packets without harm.
	VersionExt = 2
)

// Packet is one TSP message. Time is meaningful only for types where
// Type.CarriesTime is true, HopCount only for LOOP; the encoder writes zeros
// in the union for every other type.
type Packet struct {
	Type     Type
	Version  uint8
	Seq      uint16
	Time     Timeval
	HopCount uint8
	Name     string
}

// Sentinel causes of a rejected datagram, for errors.Is and for counting
// drops by reason.
var (
	ErrShort       = errors.New("short packet")
	ErrBadVersion  = errors.New("bad version")
	ErrNameNoNUL   = errors.New("name not NUL-terminated")
	ErrNameTooLong = errors.New("name too long")
	ErrNameHasNUL  = errors.New("name contains NUL")
	ErrBadName     = errors.New("name is not a host name")
)

// ValidName reports whether name can be a host name: printable ASCII, no
// space and no control byte (BSD's good_host_name idea). A name that is not
// may carry terminal escapes meant for an admin's screen, so the decoders
// drop it; BSD daemons only ever send their host name. The empty name
// passes: it prints nothing.
func ValidName(name string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// badName describes a rejected name without printing its bytes raw.
func badName(name string) *DecodeError {
	if len(name) > 32 {
		name = name[:32] + "…"
	}
	return &DecodeError{ErrBadName, strconv.QuoteToASCII(name)}
}

// DecodeError says why a datagram was refused. Err is one of the sentinel
// errors above; the message adds the numbers that made it wrong.
type DecodeError struct {
	Err    error
	Detail string
}

func (e *DecodeError) Error() string { return e.Err.Error() + ": " + e.Detail }
func (e *DecodeError) Unwrap() error { return e.Err }

// Unmarshal decodes a received datagram, accepting exactly what BSD's
// readmsg accepts: at least 44 bytes, version 0 or 1, and a NUL somewhere in
// the name bytes received. Bytes past 268 are ignored, as are the union
// bytes of types that carry neither a time nor a hop count and the name
// bytes after the NUL (BSD senders leave stack garbage there). Unknown
// types decode with their number: it is the caller's job to drop them.
func Unmarshal(b []byte) (Packet, error) {
	if len(b) < MinPacketSize {
		return Packet{}, &DecodeError{ErrShort, fmt.Sprintf("%d bytes, need ≥ %d", len(b), MinPacketSize)}
	}
	if len(b) > PacketSize {
		b = b[:PacketSize]
	}
	p := Packet{Type: Type(b[0]), Version: b[1], Seq: binary.BigEndian.Uint16(b[2:4])}
	if p.Version > Version {
		return Packet{}, &DecodeError{ErrBadVersion, fmt.Sprintf("version %d, accept 0 or 1", p.Version)}
	}
	name := b[headerSize:]
	n := bytes.IndexByte(name, 0)
	if n < 0 {
		return Packet{}, &DecodeError{ErrNameNoNUL, fmt.Sprintf("no NUL in %d name bytes", len(name))}
	}
	p.Name = string(name[:n])
	if !ValidName(p.Name) {
		return Packet{}, badName(p.Name)
	}
	switch {
	case p.Type.CarriesTime():
		p.Time.Sec = int32(binary.BigEndian.Uint32(b[4:8]))
		p.Time.Usec = int32(binary.BigEndian.Uint32(b[8:12]))
	case p.Type == Loop:
		p.HopCount = b[4]
	}
	return p, nil
}

// Marshal encodes p in FreeBSD's 268-byte layout. Every byte the fields do
// not cover is zero. A name of more than 255 bytes, or one holding a NUL,
// is an error: use TruncateName to make a host name fit.
func (p *Packet) Marshal() ([]byte, error) {
	return p.AppendMarshal(make([]byte, 0, PacketSize))
}

// AppendMarshal appends the 268-byte encoding of p to dst.
func (p *Packet) AppendMarshal(dst []byte) ([]byte, error) {
	if len(p.Name) > MaxNameLen {
		return dst, fmt.Errorf("encode %v: %w: %d bytes, at most %d", p.Type, ErrNameTooLong, len(p.Name), MaxNameLen)
	}
	if bytes.IndexByte([]byte(p.Name), 0) >= 0 {
		return dst, fmt.Errorf("encode %v: %w", p.Type, ErrNameHasNUL)
	}
	start := len(dst)
	dst = append(dst, make([]byte, PacketSize)...)
	b := dst[start:]
	b[0], b[1] = byte(p.Type), p.Version
	binary.BigEndian.PutUint16(b[2:4], p.Seq)
	switch {
	case p.Type.CarriesTime():
		binary.BigEndian.PutUint32(b[4:8], uint32(p.Time.Sec))
		binary.BigEndian.PutUint32(b[8:12], uint32(p.Time.Usec))
	case p.Type == Loop:
		b[4] = p.HopCount
	}
	copy(b[headerSize:], p.Name)
	return dst, nil
}

// TruncateName cuts a host name to at most MaxNameLen bytes without
// splitting a UTF-8 sequence, and stops it at any NUL, so that it always
// encodes.
func TruncateName(name string) string {
	if i := bytes.IndexByte([]byte(name), 0); i >= 0 {
		name = name[:i]
	}
	if len(name) <= MaxNameLen {
		return name
	}
	cut := MaxNameLen
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut]
}

// String is the one-line form used by trace output and debug logs.
func (p Packet) String() string { return p.Format("") }

// Format renders the packet on one line for a sysadmin: type, version,
// sequence number, the time or hop count where the type carries one, the
// source address (if from is not empty) and the sender's name.
//
//	ADJTIME v1 seq=58761 time=-0.010000 from=10.0.0.1 name="tsa"
func (p Packet) Format(from string) string {
	var b []byte
	b = fmt.Appendf(b, "%v v%d seq=%d", p.Type, p.Version, p.Seq)
	switch {
	case p.Type.CarriesTime():
		b = fmt.Appendf(b, " time=%v", p.Time)
	case p.Type == Loop:
		b = fmt.Appendf(b, " hops=%d", p.HopCount)
	}
	if from != "" {
		b = fmt.Appendf(b, " from=%s", from)
	}
	b = fmt.Appendf(b, " name=%q", p.Name)
	return string(b)
}

package tsp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// ExtKind identifies one of this project's extension messages. They travel
// with VersionExt in the version byte, which every BSD receiver drops
// (readmsg: vers > TSPVERSION), so mixed networks stay safe.
type ExtKind uint8

// Extension kinds. They are numbered from 0x80, far past TSP's types
// (0-24), so that decoders that ignore the version byte (tcpdump,
// Wireshark) show them as unknown types rather than as ADJTIME or ACK.
// New kinds are appended; numbers are never reused.
const (
	ExtProbe      ExtKind = 0x80 // clock probe request (clocksync)
	ExtProbeReply ExtKind = 0x81 // clock probe reply (clocksync)
	ExtRing       ExtKind = 0x82 // ring-election message (election/ring)
	ExtRingCtl    ExtKind = 0x83 // ring-election control: start, result (timedc ring)
	ExtSourceReq  ExtKind = 0x84 // "which time source do you serve?" to a master (election.Host); no payload
	ExtSource     ExtKind = 0x85 // a master's answer to ExtSourceReq: SourcePayload, the query's Seq
	ExtReference  ExtKind = 0x86 // a reference's claim, broadcast (election.TellReference): ReferencePayload
	ExtSpan       ExtKind = 0x87 // "I serve both families of this link", broadcast (election.TellSpan); no payload
	ExtResign     ExtKind = 0x88 // a master gives its network up, broadcast (election.TellResign): ResignPayload
)

var extNames = map[ExtKind]string{
	ExtProbe: "PROBE", ExtProbeReply: "PROBEREPLY", ExtRing: "RING", ExtRingCtl: "RINGCTL",
	ExtSourceReq: "SOURCEREQ", ExtSource: "SOURCE", ExtReference: "REFERENCE",
	ExtSpan: "SPAN", ExtResign: "RESIGN",
}

func (k ExtKind) String() string {
	if n, ok := extNames[k]; ok {
		return n
	}
	return fmt.Sprintf("EXT(%d)", uint8(k))
}

// ExtPacket is an extension message. Its layout keeps BSD's first four
// bytes (kind where BSD has the type, version 2, big-endian seq) so that a
// BSD receiver reads and drops it on the version byte:
//
//	0 kind | 1 version=2 | 2..3 seq BE | 4..5 payload length BE | 6 name length | 7 reserved (sent as zero, ignored)
//	8.. name (no NUL) | payload
type ExtPacket struct {
	Kind    ExtKind
	Seq     uint16
	Name    string
	Payload []byte
}

const extHeaderSize = 8

// MaxExtPayload keeps every extension datagram well inside one Ethernet
// frame's UDP payload (1472 bytes), so it is never fragmented.
const MaxExtPayload = 1472 - extHeaderSize - MaxNameLen

// ErrExtBadLength is returned when an extension datagram's length fields
// do not match the bytes received.
var ErrExtBadLength = errors.New("extension length mismatch")

// IsExt reports whether a datagram uses the extension framing, judged on
// the version byte alone, the way the receiver sorts datagrams.
func IsExt(b []byte) bool { return len(b) >= 2 && b[1] == VersionExt }

// Marshal encodes the extension packet.
func (e *ExtPacket) Marshal() ([]byte, error) {
	if len(e.Name) > MaxNameLen {
		return nil, fmt.Errorf("encode %v: %w: %d bytes, at most %d", e.Kind, ErrNameTooLong, len(e.Name), MaxNameLen)
	}
	if len(e.Payload) > MaxExtPayload {
		return nil, fmt.Errorf("encode %v: payload of %d bytes, at most %d", e.Kind, len(e.Payload), MaxExtPayload)
	}
	b := make([]byte, extHeaderSize, extHeaderSize+len(e.Name)+len(e.Payload))
	b[0], b[1] = byte(e.Kind), VersionExt
	binary.BigEndian.PutUint16(b[2:4], e.Seq)
	binary.BigEndian.PutUint16(b[4:6], uint16(len(e.Payload)))
	b[6] = byte(len(e.Name))
	b = append(b, e.Name...)
	return append(b, e.Payload...), nil
}

// UnmarshalExt decodes an extension datagram. The payload is copied, so
// the caller may reuse b.
func UnmarshalExt(b []byte) (ExtPacket, error) {
	if len(b) < extHeaderSize {
		return ExtPacket{}, &DecodeError{ErrShort, fmt.Sprintf("%d bytes, extension needs ≥ %d", len(b), extHeaderSize)}
	}
	if b[1] != VersionExt {
		return ExtPacket{}, &DecodeError{ErrBadVersion, fmt.Sprintf("version %d, extension needs %d", b[1], VersionExt)}
	}
	plen, nlen := int(binary.BigEndian.Uint16(b[4:6])), int(b[6])
	if plen > MaxExtPayload {
		return ExtPacket{}, &DecodeError{ErrExtBadLength, fmt.Sprintf("payload of %d bytes, at most %d", plen, MaxExtPayload)}
	}
	if want := extHeaderSize + nlen + plen; len(b) != want {
		return ExtPacket{}, &DecodeError{ErrExtBadLength, fmt.Sprintf("%d bytes, header says %d", len(b), want)}
	}
	e := ExtPacket{Kind: ExtKind(b[0]), Seq: binary.BigEndian.Uint16(b[2:4])}
	e.Name = string(b[extHeaderSize : extHeaderSize+nlen])
	if !ValidName(e.Name) {
		return ExtPacket{}, badName(e.Name)
	}
	e.Payload = append([]byte(nil), b[extHeaderSize+nlen:]...)
	return e, nil
}

// SourcePayload is the payload of ExtSource: the time source a master
// serves (the top of its tree of masters, what its LOOPs tell in a round)
// and how many gateways away it is (0: the master is its own source).
//
//	0 hops | 1 name length | 2.. name (no NUL)
type SourcePayload struct {
	Name string
	Hops uint8
}

const sourceHeaderSize = 2

// ErrBadSource is returned for an ExtSource payload that does not decode.
var ErrBadSource = errors.New("bad time-source payload")

// Marshal encodes the payload.
func (s SourcePayload) Marshal() ([]byte, error) {
	if s.Name == "" || len(s.Name) > MaxNameLen || !ValidName(s.Name) {
		return nil, fmt.Errorf("encode source %q: %w", s.Name, ErrBadSource)
	}
	b := make([]byte, sourceHeaderSize, sourceHeaderSize+len(s.Name))
	b[0], b[1] = s.Hops, byte(len(s.Name))
	return append(b, s.Name...), nil
}

// UnmarshalSource decodes an ExtSource payload. The name must be a
// printable host name, as every name tsp decodes.
func UnmarshalSource(b []byte) (SourcePayload, error) {
	if len(b) < sourceHeaderSize {
		return SourcePayload{}, &DecodeError{ErrBadSource, fmt.Sprintf("%d bytes, needs ≥ %d", len(b), sourceHeaderSize)}
	}
	n := int(b[1])
	if n == 0 || n > MaxNameLen || len(b) != sourceHeaderSize+n {
		return SourcePayload{}, &DecodeError{ErrBadSource, fmt.Sprintf("%d bytes with a name of %d", len(b), n)}
	}
	s := SourcePayload{Hops: b[0], Name: string(b[sourceHeaderSize:])}
	if !ValidName(s.Name) {
		return SourcePayload{}, badName(s.Name)
	}
	return s, nil
}

// ReferencePayload is the payload of ExtReference: the claiming host's
// kernel maxerror (its clock's bound on its distance from UTC, as chrony
// or ntpd keep it), in microseconds, at most MaxReferenceError.
//
//	0..3 maxerror µs BE
type ReferencePayload struct {
	MaxError time.Duration
}

// MaxReferenceError is the largest maxerror a claim carries: the
// kernel's 16 s, beyond which a clock is unsynchronised.
const MaxReferenceError = 16 * time.Second

const referenceSize = 4

// ErrBadReference is returned for an ExtReference payload that does not
// decode.
var ErrBadReference = errors.New("bad reference payload")

// Marshal encodes the payload; a maxerror out of [0, MaxReferenceError]
// is an error.
func (r ReferencePayload) Marshal() ([]byte, error) {
	if r.MaxError < 0 || r.MaxError > MaxReferenceError {
		return nil, fmt.Errorf("encode reference maxerror %v: %w (0 to %v)", r.MaxError, ErrBadReference, MaxReferenceError)
	}
	b := make([]byte, referenceSize)
	binary.BigEndian.PutUint32(b, uint32(r.MaxError/time.Microsecond))
	return b, nil
}

// UnmarshalReference decodes an ExtReference payload.
func UnmarshalReference(b []byte) (ReferencePayload, error) {
	if len(b) != referenceSize {
		return ReferencePayload{}, &DecodeError{ErrBadReference, fmt.Sprintf("%d bytes, want %d", len(b), referenceSize)}
	}
	d := time.Duration(binary.BigEndian.Uint32(b)) * time.Microsecond
	if d > MaxReferenceError {
		return ReferencePayload{}, &DecodeError{ErrBadReference, fmt.Sprintf("maxerror %v beyond %v", d, MaxReferenceError)}
	}
	return ReferencePayload{MaxError: d}, nil
}

// ResignPayload is the payload of ExtResign: how many slaves the
// resigning master had, which its eligible slaves scale their draw by
// (election.ResignHeard), at most MaxResignSlaves.
//
//	0..1 slaves BE
type ResignPayload struct {
	Slaves int
}

// MaxResignSlaves is the largest slave count a resignation carries:
// BSD's NHOSTS.
const MaxResignSlaves = 1013

const resignSize = 2

// ErrBadResign is returned for an ExtResign payload that does not decode.
var ErrBadResign = errors.New("bad resign payload")

// Marshal encodes the payload; a count out of [0, MaxResignSlaves] is an
// error.
func (r ResignPayload) Marshal() ([]byte, error) {
	if r.Slaves < 0 || r.Slaves > MaxResignSlaves {
		return nil, fmt.Errorf("encode resign slaves %d: %w (0 to %d)", r.Slaves, ErrBadResign, MaxResignSlaves)
	}
	b := make([]byte, resignSize)
	binary.BigEndian.PutUint16(b, uint16(r.Slaves))
	return b, nil
}

// UnmarshalResign decodes an ExtResign payload.
func UnmarshalResign(b []byte) (ResignPayload, error) {
	if len(b) != resignSize {
		return ResignPayload{}, &DecodeError{ErrBadResign, fmt.Sprintf("%d bytes, want %d", len(b), resignSize)}
	}
	n := int(binary.BigEndian.Uint16(b))
	if n > MaxResignSlaves {
		return ResignPayload{}, &DecodeError{ErrBadResign, fmt.Sprintf("%d slaves, beyond %d", n, MaxResignSlaves)}
	}
	return ResignPayload{Slaves: n}, nil
}

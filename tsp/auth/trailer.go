package auth

import (
	"encoding/binary"
	"errors"
)

// The framing of the packets a trailer follows. They are tsp's
// (tsp.PacketSize, tsp.Version, tsp.VersionExt and the extension header);
// this package cannot import tsp, which will import it, so they are
// repeated here and pinned to tsp's by a test.
const (
	tspPacketSize    = 268 // a version 0 or 1 packet as we send it
	tspVersionExt    = 2   // version byte of the extension framing
	tspExtHeaderSize = 8   // extension header: lengths at 4..5 (payload) and 6 (name)

	// The TSP types that move a clock: the two corrections, the date
	// change and its request, and DATEACK, the date path's answer.
	tspAdjTime    = 1
	tspSetTime    = 5
	tspDateAck    = 16
	tspSetDate    = 22
	tspSetDateReq = 23
)

// MovesClock reports whether a packet (as Split returns it) is one of the
// TSP types that move a clock or answer for a moved one: ADJTIME,
// SETTIME, SETDATE, SETDATEREQ and DATEACK, in version 0 or 1. Only these
// must echo the receiver's nonce (see the package doc, "Freshness").
func MovesClock(packet []byte) bool {
	if len(packet) < 2 || packet[1] > 1 {
		return false
	}
	switch packet[0] {
	case tspAdjTime, tspSetTime, tspDateAck, tspSetDate, tspSetDateReq:
		return true
	}
	return false
}

// Trailer layout (see the package doc).
const (
	// Magic opens every trailer: "TSPA".
	Magic = "TSPA"
	// TrailerVersion is the layout's version, byte 4. Version 1 (36
	// bytes before the MAC, without nonce and echo) is no longer read:
	// its datagrams are malformed here, as this version's are to it.
	TrailerVersion = 2
	// TrailerHeaderSize is the fixed part, before the MAC.
	TrailerHeaderSize = 52
	// MaxTrailerSize is the longest trailer, with a SHA512 MAC.
	MaxTrailerSize = TrailerHeaderSize + 64
)

// Trailer is the decoded fixed part of a trailer.
type Trailer struct {
	KeyID     uint32
	Sender    uint64 // the sender's identity, random, kept in its state
	Counter   uint64 // strictly increasing per Sender
	Timestamp int64  // the sender's clock at sending, Unix nanoseconds
	// Nonce is the sender's nonce of this run: random, drawn at start
	// (and again when its replay table evicts a sender), never saved.
	Nonce uint64
	// Echo is the receiver's nonce as the sender last heard it from the
	// address it sends to; 0 when it has heard none (and in broadcasts).
	// A datagram that moves a clock is accepted only if Echo is the
	// receiver's current nonce (see the package doc, "Freshness").
	Echo   uint64
	MACLen int // 20, 32, 48 or 64: the key's hash size
}

// appendHeader appends the TrailerHeaderSize-byte header of t.
func (t *Trailer) appendHeader(b []byte) []byte {
	b = append(b, Magic...)
	b = append(b, TrailerVersion, byte(t.MACLen), 0, 0)
	b = binary.BigEndian.AppendUint32(b, t.KeyID)
	b = binary.BigEndian.AppendUint64(b, t.Sender)
	b = binary.BigEndian.AppendUint64(b, t.Counter)
	b = binary.BigEndian.AppendUint64(b, uint64(t.Timestamp))
	b = binary.BigEndian.AppendUint64(b, t.Nonce)
	return binary.BigEndian.AppendUint64(b, t.Echo)
}

// ParseTrailer decodes a trailer (as Split returns it). The error is a
// *DropError with ReasonMalformed.
func ParseTrailer(tr []byte) (Trailer, []byte, error) {
	if len(tr) < TrailerHeaderSize {
		return Trailer{}, nil, drop(ReasonMalformed, "%d bytes after the packet, a trailer has at least %d", len(tr), TrailerHeaderSize)
	}
	if string(tr[:4]) != Magic {
		return Trailer{}, nil, drop(ReasonMalformed, "%d bytes after the packet without the trailer's magic %q", len(tr), Magic)
	}
	if tr[4] != TrailerVersion {
		return Trailer{}, nil, drop(ReasonMalformed, "trailer version %d, accept %d: the sender runs another version of timed (upgrade every host that signs)", tr[4], TrailerVersion)
	}
	t := Trailer{
		MACLen:    int(tr[5]),
		KeyID:     binary.BigEndian.Uint32(tr[8:12]),
		Sender:    binary.BigEndian.Uint64(tr[12:20]),
		Counter:   binary.BigEndian.Uint64(tr[20:28]),
		Timestamp: int64(binary.BigEndian.Uint64(tr[28:36])),
		Nonce:     binary.BigEndian.Uint64(tr[36:44]),
		Echo:      binary.BigEndian.Uint64(tr[44:52]),
	}
	if _, ok := hashBySize(t.MACLen); !ok {
		return Trailer{}, nil, drop(ReasonMalformed, "MAC length %d, accept 20, 32, 48 or 64", t.MACLen)
	}
	if tr[6] != 0 || tr[7] != 0 {
		return Trailer{}, nil, drop(ReasonMalformed, "reserved bytes %#02x %#02x, must be zero", tr[6], tr[7])
	}
	if want := TrailerHeaderSize + t.MACLen; len(tr) != want {
		return Trailer{}, nil, drop(ReasonMalformed, "trailer of %d bytes, its header says %d", len(tr), want)
	}
	return t, tr[TrailerHeaderSize:], nil
}

// packetEnd is where the packet ends by its own framing, or -1 where the
// framing gives no end (a datagram too short to say, a version that is
// neither TSP nor the extension framing).
func packetEnd(d []byte) int {
	if len(d) < 2 {
		return -1
	}
	switch v := d[1]; {
	case v <= 1:
		return tspPacketSize
	case v == tspVersionExt && len(d) >= tspExtHeaderSize:
		return tspExtHeaderSize + int(d[6]) + int(binary.BigEndian.Uint16(d[4:6]))
	}
	return -1
}

// Split cuts a datagram into the packet and the trailer after it, by the
// packet's own framing: a version 0 or 1 packet is 268 bytes (what we
// send; BSD's receiver reads no further), an extension packet (version 2)
// ends at 8 + name length + payload length. Whatever follows is the
// trailer. A datagram that ends where its packet ends, or earlier, or
// whose framing is unknown, has no trailer: trailer is nil and packet is
// the whole datagram. Bytes after the packet that are not a well-formed
// trailer (magic, version, MAC length, exact length) are an error (a
// *DropError, ReasonMalformed). packet and trailer share d's memory.
func Split(d []byte) (packet, trailer []byte, err error) {
	end := packetEnd(d)
	if end < 0 || len(d) <= end {
		return d, nil, nil
	}
	if _, _, err := ParseTrailer(d[end:]); err != nil {
		return d, nil, err
	}
	return d[:end], d[end:], nil
}

// ErrFraming is wrapped by Sign's error for a packet that does not end
// where its framing says, so that a receiver could not find the trailer.
var ErrFraming = errors.New("packet does not end where its framing says")

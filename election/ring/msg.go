package ring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Kind is a message type. One numbering serves every algorithm so a
// daemon can carry any of them in a tsp.ExtRing payload; numbers are never
// reused.
type Kind uint8

// Message kinds.
const (
	KElect     Kind = 1  // an id on its way round (LeLann, Chang–Roberts, Franklin, Peterson, vLT, Vitányi M_i)
	KProbe     Kind = 2  // Hirschberg–Sinclair probe: ID, Phase, Hops
	KReply     Kind = 3  // Hirschberg–Sinclair reply: ID, Phase
	KLeader    Kind = 4  // announcement: ID is the leader
	KWakeup    Kind = 5  // Vitányi wakeup (no fields)
	KSleepwell Kind = 6  // Vitányi sleepwell; vLT ID-register flag (no fields)
	KToken     Kind = 7  // time-slice token: ID
	KCapture   Kind = 8  // Afek–Gafni candidate → ordinary: (Phase=level, ID)
	KAck       Kind = 9  // Afek–Gafni synchronous ack (no fields)
	KOwner     Kind = 10 // Afek–Gafni asynchronous ordinary → candidate: (level, id)
	KPeterson2 Kind = 11 // Peterson's second message of a round: ID
	maxKind         = 15
)

var kindNames = [...]string{"", "ELECT", "PROBE", "REPLY", "LEADER", "WAKEUP", "SLEEPWELL", "TOKEN", "CAPTURE", "ACK", "OWNER", "PETERSON2"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("KIND(%d)", uint8(k))
}

// Msg is every algorithm's message. Unused fields are zero and cost nothing
// on the wire.
type Msg struct {
	Kind  Kind
	ID    uint64
	Phase uint32 // phase, round or level
	Hops  uint32 // hop count (Hirschberg–Sinclair)
	Q     bool   // van Leeuwen–Tan's q bit: set for the first hop of an active node's message
}

func (m Msg) String() string {
	if m.ID == 0 && m.Phase == 0 && m.Hops == 0 && !m.Q {
		return m.Kind.String()
	}
	s := fmt.Sprintf("%v<%d", m.Kind, m.ID)
	if m.Phase != 0 || m.Hops != 0 {
		s += fmt.Sprintf(",p%d", m.Phase)
	}
	if m.Hops != 0 {
		s += fmt.Sprintf(",h%d", m.Hops)
	}
	if m.Q {
		s += ",q"
	}
	return s + ">"
}

// Wire format, compact because the benchmark counts its bits:
//
//	byte 0: bits 0–3 kind, bit 4 ID present, bit 5 Phase present,
//	        bit 6 Hops present, bit 7 q
//	then uvarint ID, uvarint Phase, uvarint Hops, each only if present.
//
// A field is present exactly when it is non-zero and every varint is
// minimal, so each message has one encoding and Unmarshal∘Marshal is the
// identity.
const (
	flagID    = 1 << 4
	flagPhase = 1 << 5
	flagHops  = 1 << 6
	flagQ     = 1 << 7
)

// Decoding errors.
var (
	ErrShort     = errors.New("ring message truncated")
	ErrBadKind   = errors.New("ring message kind unknown")
	ErrVarint    = errors.New("ring message varint malformed or not minimal")
	ErrTrailing  = errors.New("ring message has trailing bytes")
	ErrOverflow  = errors.New("ring message field out of range")
	ErrZeroField = errors.New("ring message field flagged present but zero")
)

// Marshal encodes m; it appends nothing for zero fields.
func (m Msg) Marshal() []byte {
	b := make([]byte, 1, 1+3*binary.MaxVarintLen64)
	b[0] = byte(m.Kind) & 0x0f
	if m.ID != 0 {
		b[0] |= flagID
		b = binary.AppendUvarint(b, m.ID)
	}
	if m.Phase != 0 {
		b[0] |= flagPhase
		b = binary.AppendUvarint(b, uint64(m.Phase))
	}
	if m.Hops != 0 {
		b[0] |= flagHops
		b = binary.AppendUvarint(b, uint64(m.Hops))
	}
	if m.Q {
		b[0] |= flagQ
	}
	return b
}

// Bits is the size of m's encoding in bits, what the benchmark counts.
func (m Msg) Bits() int {
	n := 1
	for _, v := range [...]uint64{m.ID, uint64(m.Phase), uint64(m.Hops)} {
		if v != 0 {
			n += uvarintLen(v)
		}
	}
	return 8 * n
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// Unmarshal decodes one message that fills b exactly.
func Unmarshal(b []byte) (Msg, error) {
	if len(b) == 0 {
		return Msg{}, ErrShort
	}
	m := Msg{Kind: Kind(b[0] & 0x0f), Q: b[0]&flagQ != 0}
	if m.Kind == 0 || m.Kind > maxKind || int(m.Kind) >= len(kindNames) {
		return Msg{}, fmt.Errorf("%w: %d", ErrBadKind, b[0]&0x0f)
	}
	rest := b[1:]
	field := func(flag byte, limit uint64) (uint64, error) {
		if b[0]&flag == 0 {
			return 0, nil
		}
		v, n := binary.Uvarint(rest)
		switch {
		case n == 0:
			return 0, ErrShort
		case n < 0 || n != uvarintLen(v):
			return 0, ErrVarint
		case v == 0:
			return 0, ErrZeroField
		case v > limit:
			return 0, ErrOverflow
		}
		rest = rest[n:]
		return v, nil
	}
	var err error
	if m.ID, err = field(flagID, math.MaxUint64); err != nil {
		return Msg{}, err
	}
	ph, err := field(flagPhase, math.MaxUint32)
	if err != nil {
		return Msg{}, err
	}
	hp, err := field(flagHops, math.MaxUint32)
	if err != nil {
		return Msg{}, err
	}
	m.Phase, m.Hops = uint32(ph), uint32(hp)
	if len(rest) != 0 {
		return Msg{}, ErrTrailing
	}
	return m, nil
}

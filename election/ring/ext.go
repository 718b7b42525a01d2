package ring

import (
	"errors"
	"fmt"

	"github.com/timed-project/timed/tsp"
)

// ErrNotRing is returned by FromExt for an extension packet of another kind.
var ErrNotRing = errors.New("extension packet is not a ring message")

// ToExt wraps m for the wire: a version-2 extension packet of kind
// tsp.ExtRing from host name, which BSD daemons drop unread.
func ToExt(m Msg, name string, seq uint16) tsp.ExtPacket {
	return tsp.ExtPacket{Kind: tsp.ExtRing, Seq: seq, Name: name, Payload: m.Marshal()}
}

// FromExt unwraps a ring message from an extension packet.
func FromExt(p tsp.ExtPacket) (Msg, error) {
	if p.Kind != tsp.ExtRing {
		return Msg{}, fmt.Errorf("%w: %v", ErrNotRing, p.Kind)
	}
	return Unmarshal(p.Payload)
}

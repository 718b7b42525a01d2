package live

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/timed-project/timed/election/ring"
	"github.com/timed-project/timed/tsp"
)

// Ctl is the payload (JSON) of a tsp.ExtRingCtl packet, between timedc and
// the coordinating daemon (elect, result) and among the daemons (hello,
// here, start, collect, report). timedc and the daemons share this type so
// the JSON cannot drift between them.
type Ctl struct {
	Op        string        `json:"op"`
	Algorithm string        `json:"alg,omitempty"`
	Unit      time.Duration `json:"unit,omitempty"` // bound on a link delay; a tick is two
	Members   []Member      `json:"members,omitempty"`
	T0        int64         `json:"t0,omitempty"` // start, network clock, Unix ns
	Report    *Report       `json:"report,omitempty"`
	Result    *Result       `json:"result,omitempty"`
}

// Ring control operations.
const (
	OpElect   = "elect"   // timedc → coordinator
	OpHello   = "hello"   // coordinator → all: who is there?
	OpHere    = "here"    // member → coordinator
	OpStart   = "start"   // coordinator → members
	OpCollect = "collect" // coordinator → members: your counts, please
	OpReport  = "report"  // member → coordinator
	OpResult  = "result"  // coordinator → timedc
)

// Member is one daemon of a ring election.
type Member struct {
	Name string `json:"name"`
	Addr string `json:"address,omitempty"`
	ID   uint64 `json:"id"`
}

// Report is one node's counts and decision.
type Report struct {
	Index    int    `json:"i"`
	Sent     int    `json:"sent"`
	Bits     int    `json:"bits"`
	Decided  bool   `json:"decided"`
	Elected  bool   `json:"elected"`
	Leader   uint64 `json:"leader"`
	LastSend int64  `json:"last_send"` // network clock, Unix ns; 0 if none
	Final    bool   `json:"final"`     // answer to COLLECT
}

// Result is the outcome of a ring election run live among the daemons
// (`timedc ring elect`). Bits are those of the ring messages' encoding
// (payloads, without the extension header).
type Result struct {
	Algorithm string  `json:"algorithm"`
	N         int     `json:"n"`
	Leader    string  `json:"leader"`
	LeaderID  uint64  `json:"leader_id"`
	Messages  int     `json:"messages"`
	Bits      int     `json:"bits"`
	Seconds   float64 `json:"elapsed_seconds"`
	Bound     float64 `json:"bound"`
	BoundText string  `json:"bound_text"`
	// Members are the daemons in ring order, with the ids they ran with.
	Members []Member `json:"members"`
	Error   string   `json:"error,omitempty"`
}

// ElectPacket is timedc's request to the daemon it asks to coordinate: an
// election of algorithm (unit 0: DefaultUnit), from host name, whose
// result will echo seq.
func ElectPacket(name string, seq uint16, algorithm string, unit time.Duration) (tsp.ExtPacket, error) {
	return ctlPacket(name, seq, Ctl{Op: OpElect, Algorithm: algorithm, Unit: unit})
}

// ResultOf is the result an extension packet carries in answer to the
// ELECT sent with seq; ok is false for any other packet.
func ResultOf(p tsp.ExtPacket, seq uint16) (res *Result, ok bool) {
	if p.Kind != tsp.ExtRingCtl || p.Seq != seq {
		return nil, false
	}
	var c Ctl
	if err := json.Unmarshal(p.Payload, &c); err != nil || c.Op != OpResult || c.Result == nil {
		return nil, false
	}
	return c.Result, true
}

func ctlPacket(name string, seq uint16, c Ctl) (tsp.ExtPacket, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return tsp.ExtPacket{}, fmt.Errorf("encode ring control %s: %w", c.Op, err)
	}
	return tsp.ExtPacket{Kind: tsp.ExtRingCtl, Seq: seq, Name: name, Payload: b}, nil
}

// A ring message's payload: the sender's index and out-port (so the
// receiver knows the port it arrived on, even on a ring of two), a counter
// per destination (so the receiver keeps the link FIFO even if UDP
// reorders), the send time since T0 (so it is read at send + unit, as in
// the simulator), each a uvarint, then the message (ring.Msg's encoding).
type header struct {
	from  int
	out   ring.Port
	count uint64
	sent  time.Duration
}

var (
	errTruncated   = errors.New("truncated header")
	errOutOfRange  = errors.New("out of range")
	errNotDistinct = errors.New("names and ids must be distinct, ids ≥ 1")
	errNotMember   = errors.New("not a member")
)

func appendMsg(b []byte, h header, m ring.Msg) []byte {
	b = binary.AppendUvarint(b, uint64(h.from))
	b = binary.AppendUvarint(b, uint64(h.out))
	b = binary.AppendUvarint(b, h.count)
	b = binary.AppendUvarint(b, uint64(h.sent))
	return append(b, m.Marshal()...)
}

// parseMsg decodes a ring message's payload. The ranges it checks are the
// encoding's; the sender and port are for the node to check.
func parseMsg(b []byte) (header, ring.Msg, error) {
	var f [4]uint64
	for i := range f {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return header{}, ring.Msg{}, fmt.Errorf("ring message: %w", errTruncated)
		}
		f[i], b = v, b[n:]
	}
	if f[0] > math.MaxInt32 || f[1] > math.MaxUint32 || f[3] > math.MaxInt64 {
		return header{}, ring.Msg{}, fmt.Errorf("ring message header %v: %w", f, errOutOfRange)
	}
	m, err := ring.Unmarshal(b)
	if err != nil {
		return header{}, ring.Msg{}, fmt.Errorf("ring message: %w", err)
	}
	return header{from: int(f[0]), out: ring.Port(f[1]), count: f[2], sent: time.Duration(f[3])}, m, nil
}

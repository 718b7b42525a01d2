package clocksync

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/timed-project/timed/tsp"
)

// Probe payload, carried in tsp.ExtProbe (request) and tsp.ExtProbeReply
// (reply) extension packets:
//
//	0 format (1) | 1..7 zero | 8..15 t1 | 16..23 t2 | 24..31 t3
//
// Each t is nanoseconds since the Unix epoch, big-endian signed 64-bit, on the
// clock of the host that took it: t1 the client's send time, echoed by the
// responder; t2 the responder's receive time; t3 its send time. A request
// carries t1 and zeros. Bytes past 32 are ignored, so later formats can add
// fields.
type ProbePayload struct {
	T1, T2, T3 int64
}

const (
	probeFormat      = 1
	probePayloadSize = 32
)

// ErrProbePayload: the probe payload could not be decoded.
var ErrProbePayload = errors.New("bad probe payload")

// Marshal encodes the payload.
func (p ProbePayload) Marshal() []byte {
	b := make([]byte, probePayloadSize)
	b[0] = probeFormat
	binary.BigEndian.PutUint64(b[8:], uint64(p.T1))
	binary.BigEndian.PutUint64(b[16:], uint64(p.T2))
	binary.BigEndian.PutUint64(b[24:], uint64(p.T3))
	return b
}

// UnmarshalProbe decodes a probe payload.
func UnmarshalProbe(b []byte) (ProbePayload, error) {
	if len(b) < probePayloadSize {
		return ProbePayload{}, fmt.Errorf("%w: %d bytes, need %d", ErrProbePayload, len(b), probePayloadSize)
	}
	if b[0] != probeFormat {
		return ProbePayload{}, fmt.Errorf("%w: format %d, know %d", ErrProbePayload, b[0], probeFormat)
	}
	return ProbePayload{
		T1: int64(binary.BigEndian.Uint64(b[8:])),
		T2: int64(binary.BigEndian.Uint64(b[16:])),
		T3: int64(binary.BigEndian.Uint64(b[24:])),
	}, nil
}

// Datagram is one received extension packet.
type Datagram struct {
	Packet tsp.ExtPacket
	From   netip.AddrPort
	// Waited is how long ago the datagram reached the host, as told by the
	// kernel's receive timestamp (SO_TIMESTAMPNS), when ReadExt returned it;
	// 0 if unknown. Stamps are taken as clock.Now() − Waited, so the time a
	// packet spent in socket buffers and scheduling does not count.
	Waited time.Duration
}

// PacketSender sends extension packets; the TSP transport is one.
type PacketSender interface {
	WriteExt(p tsp.ExtPacket, to netip.AddrPort) error
}

// PacketConn sends and receives extension packets: the small part of a
// transport the probe needs. UDPConn is one over a UDP socket; the
// simulator has its own.
type PacketConn interface {
	PacketSender
	// ReadExt returns the next extension datagram, or an error when ctx is
	// done or the connection is closed.
	ReadExt(ctx context.Context) (Datagram, error)
}

// ProbeConfig tunes a ProbeClient.
type ProbeConfig struct {
	Replies int           // replies wanted per host (default 12)
	Trials  int           // probes sent at most per host (default 2 × Replies, as BSD's 5 of 10)
	Wait    time.Duration // wait for each reply before the next probe (default 100 ms, BSD's wmsec)
}

// withDefaults fills unset fields; replies is the measurer's default
// reply count (12 for the probe, BSD's 5 for ICMP).
func (c ProbeConfig) withDefaults(replies int) ProbeConfig {
	if c.Replies <= 0 {
		c.Replies = replies
	}
	if c.Trials < c.Replies {
		c.Trials = 2 * c.Replies
	}
	if c.Wait <= 0 {
		c.Wait = 100 * time.Millisecond
	}
	return c
}

// ProbeClient measures remote daemons with probes. It implements Measurer;
// replies reach it through Deliver, from whoever reads the connection
// (Serve, or the daemon's transport). It is safe for concurrent use, so
// MeasureAll can measure many hosts at once.
type ProbeClient struct {
	send  PacketSender
	clock Clock
	name  string
	cfg   ProbeConfig

	mu      sync.Mutex
	seq     uint16
	waiting map[uint16]*pendingProbe
}

type pendingProbe struct {
	host netip.AddrPort
	t1   time.Time
	ch   chan Sample // buffered 1
}

// NewProbeClient returns a client sending through send, stamping with clock
// and naming itself name in the packets.
func NewProbeClient(send PacketSender, clock Clock, name string, cfg ProbeConfig) *ProbeClient {
	return &ProbeClient{send: send, clock: clock, name: tsp.TruncateName(name), cfg: cfg.withDefaults(12), waiting: map[uint16]*pendingProbe{}}
}

// sameHost compares addresses with IPv4-mapped forms unmapped.
func sameHost(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

// Measure probes host until it has Replies replies or has sent Trials
// probes, one at a time, and returns the minimum-RTT sample's measurement.
func (c *ProbeClient) Measure(ctx context.Context, host netip.AddrPort) (Measurement, error) {
	var samples []Sample
	sent := 0
	timer := time.NewTimer(c.cfg.Wait)
	defer timer.Stop()
	for sent < c.cfg.Trials && len(samples) < c.cfg.Replies {
		if ctx.Err() != nil {
			break
		}
		p := &pendingProbe{host: host, ch: make(chan Sample, 1)}
		c.mu.Lock()
		c.seq++
		seq := c.seq
		c.waiting[seq] = p
		p.t1 = c.clock.Now()
		c.mu.Unlock()
		pkt := tsp.ExtPacket{Kind: tsp.ExtProbe, Seq: seq, Name: c.name, Payload: ProbePayload{T1: p.t1.UnixNano()}.Marshal()}
		err := c.send.WriteExt(pkt, host)
		sent++
		if err == nil {
			timer.Reset(c.cfg.Wait)
			select {
			case s := <-p.ch:
				samples = append(samples, s)
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		c.mu.Lock()
		delete(c.waiting, seq)
		c.mu.Unlock()
		if err != nil {
			return Measurement{Sent: sent}, fmt.Errorf("probe %v: %w", host, err)
		}
	}
	m, err := BestSample(samples, sent)
	if err != nil && ctx.Err() != nil && len(samples) == 0 {
		err = fmt.Errorf("%w: %w", err, ctx.Err())
	}
	return m, err
}

// Deliver hands the client a received datagram. It reports whether the
// datagram was a reply the client was waiting for.
func (c *ProbeClient) Deliver(d Datagram) bool {
	if d.Packet.Kind != tsp.ExtProbeReply {
		return false
	}
	t4 := c.clock.Now().Add(-d.Waited)
	pl, err := UnmarshalProbe(d.Packet.Payload)
	if err != nil {
		return false
	}
	c.mu.Lock()
	p, ok := c.waiting[d.Packet.Seq]
	if ok && sameHost(p.host, d.From) && pl.T1 == p.t1.UnixNano() {
		delete(c.waiting, d.Packet.Seq)
	} else {
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return false
	}
	p.ch <- Sample{T1: p.t1, T2: time.Unix(0, pl.T2), T3: time.Unix(0, pl.T3), T4: t4}
	return true
}

// ProbeResponder answers probes with its clock's timestamps.
type ProbeResponder struct {
	clock Clock
	name  string
}

// NewProbeResponder returns a responder stamping with clock.
func NewProbeResponder(clock Clock, name string) *ProbeResponder {
	return &ProbeResponder{clock: clock, name: tsp.TruncateName(name)}
}

// Reply builds the reply to a probe: t2 is the arrival (clock.Now() − the
// datagram's Waited), t3 is taken last, just before the packet is encoded.
func (r *ProbeResponder) Reply(d Datagram) (tsp.ExtPacket, error) {
	t2 := r.clock.Now().Add(-d.Waited)
	if d.Packet.Kind != tsp.ExtProbe {
		return tsp.ExtPacket{}, fmt.Errorf("%w: %v is not a probe", ErrProbePayload, d.Packet.Kind)
	}
	req, err := UnmarshalProbe(d.Packet.Payload)
	if err != nil {
		return tsp.ExtPacket{}, err
	}
	pl := ProbePayload{T1: req.T1, T2: t2.UnixNano()}
	pl.T3 = r.clock.Now().UnixNano()
	return tsp.ExtPacket{Kind: tsp.ExtProbeReply, Seq: d.Packet.Seq, Name: r.name, Payload: pl.Marshal()}, nil
}

// Serve reads conn until ctx is done, answering probes with responder (if
// not nil), handing replies to client (if not nil) and every other
// datagram to other (if not nil). It returns the error that stopped it.
func Serve(ctx context.Context, conn PacketConn, client *ProbeClient, responder *ProbeResponder, other func(Datagram)) error {
	for {
		d, err := conn.ReadExt(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		switch {
		case d.Packet.Kind == tsp.ExtProbe && responder != nil:
			if rep, err := responder.Reply(d); err == nil {
				_ = conn.WriteExt(rep, d.From) // a lost reply is a lost probe
			}
		case d.Packet.Kind == tsp.ExtProbeReply && client != nil:
			client.Deliver(d)
		case other != nil:
			other(d)
		}
	}
}

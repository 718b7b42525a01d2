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
//	0 layout (1) | 1 format | 2 flags | 3 zero | 4..5 prev seq | 6..7 zero
//	8..15 t1 | 16..23 t2 | 24..31 t3 | 32..39 prev t3 (format 2)
//
// Each t is nanoseconds since the Unix epoch, big-endian signed 64-bit, on the
// clock of the host that took it: t1 the client's send time, echoed by the
// responder; t2 the responder's receive time; t3 its send time. A request
// carries t1 and zeros.
//
// Format 1 is the first 32 bytes, bytes 1..7 zero. Format 2 (byte 1 = 2)
// adds chrony's interleaving as a follow-up field: t3 is read before the
// write, so a responder that got the kernel's transmit timestamp of its
// reply sends it in its next reply to the same client, as prev t3 with
// the reply's seq (flag 1). A format-2 request asks for it. A peer that
// knows only format 1 reads byte 0 and the first 32 bytes and ignores the
// rest, so both formats interwork: it answers in format 1, and its format-1
// requests get format-1 replies. Bytes past those known are ignored, so
// later formats can add fields.
type ProbePayload struct {
	Format     uint8 // 1 or 2 (Marshal: 0 means 1)
	T1, T2, T3 int64
	// HasPrev: PrevT3 is the kernel's transmit time of the responder's
	// reply to the client's probe PrevSeq (format 2 replies).
	HasPrev bool
	PrevSeq uint16
	PrevT3  int64
}

const (
	probeLayout       = 1
	probeFormat2      = 2
	probeFlagPrev     = 1
	probePayloadSize  = 32
	probePayload2Size = 40
)

// ErrProbePayload: the probe payload could not be decoded.
var ErrProbePayload = errors.New("bad probe payload")

// Marshal encodes the payload.
func (p ProbePayload) Marshal() []byte {
	size := probePayloadSize
	if p.Format >= probeFormat2 {
		size = probePayload2Size
	}
	b := make([]byte, size)
	b[0] = probeLayout
	binary.BigEndian.PutUint64(b[8:], uint64(p.T1))
	binary.BigEndian.PutUint64(b[16:], uint64(p.T2))
	binary.BigEndian.PutUint64(b[24:], uint64(p.T3))
	if size == probePayload2Size {
		b[1] = probeFormat2
		if p.HasPrev {
			b[2] = probeFlagPrev
			binary.BigEndian.PutUint16(b[4:], p.PrevSeq)
			binary.BigEndian.PutUint64(b[32:], uint64(p.PrevT3))
		}
	}
	return b
}

// UnmarshalProbe decodes a probe payload of either format. A payload
// that claims format 2 or later but is too short for it is read as
// format 1.
func UnmarshalProbe(b []byte) (ProbePayload, error) {
	if len(b) < probePayloadSize {
		return ProbePayload{}, fmt.Errorf("%w: %d bytes, need %d", ErrProbePayload, len(b), probePayloadSize)
	}
	if b[0] != probeLayout {
		return ProbePayload{}, fmt.Errorf("%w: format %d, know %d", ErrProbePayload, b[0], probeLayout)
	}
	p := ProbePayload{
		Format: 1,
		T1:     int64(binary.BigEndian.Uint64(b[8:])),
		T2:     int64(binary.BigEndian.Uint64(b[16:])),
		T3:     int64(binary.BigEndian.Uint64(b[24:])),
	}
	if b[1] >= probeFormat2 && len(b) >= probePayload2Size {
		p.Format = probeFormat2
		if b[2]&probeFlagPrev != 0 {
			p.HasPrev = true
			p.PrevSeq = binary.BigEndian.Uint16(b[4:])
			p.PrevT3 = int64(binary.BigEndian.Uint64(b[32:]))
		}
	}
	return p, nil
}

// Datagram is one received extension packet.
type Datagram struct {
	Packet tsp.ExtPacket
	From   netip.AddrPort
	// At is the kernel's receive timestamp (SO_TIMESTAMPNS, real time),
	// zero if unknown. It is put on the clock where it is used, the clock
	// read right before the real time (onClock): a wait computed when the
	// datagram was read would count whatever came between the read and
	// the use, which under CPU contention (a preemption) is milliseconds,
	// and would land whole in the offset.
	At time.Time
	// Waited serves where only a wait is known (a simulator): how long
	// ago the datagram reached the host when it was handed over, the
	// stamp being clock.Now() − Waited. Ignored when At is set.
	Waited time.Duration
}

// maxArrivalAge bounds how old a kernel receive stamp is believed: an
// older one is a clock set in between, and the datagram is stamped now.
const maxArrivalAge = time.Second

// arrival is when d reached the host, on clock.
func (d Datagram) arrival(clock Clock, realNow func() time.Time) time.Time {
	if d.At.IsZero() {
		return clock.Now().Add(-d.Waited)
	}
	t, age := onClock(clock, realNow, d.At)
	if age < 0 || age >= maxArrivalAge {
		return clock.Now()
	}
	return t
}

// pairedClock reads itself together with the real time its reading is
// of, from one read of its source: a real-time stamp is then put on it
// with nothing between the two reads (SimClock; its source is the real
// time of its world, the host's or a simulator's).
type pairedClock interface {
	nowWithSource() (clock, source time.Time)
}

// onClock puts the real-time instant at on clock: the clock is read,
// then real time at once (both from one read where the clock can), and
// at is taken back by their difference. It also returns how long ago at
// was.
func onClock(clock Clock, realNow func() time.Time, at time.Time) (time.Time, time.Duration) {
	if pc, ok := clock.(pairedClock); ok {
		c, src := pc.nowWithSource()
		age := src.Sub(at)
		return c.Add(-age), age
	}
	c := clock.Now()
	if realNow == nil {
		realNow = time.Now
	}
	age := realNow().Sub(at)
	return c.Add(-age), age
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

// StampedSender is a PacketSender that can tell when the kernel sent a
// packet: UDPConn and the daemon's transport on Linux.
type StampedSender interface {
	PacketSender
	// WriteExtStamped sends p like WriteExt and returns the kernel's
	// software transmit timestamp (real time), ok false when it gave none.
	WriteExtStamped(p tsp.ExtPacket, to netip.AddrPort) (sent time.Time, ok bool, err error)
}

// sendStamped writes p; user is the clock's reading just before. It
// returns the send time on clock: the kernel's transmit timestamp where
// there is one (converted as Datagram.Waited is, the clock read before the
// real time so the result errs early, as a send stamp may), else user.
func sendStamped(send PacketSender, clock Clock, realNow func() time.Time, p tsp.ExtPacket, to netip.AddrPort, user time.Time) (time.Time, bool, error) {
	ss, ok := send.(StampedSender)
	if !ok {
		return user, false, send.WriteExt(p, to)
	}
	at, ok, err := ss.WriteExtStamped(p, to)
	if err != nil || !ok {
		return user, false, err
	}
	k, _ := onClock(clock, realNow, at)
	// Both are no later than the departure; the later is the closer. A
	// kernel time before the reading means the clock was set in between.
	if k.Before(user) || k.Sub(user) > maxSendLag {
		return user, false, nil
	}
	return k, true, nil
}

// maxSendLag bounds how long after the user-space reading a kernel send
// stamp is believed (a longer gap is a clock set in between).
const maxSendLag = 100 * time.Millisecond

// ProbeConfig tunes a ProbeClient.
type ProbeConfig struct {
	// Replies is the most replies wanted per host (default
	// DefaultMaxReplies); MinReplies the fewest (default
	// DefaultMinReplies). In between, the client stops once the minimum
	// RTT has settled (SampleSet.Enough).
	Replies, MinReplies int
	Trials              int           // probes sent at most per host (default 2 × Replies, as BSD's 5 of 10)
	Wait                time.Duration // wait for each reply before the next probe (default 100 ms, BSD's wmsec)
	// History is where the adaptive count reads each host's floor (the
	// least RTT of its recent rounds). A daemon gives the one its sync
	// rounds record (RTTHistory.JudgeRound), so that a round trip is
	// recorded once; nil: the client keeps its own and records each
	// measurement in it.
	History *RTTHistory
}

// withDefaults fills unset fields; replies is the measurer's default
// reply count (DefaultMaxReplies for the probe, BSD's 5 for ICMP).
func (c ProbeConfig) withDefaults(replies int) ProbeConfig {
	if c.Replies <= 0 {
		c.Replies = replies
	}
	if c.MinReplies <= 0 {
		c.MinReplies = DefaultMinReplies
	}
	c.MinReplies = min(c.MinReplies, c.Replies)
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
	send    PacketSender
	clock   Clock
	name    string
	cfg     ProbeConfig
	history *RTTHistory      // each host's recent best RTTs: the filter's floor
	records bool             // the history is the client's own: it records each measurement
	realNow func() time.Time // the kernel's clock (nil: time.Now); tests set virtual time

	mu      sync.Mutex
	seq     uint16
	waiting map[uint16]*pendingProbe
}

type pendingProbe struct {
	host netip.AddrPort
	t1   time.Time  // the reading sent in the probe, which the reply echoes
	ch   chan reply // buffered 1
}

// reply is a reply's sample (t1 the user-space reading) and its follow-up
// field.
type reply struct {
	s       Sample
	hasPrev bool
	prevSeq uint16
	prevT3  time.Time
}

// NewProbeClient returns a client sending through send, stamping with clock
// and naming itself name in the packets.
func NewProbeClient(send PacketSender, clock Clock, name string, cfg ProbeConfig) *ProbeClient {
	c := &ProbeClient{send: send, clock: clock, name: tsp.TruncateName(name), cfg: cfg.withDefaults(DefaultMaxReplies),
		history: cfg.History, waiting: map[uint16]*pendingProbe{}}
	if c.history == nil {
		c.history, c.records = NewRTTHistory(0), true
	}
	return c
}

// sameHost compares addresses with IPv4-mapped forms unmapped.
func sameHost(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

// Measure probes host one probe at a time until the samples are enough
// (SampleSet.Enough: between MinReplies and Replies replies, fewer on a
// steady path) or Trials probes have gone, and returns their combined
// measurement. Each send time is the kernel's where it tells, and a
// responder's reply carries the kernel's send time of its previous reply,
// which replaces the previous sample's t3.
func (c *ProbeClient) Measure(ctx context.Context, host netip.AddrPort) (Measurement, error) {
	set := SampleSet{Floor: c.history.Floor(host.String()), MinReplies: c.cfg.MinReplies, MaxReplies: c.cfg.Replies}
	seqs := make([]uint16, 0, c.cfg.Replies)
	sent := 0
	timer := time.NewTimer(c.cfg.Wait)
	defer timer.Stop()
	for sent < c.cfg.Trials && !set.Enough() {
		if ctx.Err() != nil {
			break
		}
		p := &pendingProbe{host: host, ch: make(chan reply, 1)}
		c.mu.Lock()
		c.seq++
		seq := c.seq
		c.waiting[seq] = p
		p.t1 = c.clock.Now()
		c.mu.Unlock()
		pkt := tsp.ExtPacket{Kind: tsp.ExtProbe, Seq: seq, Name: c.name, Payload: ProbePayload{Format: probeFormat2, T1: p.t1.UnixNano()}.Marshal()}
		t1, kernel, err := sendStamped(c.send, c.clock, c.realNow, pkt, host, p.t1)
		sent++
		if err == nil {
			timer.Reset(c.cfg.Wait)
			select {
			case r := <-p.ch:
				r.s.T1, r.s.KernelT1 = t1, kernel
				interleave(&set, seqs, r)
				set.Add(r.s)
				seqs = append(seqs, seq)
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
	m, err := set.Measurement(sent)
	if err == nil && c.records {
		c.history.Observe(host.String(), m.RTT)
	}
	if err != nil && ctx.Err() != nil && len(set.Samples()) == 0 {
		err = fmt.Errorf("%w: %w", err, ctx.Err())
	}
	return m, err
}

// interleave puts a reply's follow-up field, the kernel's send time of the
// responder's previous reply, into that reply's sample: the later of the
// two t3 (both precede the departure), if it is within maxSendLag.
func interleave(set *SampleSet, seqs []uint16, r reply) {
	if !r.hasPrev {
		return
	}
	for i, q := range seqs {
		if q != r.prevSeq {
			continue
		}
		x := set.Samples()[i]
		if lag := r.prevT3.Sub(x.T3); lag >= 0 && lag <= maxSendLag {
			x.T3, x.KernelT3 = r.prevT3, true
			set.Update(i, x)
		}
		return
	}
}

// Deliver hands the client a received datagram. It reports whether the
// datagram was a reply the client was waiting for.
func (c *ProbeClient) Deliver(d Datagram) bool {
	if d.Packet.Kind != tsp.ExtProbeReply {
		return false
	}
	t4 := d.arrival(c.clock, c.realNow)
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
	p.ch <- reply{
		s:       Sample{T1: p.t1, T2: time.Unix(0, pl.T2), T3: time.Unix(0, pl.T3), T4: t4},
		hasPrev: pl.HasPrev, prevSeq: pl.PrevSeq, prevT3: time.Unix(0, pl.PrevT3),
	}
	return true
}

// ProbeResponder answers probes with its clock's timestamps. It remembers,
// for each client, the kernel's send time of its last reply, to send it
// in the next (format 2). Safe for concurrent use.
type ProbeResponder struct {
	clock   Clock
	name    string
	realNow func() time.Time // as ProbeClient's

	mu   sync.Mutex
	last map[netip.AddrPort]sentReply
}

type sentReply struct {
	seq uint16
	t3  time.Time
}

// maxResponderClients bounds the responder's memory; past it, it starts
// afresh (each client then misses one follow-up).
const maxResponderClients = 4096

// NewProbeResponder returns a responder stamping with clock.
func NewProbeResponder(clock Clock, name string) *ProbeResponder {
	return &ProbeResponder{clock: clock, name: tsp.TruncateName(name), last: map[netip.AddrPort]sentReply{}}
}

// Reply builds the reply to a probe: t2 is the arrival (the datagram's
// kernel stamp, on the clock), t3 is taken last, just before the packet is encoded.
// A format-2 probe gets a format-2 reply with the kernel's send time of
// the last reply to the same client, if Answer learnt it.
func (r *ProbeResponder) Reply(d Datagram) (tsp.ExtPacket, error) {
	rep, _, err := r.reply(d)
	return rep, err
}

// reply is Reply, also returning the reply's payload, which Answer needs
// (its t3 and format) without decoding what was just encoded.
func (r *ProbeResponder) reply(d Datagram) (tsp.ExtPacket, ProbePayload, error) {
	t2 := d.arrival(r.clock, r.realNow)
	if d.Packet.Kind != tsp.ExtProbe {
		return tsp.ExtPacket{}, ProbePayload{}, fmt.Errorf("%w: %v is not a probe", ErrProbePayload, d.Packet.Kind)
	}
	req, err := UnmarshalProbe(d.Packet.Payload)
	if err != nil {
		return tsp.ExtPacket{}, ProbePayload{}, err
	}
	pl := ProbePayload{Format: 1, T1: req.T1, T2: t2.UnixNano()}
	if req.Format >= probeFormat2 {
		pl.Format = probeFormat2
		r.mu.Lock()
		prev, ok := r.last[d.From]
		r.mu.Unlock()
		if ok {
			pl.HasPrev, pl.PrevSeq, pl.PrevT3 = true, prev.seq, prev.t3.UnixNano()
		}
	}
	pl.T3 = r.clock.Now().UnixNano()
	return tsp.ExtPacket{Kind: tsp.ExtProbeReply, Seq: d.Packet.Seq, Name: r.name, Payload: pl.Marshal()}, pl, nil
}

// Answer replies to the probe d through send, and remembers the kernel's
// send time of the reply, if send tells it, for the next reply to the
// same client.
func (r *ProbeResponder) Answer(d Datagram, send PacketSender) error {
	rep, pl, err := r.reply(d)
	if err != nil {
		return err
	}
	t3, kernel, err := sendStamped(send, r.clock, r.realNow, rep, d.From, time.Unix(0, pl.T3))
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !kernel || pl.Format < probeFormat2 {
		delete(r.last, d.From)
		return nil
	}
	if len(r.last) >= maxResponderClients {
		if _, ok := r.last[d.From]; !ok {
			clear(r.last)
		}
	}
	r.last[d.From] = sentReply{seq: rep.Seq, t3: t3}
	return nil
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
			_ = responder.Answer(d, conn) // a lost reply is a lost probe
		case d.Packet.Kind == tsp.ExtProbeReply && client != nil:
			client.Deliver(d)
		case other != nil:
			other(d)
		}
	}
}

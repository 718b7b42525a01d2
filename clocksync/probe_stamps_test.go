package clocksync

import (
	"bytes"
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/timed-project/timed/internal/vtime"
	"github.com/timed-project/timed/tsp"
)

// A probe written on a real loopback UDP socket gets the kernel's
// transmit timestamp, taken between the clock readings before the write
// and after it returned.
func TestUDPConnTxTimestampLoopback(t *testing.T) {
	a, b := loopbackPair(t)
	for i := range 20 {
		before := time.Now()
		at, ok, err := a.WriteExtStamped(tsp.ExtPacket{Kind: tsp.ExtProbe, Seq: uint16(i), Name: "a", Payload: ProbePayload{T1: 1}.Marshal()}, b.LocalAddr())
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("probe %d: no kernel transmit timestamp", i)
		}
		if at.Before(before) || at.After(after) {
			t.Fatalf("probe %d: stamp %v outside [%v, %v]", i, at, before, after)
		}
		d, err := b.ReadExt(context.Background())
		if err != nil || d.Packet.Seq != uint16(i) {
			t.Fatalf("read %+v, %v", d, err)
		}
	}
}

// Over real loopback sockets, both send times come from the kernel: the
// client's t1 at once, the responder's t3 in its next reply (format 2).
// The measurement says so, and the true offset is within its bound.
func TestProbeKernelStampsLoopback(t *testing.T) {
	src := NewMonotonicSource()
	slaveClock := NewSimClock(src, SimConfig{Offset: -80 * time.Millisecond})
	mc, sc := loopbackPair(t)
	client := NewProbeClient(mc, NewSimClock(src, SimConfig{}), "master", ProbeConfig{MinReplies: 3, Replies: 3})
	ctx := serveProbes(t, mc, sc, client, NewProbeResponder(slaveClock, "slave"))

	m, err := client.Measure(ctx, sc.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	if m.Stamps != StampsKernel || m.Samples != 3 || m.Sent != 3 {
		t.Fatalf("measurement %+v", m)
	}
	if d := absDur(m.Offset + 80*time.Millisecond); d > m.ErrorBound {
		t.Fatalf("offset %v is %v from −80ms, beyond the bound %v", m.Offset, d, m.ErrorBound)
	}
}

// stepPath is a synchronous network in virtual time: a write runs the
// responder after the next out delay and hands its reply to the client
// after the next back delay. A stamping path reports kernel transmit
// stamps lag after the clock reading (real time is the virtual time).
type stepPath struct {
	s         *vtime.Scheduler
	resp      *ProbeResponder
	client    *ProbeClient
	from      netip.AddrPort
	out, back []time.Duration
	n         int
	stamping  bool // the responder's sends get kernel stamps
	// clientStamping: the client's sends get kernel stamps too, lag
	// after its reading.
	clientStamping bool
	lag            time.Duration
	sent           []tsp.ExtPacket
}

func (p *stepPath) WriteExtStamped(pkt tsp.ExtPacket, to netip.AddrPort) (time.Time, bool, error) {
	at := p.s.Now().Add(p.lag)
	return at, p.clientStamping, p.WriteExt(pkt, to)
}

func (p *stepPath) WriteExt(pkt tsp.ExtPacket, to netip.AddrPort) error {
	p.sent = append(p.sent, pkt)
	i := p.n % len(p.out)
	p.n++
	p.s.RunFor(p.out[i])
	// The responder answers through a sender that loops back here.
	_ = p.resp.Answer(Datagram{Packet: pkt, From: p.from}, replyPath{p, to})
	return nil
}

type replyPath struct {
	p    *stepPath
	from netip.AddrPort
}

func (r replyPath) WriteExt(pkt tsp.ExtPacket, _ netip.AddrPort) error {
	r.p.sent = append(r.p.sent, pkt)
	r.p.s.RunFor(r.p.back[(r.p.n-1)%len(r.p.back)])
	r.p.client.Deliver(Datagram{Packet: pkt, From: r.from})
	return nil
}

func (r replyPath) WriteExtStamped(pkt tsp.ExtPacket, to netip.AddrPort) (time.Time, bool, error) {
	at := r.p.s.Now().Add(r.p.lag)
	return at, r.p.stamping, r.WriteExt(pkt, to)
}

// noStampSender says it can stamp, and never does.
type noStampSender struct{ *stepPath }

func (p noStampSender) WriteExtStamped(pkt tsp.ExtPacket, to netip.AddrPort) (time.Time, bool, error) {
	return time.Time{}, false, p.WriteExt(pkt, to)
}

func newStepPath(out, back []time.Duration, cfg ProbeConfig) (*stepPath, *SimClock) {
	s := vtime.New(vtime.Epoch)
	slave := NewSimClock(s, SimConfig{Offset: 5 * time.Millisecond})
	p := &stepPath{s: s, out: out, back: back, resp: NewProbeResponder(slave, "s"), from: netip.MustParseAddrPort("10.0.0.1:525")}
	p.client = NewProbeClient(p, NewSimClock(s, SimConfig{}), "m", cfg)
	p.client.realNow, p.resp.realNow = s.Now, s.Now
	return p, slave
}

var slaveAddr = netip.MustParseAddrPort("10.0.0.2:525")

func us(n ...int) []time.Duration {
	var d []time.Duration
	for _, x := range n {
		d = append(d, time.Duration(x)*time.Microsecond)
	}
	return d
}

// A steady path with stamps from user space: the minimum RTT does not
// move after the third reply, so the client stops there: three probes,
// three replies.
func TestAdaptiveStopsEarlyWhenStable(t *testing.T) {
	p, _ := newStepPath(us(50, 51, 50, 52), us(50, 50, 51, 50), ProbeConfig{})
	m, err := p.client.Measure(context.Background(), slaveAddr)
	if err != nil {
		t.Fatal(err)
	}
	if m.Sent != settledReplies || m.Samples != settledReplies || len(p.sent) != 2*settledReplies {
		t.Fatalf("sent %d probes for %d replies, %d packets: %+v", m.Sent, m.Samples, len(p.sent), m)
	}
	if d := absDur(m.Offset - 5*time.Millisecond); d > m.ErrorBound || m.ErrorBound > m.RTT {
		t.Fatalf("offset %v, bound %v, rtt %v", m.Offset, m.ErrorBound, m.RTT)
	}
	// The next round knows the path's floor: the same RTTs are as good
	// as it gets, and it stops as early; not earlier, with no exchange
	// stamped by the kernel at both ends.
	p.sent = nil
	if m, err := p.client.Measure(context.Background(), slaveAddr); err != nil || m.Sent != settledReplies {
		t.Fatalf("second round: %+v, %v", m, err)
	}
}

// With kernel stamps at both ends, a round that knows the path's floor
// stops after two replies when the first is at it: two probes, two
// replies, the first exchange's t3 the kernel's from the second reply. The first round,
// with no floor yet, takes three.
func TestAdaptiveTwoAtFloor(t *testing.T) {
	p, _ := newStepPath(us(50, 51, 50, 52), us(50, 50, 51, 50), ProbeConfig{})
	p.stamping, p.clientStamping, p.lag = true, true, 3*time.Microsecond
	m, err := p.client.Measure(context.Background(), slaveAddr)
	if err != nil || m.Sent != settledReplies {
		t.Fatalf("first round: %+v, %v", m, err)
	}
	p.sent = nil
	m, err = p.client.Measure(context.Background(), slaveAddr)
	if err != nil {
		t.Fatal(err)
	}
	if m.Sent != 2 || m.Samples != 2 || len(p.sent) != 4 {
		t.Fatalf("second round: sent %d probes for %d replies, %d packets: %+v", m.Sent, m.Samples, len(p.sent), m)
	}
	if d := absDur(m.Offset - 5*time.Millisecond); d > m.ErrorBound {
		t.Fatalf("offset %v, bound %v", m.Offset, m.ErrorBound)
	}
	// A first reply off the floor: the second's t3 is not the kernel's
	// yet, so a third probe; its reply brings the second's, at the floor.
	p.out, p.n, p.sent = us(400, 50, 50, 52), 0, nil
	if m, err := p.client.Measure(context.Background(), slaveAddr); err != nil || m.Sent != settledReplies {
		t.Fatalf("first reply off the floor: %+v, %v", m, err)
	}
}

// A noisy path: every reply lowers the minimum a lot, so the client keeps
// probing, up to Replies.
func TestAdaptiveContinuesWhenNoisy(t *testing.T) {
	p, _ := newStepPath(us(900, 700, 500, 350, 250, 150, 100, 60, 50), us(50), ProbeConfig{})
	m, err := p.client.Measure(context.Background(), slaveAddr)
	if err != nil {
		t.Fatal(err)
	}
	if m.Sent != DefaultMaxReplies || m.Samples != DefaultMaxReplies {
		t.Fatalf("sent %d for %d replies", m.Sent, m.Samples)
	}
	if m.RTT != 110*time.Microsecond {
		t.Fatalf("best RTT %v", m.RTT)
	}
	// Settled, but far above the floor this host showed before: more
	// probes, although the last one did not improve.
	p.out, p.n = us(600, 600, 600, 600, 600, 600, 600, 600), 0
	m, err = p.client.Measure(context.Background(), slaveAddr)
	if err != nil || m.Sent != DefaultMaxReplies {
		t.Fatalf("queueing path: %+v, %v", m, err)
	}
}

// The stop rule on its own: replies below MinReplies never suffice; two
// suffice only when one stamped by the kernel at both ends is at the
// floor (within 20 %, or 5 µs of a small one); from three, a best RTT near the floor suffices; a
// falling minimum does not.
func TestSampleSetEnough(t *testing.T) {
	t0 := time.Unix(1000, 0)
	sample := func(rtt int, kernel bool) Sample {
		r := time.Duration(rtt) * time.Microsecond
		return Sample{T1: t0, T2: t0.Add(r / 2), T3: t0.Add(r / 2), T4: t0.Add(r), KernelT1: kernel, KernelT3: kernel}
	}
	cases := []struct {
		name   string
		floor  int
		rtts   []int
		want   bool
		kernel bool
	}{
		{"too few", 0, []int{100, 100}, false, false},
		{"one", 90, []int{100}, false, true},
		{"two at the floor, kernel stamps", 90, []int{100, 95}, true, true},
		{"two at the floor, user stamps", 90, []int{100, 95}, false, false},
		{"two off the floor", 90, []int{200, 150}, false, true},
		{"two, no floor known", 0, []int{100, 100}, false, true},
		{"two, within the slack of a small floor", 8, []int{13, 40}, true, true},
		{"two, beyond the slack of a small floor", 8, []int{14, 40}, false, true},
		{"settled", 0, []int{100, 100, 100}, true, false},
		{"falling", 0, []int{300, 200, 100}, false, false},
		{"near floor", 90, []int{300, 200, 100}, true, false},
		{"settled far above floor", 40, []int{100, 100, 100}, false, false},
		{"at most", 40, []int{100, 100, 100, 100, 100, 100, 100, 100}, true, false},
	}
	for _, c := range cases {
		s := SampleSet{Floor: time.Duration(c.floor) * time.Microsecond}
		for _, r := range c.rtts {
			s.Add(sample(r, c.kernel))
		}
		if got := s.Enough(); got != c.want {
			t.Errorf("%s: Enough %v, want %v", c.name, got, c.want)
		}
	}
}

// Without transmit stamps (a sender that cannot tell, or a kernel that
// gives none) the user-space readings are used, and the measurement says
// so; the responder then sends no follow-up.
func TestProbeFallbackUserStamps(t *testing.T) {
	p, _ := newStepPath(us(50), us(50), ProbeConfig{})
	m, err := p.client.Measure(context.Background(), slaveAddr)
	if err != nil || m.Stamps != StampsUser {
		t.Fatalf("plain sender: %+v, %v", m, err)
	}
	p.client.send = noStampSender{p}
	m, err = p.client.Measure(context.Background(), slaveAddr)
	if err != nil || m.Stamps != StampsUser {
		t.Fatalf("no stamp given: %+v, %v", m, err)
	}
	for _, pkt := range p.sent {
		if pl, err := UnmarshalProbe(pkt.Payload); err != nil || pl.HasPrev {
			t.Fatalf("%v carries a follow-up without stamps: %+v, %v", pkt.Kind, pl, err)
		}
	}
	if d := absDur(m.Offset - 5*time.Millisecond); d > m.ErrorBound {
		t.Fatalf("offset %v, bound %v", m.Offset, m.ErrorBound)
	}
}

// With stamps on the responder only, its replies from the second on carry
// the kernel's send time of the one before, seq and all, and the client
// puts it in that sample: t3 later by the stamp's lag than the reading.
func TestProbeInterleavedT3(t *testing.T) {
	p, _ := newStepPath(us(50), us(50), ProbeConfig{MinReplies: 3, Replies: 3})
	p.stamping, p.lag = true, 7*time.Microsecond
	m, err := p.client.Measure(context.Background(), slaveAddr)
	if err != nil {
		t.Fatal(err)
	}
	var replies []ProbePayload
	var seqs []uint16
	for _, pkt := range p.sent {
		pl, err := UnmarshalProbe(pkt.Payload)
		if err != nil || pl.Format != 2 {
			t.Fatalf("%+v: %v", pl, err)
		}
		if pkt.Kind == tsp.ExtProbeReply {
			replies = append(replies, pl)
			seqs = append(seqs, pkt.Seq)
		}
	}
	if len(replies) != 3 || replies[0].HasPrev || !replies[1].HasPrev || replies[1].PrevSeq != seqs[0] || replies[2].PrevSeq != seqs[1] {
		t.Fatalf("replies %+v, seqs %v", replies, seqs)
	}
	if got := time.Duration(replies[1].PrevT3 - replies[0].T3); got != 7*time.Microsecond {
		t.Fatalf("follow-up t3 %v after the reading, want 7µs", got)
	}
	// Client t1 from user space, t3 from the kernel: "mixed"; the RTT
	// lost the 7 µs.
	if m.Stamps != StampsMixed || m.RTT != 93*time.Microsecond {
		t.Fatalf("measurement %+v", m)
	}
}

// The combination is honest: samples over an asymmetric path and with
// queueing, the true offset (0) always within the bound, which is no
// looser than the best sample's own.
func TestSampleSetHonestBound(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// out and back delays in µs; true offset 0.
	paths := [][2]int{{60, 40}, {200, 40}, {45, 55}, {50, 400}, {48, 52}}
	var s SampleSet
	at := t0
	for _, d := range paths {
		out, back := time.Duration(d[0])*time.Microsecond, time.Duration(d[1])*time.Microsecond
		s.Add(Sample{T1: at, T2: at.Add(out), T3: at.Add(out + 10*time.Microsecond), T4: at.Add(out + back + 10*time.Microsecond)})
		at = at.Add(time.Millisecond)
	}
	m, err := s.Measurement(len(paths))
	if err != nil {
		t.Fatal(err)
	}
	if m.RTT != 100*time.Microsecond || m.Samples != 5 || m.Stamps != StampsUser {
		t.Fatalf("%+v", m)
	}
	if absDur(m.Offset) > m.ErrorBound {
		t.Fatalf("offset %v beyond the bound %v", m.Offset, m.ErrorBound)
	}
	if m.ErrorBound > m.RTT/2+userStampRes+10*time.Microsecond || m.ErrorBound < absDur(m.Offset) {
		t.Fatalf("bound %v for best RTT %v", m.ErrorBound, m.RTT)
	}
	// The 200 µs and 450 µs samples are beyond twice the best: unused,
	// though their offsets are the largest.
	if absDur(m.Offset) > 5*time.Microsecond {
		t.Fatalf("offset %v pulled by the queued samples", m.Offset)
	}
}

func TestProbePayloadFormat2(t *testing.T) {
	p := ProbePayload{Format: 2, T1: 1, T2: -2, T3: 3, HasPrev: true, PrevSeq: 0xBEEF, PrevT3: 1 << 60}
	b := p.Marshal()
	if len(b) != probePayload2Size {
		t.Fatalf("%d bytes", len(b))
	}
	got, err := UnmarshalProbe(append(b, 1, 2, 3)) // later fields ignored
	if err != nil || got != p {
		t.Fatalf("round trip %+v, %v", got, err)
	}
	// A format-1 reader reads its fields where they always were.
	old := ProbePayload{Format: 1, T1: 1, T2: -2, T3: 3}.Marshal()
	if !bytes.Equal(b[8:32], old[8:32]) || b[0] != old[0] {
		t.Fatalf("format 2 % x, format 1 % x", b, old)
	}
	// Cut short, format 2 is read as format 1.
	if got, err := UnmarshalProbe(b[:36]); err != nil || got.Format != 1 || got.HasPrev || got.T3 != 3 {
		t.Fatalf("short format 2: %+v, %v", got, err)
	}
	// A format-1 request gets a format-1 reply, with no follow-up even
	// where the responder has one.
	r := NewProbeResponder(NewDryRunClock(nil, nil), "s")
	from := netip.MustParseAddrPort("10.0.0.1:525")
	r.last[from] = sentReply{seq: 1, t3: time.Unix(5, 0)}
	rep, err := r.Reply(Datagram{Packet: tsp.ExtPacket{Kind: tsp.ExtProbe, Payload: old}, From: from})
	if err != nil || len(rep.Payload) != probePayloadSize || rep.Payload[1] != 0 {
		t.Fatalf("reply % x, %v", rep.Payload, err)
	}
	rep, err = r.Reply(Datagram{Packet: tsp.ExtPacket{Kind: tsp.ExtProbe, Payload: b}, From: from})
	if pl, _ := UnmarshalProbe(rep.Payload); err != nil || !pl.HasPrev || pl.PrevSeq != 1 || pl.PrevT3 != 5e9 {
		t.Fatalf("format-2 reply %+v, %v", pl, err)
	}
}

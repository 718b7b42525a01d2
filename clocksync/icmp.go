package clocksync

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// ICMP timestamps (RFC 792, types 13 and 14) carry milliseconds since
// midnight UT in 32 bits; a value with the high bit set is "non-standard"
// (BSD: NONSTDTIME).
const (
	msPerDay     = 86_400_000
	msHalfDay    = msPerDay / 2
	icmpNonStd   = 1 << 31
	icmpBodySize = 16 // id, seq, originate, receive, transmit
)

// ErrNoRawSocket: the process may not open a raw ICMP socket.
var ErrNoRawSocket = errors.New("ICMP timestamp measurement needs a raw socket: CAP_NET_RAW (run as root, or grant it with `setcap cap_net_raw+ep` or systemd AmbientCapabilities=CAP_NET_RAW); hosts that answer our probe need none")

// MsSinceMidnight is t as RFC 792 wants it: milliseconds since midnight UT.
func MsSinceMidnight(t time.Time) uint32 {
	ms := t.UnixMilli() % msPerDay
	if ms < 0 {
		ms += msPerDay
	}
	return uint32(ms)
}

// Fold12h folds a difference of two ms-since-midnight values into
// [−12 h, +12 h), as BSD's measure() does, so that stamps taken on either
// side of midnight still give a small difference.
func Fold12h(ms int64) int64 {
	ms %= msPerDay
	if ms >= msHalfDay {
		ms -= msPerDay
	} else if ms < -msHalfDay {
		ms += msPerDay
	}
	return ms
}

// ICMPTimestamp is the body of an ICMP timestamp request or reply.
type ICMPTimestamp struct {
	ID, Seq                      uint16
	Originate, Receive, Transmit uint32
}

// BuildTimestampRequest encodes an ICMP timestamp request (type 13) with
// originate set; the checksum is filled in.
func BuildTimestampRequest(id, seq uint16, originate uint32) ([]byte, error) {
	body := make([]byte, icmpBodySize)
	binary.BigEndian.PutUint16(body[0:], id)
	binary.BigEndian.PutUint16(body[2:], seq)
	binary.BigEndian.PutUint32(body[4:], originate)
	m := icmp.Message{Type: ipv4.ICMPTypeTimestamp, Code: 0, Body: &icmp.RawBody{Data: body}}
	b, err := m.Marshal(nil)
	if err != nil {
		return nil, fmt.Errorf("build ICMP timestamp request: %w", err)
	}
	return b, nil
}

// ParseTimestampReply decodes an ICMP message and returns its timestamp body
// if it is a timestamp reply (type 14, code 0).
func ParseTimestampReply(b []byte) (ICMPTimestamp, error) {
	m, err := icmp.ParseMessage(1, b) // 1: ICMPv4
	if err != nil {
		return ICMPTimestamp{}, fmt.Errorf("parse ICMP: %w", err)
	}
	if m.Type != ipv4.ICMPTypeTimestampReply || m.Code != 0 {
		return ICMPTimestamp{}, fmt.Errorf("ICMP type %v code %d is not a timestamp reply", m.Type, m.Code)
	}
	raw, ok := m.Body.(*icmp.RawBody)
	if !ok || len(raw.Data) < icmpBodySize {
		return ICMPTimestamp{}, fmt.Errorf("ICMP timestamp reply: body shorter than %d bytes", icmpBodySize)
	}
	d := raw.Data
	return ICMPTimestamp{
		ID: binary.BigEndian.Uint16(d[0:]), Seq: binary.BigEndian.Uint16(d[2:]),
		Originate: binary.BigEndian.Uint32(d[4:]), Receive: binary.BigEndian.Uint32(d[8:]),
		Transmit: binary.BigEndian.Uint32(d[12:]),
	}, nil
}

// ICMPSample computes one reply's offset (remote minus ours, BSD's
// (odelta − idelta)/2 with odelta = receive − originate and idelta =
// ourReceive − transmit, each folded into ±12 h) and round trip
// (ourReceive − originate, folded). A negative round trip is ErrBadSample;
// a receive or transmit stamp with the high bit set is ErrNonStdTime.
func ICMPSample(ts ICMPTimestamp, ourReceive uint32) (offset, rtt time.Duration, err error) {
	if ts.Receive&icmpNonStd != 0 || ts.Transmit&icmpNonStd != 0 {
		return 0, 0, ErrNonStdTime
	}
	r := Fold12h(int64(ourReceive) - int64(ts.Originate))
	if r < 0 {
		return 0, 0, fmt.Errorf("%w: round trip %d ms", ErrBadSample, r)
	}
	odelta := Fold12h(int64(ts.Receive) - int64(ts.Originate))
	idelta := Fold12h(int64(ourReceive) - int64(ts.Transmit))
	off := time.Duration(odelta-idelta) * time.Millisecond / 2
	return off, time.Duration(r) * time.Millisecond, nil
}

// ICMPConfig tunes an ICMPMeasurer. The defaults are BSD's: 5 replies out
// of at most 10 probes, 100 ms wait for each.
type ICMPConfig struct {
	Replies int
	Trials  int
	Wait    time.Duration
}

// ICMPMeasurer measures hosts with ICMP timestamps, for BSD daemons that do
// not answer our probe. One raw socket serves all concurrent measurements;
// replies are matched by identifier and sequence number.
type ICMPMeasurer struct {
	conn  *icmp.PacketConn
	clock Clock
	cfg   ICMPConfig
	id    uint16

	mu      sync.Mutex
	seq     uint16
	waiting map[uint16]chan icmpReply
	done    chan struct{}
}

type icmpReply struct {
	ts   ICMPTimestamp
	from netip.Addr
	at   uint32
}

// mapRawSocketErr turns a permission error into ErrNoRawSocket.
func mapRawSocketErr(err error) error {
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("open ICMP socket: %w: %w", ErrNoRawSocket, err)
	}
	return fmt.Errorf("open ICMP socket: %w", err)
}

// NewICMPMeasurer opens a raw ICMP socket (needs CAP_NET_RAW; the error
// wraps ErrNoRawSocket otherwise) and starts reading it. Close stops it.
func NewICMPMeasurer(clock Clock, cfg ICMPConfig) (*ICMPMeasurer, error) {
	pc := ProbeConfig{Replies: cfg.Replies, Trials: cfg.Trials, Wait: cfg.Wait}.withDefaults(5) // BSD's 5 of 10, 100 ms
	cfg = ICMPConfig{Replies: pc.Replies, Trials: pc.Trials, Wait: pc.Wait}
	c, err := icmp.ListenPacket("ip4:icmp", "0.0.0.0")
	if err != nil {
		return nil, mapRawSocketErr(err)
	}
	m := &ICMPMeasurer{conn: c, clock: clock, cfg: cfg, id: uint16(os.Getpid()), waiting: map[uint16]chan icmpReply{}, done: make(chan struct{})}
	go m.read()
	return m, nil
}

// Close closes the socket; pending measurements fail.
func (m *ICMPMeasurer) Close() error {
	err := m.conn.Close()
	<-m.done
	return err
}

func (m *ICMPMeasurer) read() {
	defer close(m.done)
	buf := make([]byte, 1500)
	for {
		n, from, err := m.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		at := MsSinceMidnight(m.clock.Now())
		ts, err := ParseTimestampReply(buf[:n])
		if err != nil || ts.ID != m.id {
			continue
		}
		var addr netip.Addr
		if ip, ok := from.(*net.IPAddr); ok {
			addr, _ = netip.AddrFromSlice(ip.IP)
		}
		m.mu.Lock()
		ch, ok := m.waiting[ts.Seq]
		m.mu.Unlock()
		if ok {
			select {
			case ch <- icmpReply{ts: ts, from: addr.Unmap(), at: at}:
			default:
			}
		}
	}
}

// Measure sends ICMP timestamp requests to host (its port is ignored) and
// returns the minimum-RTT reply's offset. ErrorBound adds 1 ms to RTT/2 for
// the millisecond resolution of the stamps.
func (m *ICMPMeasurer) Measure(ctx context.Context, host netip.AddrPort) (Measurement, error) {
	dst := &net.IPAddr{IP: host.Addr().AsSlice()}
	var best Measurement
	got, sent := 0, 0
	timer := time.NewTimer(m.cfg.Wait)
	defer timer.Stop()
	for sent < m.cfg.Trials && got < m.cfg.Replies && ctx.Err() == nil {
		ch := make(chan icmpReply, 1)
		m.mu.Lock()
		m.seq++
		seq := m.seq
		m.waiting[seq] = ch
		m.mu.Unlock()
		now := m.clock.Now()
		b, err := BuildTimestampRequest(m.id, seq, MsSinceMidnight(now))
		if err == nil {
			_, err = m.conn.WriteTo(b, dst)
		}
		sent++
		if err == nil {
			timer.Reset(m.cfg.Wait)
			select {
			case r := <-ch:
				if r.from == host.Addr().Unmap() {
					off, rtt, serr := ICMPSample(r.ts, r.at)
					if errors.Is(serr, ErrNonStdTime) {
						err = serr
					} else if serr == nil {
						got++
						if got == 1 || rtt < best.RTT {
							best = Measurement{Offset: off, RTT: rtt, ErrorBound: rtt/2 + time.Millisecond, At: m.clock.Now()}
						}
					}
				}
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		m.mu.Lock()
		delete(m.waiting, seq)
		m.mu.Unlock()
		if err != nil {
			return Measurement{Sent: sent}, fmt.Errorf("ICMP timestamp %v: %w", host.Addr(), err)
		}
	}
	if got == 0 {
		return Measurement{Sent: sent}, ErrNoReply
	}
	best.Samples, best.Sent = got, sent
	return best, nil
}

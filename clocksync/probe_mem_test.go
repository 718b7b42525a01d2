package clocksync

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

// memNet is an in-process network of PacketConns with a fixed one-way delay
// per direction, to check the probe's arithmetic against a known asymmetry.
type memNet struct {
	mu    sync.Mutex
	conns map[netip.AddrPort]*memConn
	delay map[[2]netip.AddrPort]time.Duration
}

type memConn struct {
	net  *memNet
	addr netip.AddrPort
	in   chan Datagram
}

func (n *memNet) conn(a netip.AddrPort) *memConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := &memConn{net: n, addr: a, in: make(chan Datagram, 64)}
	n.conns[a] = c
	return c
}

func (c *memConn) WriteExt(p tsp.ExtPacket, to netip.AddrPort) error {
	b, err := p.Marshal()
	if err != nil {
		return err
	}
	c.net.mu.Lock()
	dst, d := c.net.conns[to], c.net.delay[[2]netip.AddrPort{c.addr, to}]
	c.net.mu.Unlock()
	if dst == nil {
		return nil // nobody there: lost
	}
	time.AfterFunc(d, func() {
		q, err := tsp.UnmarshalExt(b)
		if err == nil {
			dst.in <- Datagram{Packet: q, From: c.addr}
		}
	})
	return nil
}

func (c *memConn) ReadExt(ctx context.Context) (Datagram, error) {
	select {
	case d := <-c.in:
		return d, nil
	case <-ctx.Done():
		return Datagram{}, ctx.Err()
	}
}

// An asymmetric path (4 ms out, 0 back) biases the offset by half the
// asymmetry, and the error bound RTT/2 covers it.
func TestProbeAsymmetricPath(t *testing.T) {
	ma, sa := netip.MustParseAddrPort("10.0.0.1:525"), netip.MustParseAddrPort("10.0.0.2:525")
	n := &memNet{conns: map[netip.AddrPort]*memConn{}, delay: map[[2]netip.AddrPort]time.Duration{{ma, sa}: 4 * time.Millisecond}}
	mc, sc := n.conn(ma), n.conn(sa)
	src := NewMonotonicSource()
	slave := NewSimClock(src, SimConfig{Offset: -20 * time.Millisecond})
	client := NewProbeClient(mc, NewSimClock(src, SimConfig{}), "m", ProbeConfig{Replies: 3})

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var others []Datagram
	var omu sync.Mutex
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = Serve(ctx, mc, client, nil, func(d Datagram) { omu.Lock(); others = append(others, d); omu.Unlock() })
	}()
	go func() { defer wg.Done(); _ = Serve(ctx, sc, nil, NewProbeResponder(slave, "s"), nil) }()
	defer func() { cancel(); wg.Wait() }()

	m, err := client.Measure(ctx, sa)
	if err != nil {
		t.Fatal(err)
	}
	// True offset −20 ms, plus half the 4 ms asymmetry: about −18 ms.
	if d := absDur(m.Offset - (-18 * time.Millisecond)); d > time.Millisecond {
		t.Fatalf("offset %v, want ≈ −18ms", m.Offset)
	}
	if err := absDur(m.Offset + 20*time.Millisecond); err > m.ErrorBound {
		t.Fatalf("error %v beyond the bound %v", err, m.ErrorBound)
	}
	// Replies from the wrong host, or for a probe never sent, are not taken;
	// other extension packets go to the fallback.
	if client.Deliver(Datagram{Packet: tsp.ExtPacket{Kind: tsp.ExtProbeReply, Seq: 1, Payload: ProbePayload{}.Marshal()}, From: ma}) {
		t.Fatal("stray reply accepted")
	}
	_ = sc.WriteExt(tsp.ExtPacket{Kind: tsp.ExtRing}, ma)
	deadline := time.Now().Add(2 * time.Second)
	for {
		omu.Lock()
		got := len(others)
		omu.Unlock()
		if got == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("non-probe packet not handed to the fallback")
		}
		time.Sleep(time.Millisecond)
	}
}

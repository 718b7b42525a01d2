// Package flood is the hostile traffic of issue 11, shared by the flood
// test (tests/flood_test.go) and the flood benchmark (cmd/bench-flood):
// datagrams an outsider on the LAN can send without knowing anything
// (random bytes, and well-formed TSP under made-up names and sequence
// numbers), a sender that paces them at a given rate with its loop
// bounded in count and time, and what /proc says of the target process.
//
// It sends only to the address it is given; the test and the benchmark
// give it loopback.
package flood

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"github.com/timed-project/timed/tsp"
)

// Election is the mix of the flood test: the types an outsider can send
// to a master to make it answer, list it a slave, QUIT it, start an
// election or a conflict.
var Election = []tsp.Type{tsp.Accept, tsp.Quit, tsp.Election, tsp.Conflict, tsp.SlaveUp, tsp.MasterReq}

// Mix makes the datagrams of a flood: a share of random bytes, and
// packets of the given types in turn, each under a random name and
// sequence number. It is deterministic for a seed.
type Mix struct {
	rng    *rand.Rand
	types  []tsp.Type
	random int // percentage of random-bytes datagrams
	next   int
}

// NewMix returns a Mix of random bytes (randomPct percent of the
// datagrams) and well-formed packets of types; with no types every
// datagram is random bytes.
func NewMix(seed uint64, randomPct int, types ...tsp.Type) *Mix {
	if len(types) == 0 {
		randomPct = 100
	}
	return &Mix{rng: rand.New(rand.NewPCG(seed, seed^0xf100d)), types: types, random: randomPct}
}

// Next appends the next datagram to dst[:0] and returns it.
func (m *Mix) Next(dst []byte) []byte {
	dst = dst[:0]
	if m.rng.IntN(100) < m.random {
		// Anything from nothing to a jumbo datagram's worth: short ones,
		// 268-byte lookalikes with random names, extension lengths.
		n := m.rng.IntN(tsp.PacketSize * 2)
		for range n {
			dst = append(dst, byte(m.rng.Uint32()))
		}
		return dst
	}
	t := m.types[m.next%len(m.types)]
	m.next++
	p := tsp.Packet{Type: t, Version: tsp.Version, Seq: uint16(m.rng.Uint32()), Name: m.name()}
	b, err := p.AppendMarshal(dst)
	if err != nil {
		panic(err) // names are short and printable: cannot happen
	}
	return b
}

// name is a random host name of 1 to 16 printable characters.
func (m *Mix) name() string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789-."
	b := make([]byte, 1+m.rng.IntN(16))
	for i := range b {
		b[i] = chars[m.rng.IntN(len(chars))]
	}
	return string(b)
}

// Result is what a Send did.
type Result struct {
	Sent    int           // datagrams written
	Errors  int           // writes that failed (a closed port's ICMP error, a full buffer)
	Elapsed time.Duration // from the first write to the last
}

// Rate is the datagrams a second the result achieved.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Sent) / r.Elapsed.Seconds()
}

// Send writes datagrams made by next to to at rate a second, for d, in
// batches of a millisecond's worth: at most rate×d datagrams, and never
// past d (or ctx), however far behind the sender falls on a loaded
// machine. The datagrams leave from conns in turn: one socket is one
// source, several are as many sources. It returns an error only for a
// bad argument; failed writes are counted.
func Send(ctx context.Context, conns []*net.UDPConn, to netip.AddrPort, rate int, d time.Duration, next func([]byte) []byte) (Result, error) {
	if rate <= 0 || d <= 0 || len(conns) == 0 {
		return Result{}, fmt.Errorf("flood: rate %d, duration %v, %d sockets: all must be positive", rate, d, len(conns))
	}
	if !to.Addr().IsLoopback() {
		return Result{}, fmt.Errorf("flood: %v is not a loopback address", to)
	}
	total := int(float64(rate) * d.Seconds())
	batch := max(rate/1000, 1)
	buf := make([]byte, 0, 2*tsp.PacketSize)
	start := time.Now()
	end := start.Add(d)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var r Result
	for r.Sent+r.Errors < total {
		now := time.Now()
		if !now.Before(end) || ctx.Err() != nil {
			break
		}
		// Catch up with the schedule, but by at most ten batches at once:
		// a sender that stalled must not turn into a burst.
		due := int(float64(rate)*now.Sub(start).Seconds()) + batch
		for n := 0; n < 10*batch && r.Sent+r.Errors < min(due, total); n++ {
			buf = next(buf)
			conn := conns[(r.Sent+r.Errors)%len(conns)]
			if _, err := conn.WriteToUDPAddrPort(buf, to); err != nil {
				r.Errors++
				continue
			}
			r.Sent++
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	r.Elapsed = time.Since(start)
	return r, nil
}

// ErrNoProc is returned where /proc does not say what is asked.
var ErrNoProc = errors.New("flood: not in /proc")

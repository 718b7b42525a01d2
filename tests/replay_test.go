package tests

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/auth"
)

// The replay of issue 11: a SETTIME captured on the wire and sent again
// 28 s later was obeyed. With --auth required, a datagram carries a
// signed counter per sender; the receiver drops a counter it has seen
// (and keeps what it has seen across restarts in --state-dir).

// rawLoopback is a raw IPv4 socket for UDP on 127.0.0.1: it reads a copy
// of every UDP datagram to that address, IP header included, and sends
// datagrams with a header of our making (IP_HDRINCL), so with any
// source address and port. It needs CAP_NET_RAW; the tests run as root.
type rawLoopback struct {
	t  *testing.T
	rc *ipv4.RawConn
}

var loopback = net.IPv4(127, 0, 0, 1)

func newRawLoopback(t *testing.T) *rawLoopback {
	t.Helper()
	c, err := net.ListenPacket("ip4:udp", loopback.String())
	if err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Fatalf("a raw IPv4 socket (to capture and to replay with a forged source): %v: the replay test needs CAP_NET_RAW; run it as root", err)
		}
		t.Fatalf("a raw IPv4 socket on %v: %v", loopback, err)
	}
	rc, err := ipv4.NewRawConn(c)
	if err != nil {
		c.Close()
		t.Fatalf("raw IPv4 socket with IP_HDRINCL: %v", err)
	}
	t.Cleanup(func() { rc.Close() })
	return &rawLoopback{t: t, rc: rc}
}

// capture returns the first datagram to 127.0.0.1 from port from to port
// to whose UDP payload satisfies want, waiting at most bound.
func (r *rawLoopback) capture(from, to int, bound time.Duration, want func([]byte) bool) []byte {
	r.t.Helper()
	if err := r.rc.SetReadDeadline(time.Now().Add(bound)); err != nil {
		r.t.Fatal(err)
	}
	buf := make([]byte, 65536)
	for {
		h, p, _, err := r.rc.ReadFrom(buf)
		if err != nil {
			r.t.Fatalf("no datagram from port %d to port %d as wanted within %v: %v", from, to, bound, err)
		}
		if h.Protocol != syscall.IPPROTO_UDP || !h.Dst.Equal(loopback) || len(p) < 8 {
			continue
		}
		sport, dport, ulen := binary.BigEndian.Uint16(p), binary.BigEndian.Uint16(p[2:]), int(binary.BigEndian.Uint16(p[4:]))
		if int(sport) != from || int(dport) != to || ulen < 8 || ulen > len(p) {
			continue
		}
		if payload := p[8:ulen]; want(payload) {
			return append([]byte(nil), payload...)
		}
	}
}

// send sends payload to 127.0.0.1:to from 127.0.0.1:from, a source port
// that is not ours: the kernel takes the IP header we give, and the UDP
// header is ours too (checksum 0: none, which IPv4 allows).
func (r *rawLoopback) send(from, to int, payload []byte) {
	r.t.Helper()
	udp := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(udp, uint16(from))
	binary.BigEndian.PutUint16(udp[2:], uint16(to))
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	udp = append(udp, payload...)
	h := &ipv4.Header{Version: ipv4.Version, Len: ipv4.HeaderLen, TotalLen: ipv4.HeaderLen + len(udp), TTL: 64,
		Protocol: syscall.IPPROTO_UDP, Src: loopback, Dst: loopback}
	if err := r.rc.WriteTo(h, udp, nil); err != nil {
		r.t.Fatalf("replay from 127.0.0.1:%d to 127.0.0.1:%d: %v", from, to, err)
	}
}

// signedCorrection: a version-1 ADJTIME or SETTIME with an auth trailer.
func signedCorrection(b []byte) bool {
	if len(b) < 2 || b[1] != tsp.Version || (tsp.Type(b[0]) != tsp.AdjTime && tsp.Type(b[0]) != tsp.SetTime) {
		return false
	}
	_, trailer, err := auth.Split(b)
	return err == nil && len(trailer) > 0
}

// TestReplayAuthRequired captures a signed ADJTIME or SETTIME the master
// sends a slave, and later sends the very bytes again from the master's
// own address and port, so that address binding cannot be what stops
// them: the slave drops them as a replay and no clock moves.
//
// Then the slave is stopped (SIGTERM) and started again on its state
// directory, and gets the same bytes once more. The master is stopped
// first and started again only after that: a slave that heard the master
// again would know its newer counter and drop the replay without any
// saved state, and only the state kept across the restart can tell the
// replay from a first contact with the master (which the window admits).
// The slave drops it as a replay, and once the master is back there is
// one master again, the slave following it, and no clock moved by more
// than the restarts move them (restartHeld).
func TestReplayAuthRequired(t *testing.T) {
	t.Parallel()
	raw := newRawLoopback(t) // first: fail before the cluster if it cannot be had
	keys := writeKeys(t)
	c := newAttackCluster(t, "--auth", "required", "--auth-keys", keys, "--state-dir", "$STATE")
	slave := c.slaves[0]
	replayed := "auth " + auth.ReasonReplay.String()

	// The master corrects each slave every round (1 s).
	captured := raw.capture(c.master.port, slave.port, 5*syncInterval, signedCorrection)
	p, err := tsp.Unmarshal(captured)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("captured %s, %d bytes signed, from %s to %s", p.Format(""), len(captured), c.master.name, slave.name)

	// Later: the slave has taken newer corrections since.
	st := c.snapshot(slave)
	c.awaitCorrections(slave, st, 2)
	before, st := c.offsets(), c.snapshot(slave)
	raw.send(c.master.port, slave.port, captured)
	c.awaitDrop(slave, replayed, st, 1)
	c.held("replayed "+p.Type.String(), before)

	// Across a clean restart of the slave, with the master silent.
	before = c.offsets()
	c.kill(c.master, syscall.SIGTERM)
	c.kill(slave, syscall.SIGTERM)
	c.start(slave)
	c.await(slave.name+" answers after its restart", 10*time.Second, func() (bool, string) {
		_, err := c.status(slave)
		return err == nil, fmt.Sprint(err)
	})
	st = c.snapshot(slave)
	raw.send(c.master.port, slave.port, captured)
	c.awaitDrop(slave, replayed, st, 1)
	c.start(c.master)
	m := c.awaitOneMaster() // every other node, the restarted slave too, its slave
	t.Logf("after the restarts %s is master", m.name)
	c.clocksHeld("replayed "+p.Type.String()+" after the slave's restart", before, restartHeld)
}

// restartHeld bounds the clocks' moves across the restarts: a new
// election, a new master whose frequency discipline starts afresh and
// SETTIMEs to the slaves move them by up to milliseconds on a loaded
// machine, while the replayed SETTIME, had it been obeyed, would set the
// slave back by the seconds since its capture (an ADJTIME's few
// microseconds no clock can show: the drop counter is what tells).
const restartHeld = 100 * time.Millisecond

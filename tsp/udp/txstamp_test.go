package udp

import (
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

// A stamped send on loopback gets the kernel's transmit timestamp, taken
// between the clock readings before the write and after the send returned;
// the datagram arrives intact, and reading the stamps from the error queue
// costs the socket's reader nothing: no read error, and the receive
// timestamps and PKTINFO of later datagrams are still there.
func TestSendExtStampedLoopback(t *testing.T) {
	a := listen(t, Config{Hostname: "a"})
	b := listen(t, Config{Hostname: "b"})
	for i := range 50 {
		before := time.Now()
		at, ok, err := a.SendExtStamped(&tsp.ExtPacket{Kind: tsp.ExtProbe, Seq: uint16(i), Payload: []byte{1}}, addr(b))
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("send %d: no kernel transmit timestamp", i)
		}
		if at.Before(before) || at.After(after) {
			t.Fatalf("send %d: stamp %v outside [%v, %v]", i, at, before, after)
		}
		r := recv(t, b)
		if r.Ext == nil || r.Ext.Seq != uint16(i) || r.Ext.Name != "a" {
			t.Fatalf("received %+v", r)
		}
		if r.At.Before(at) || r.Dst != localhost || r.IfIndex == 0 {
			t.Fatalf("receive side: at %v (sent %v), dst %v, ifindex %d", r.At, at, r.Dst, r.IfIndex)
		}
	}
	// b answers a: a's reader, woken by its error queue 50 times, still
	// reads, and counted no error.
	if err := b.SendExt(&tsp.ExtPacket{Kind: tsp.ExtProbeReply, Seq: 7, Payload: []byte{1}}, addr(a)); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, a); r.Ext == nil || r.Ext.Seq != 7 {
		t.Fatalf("a received %+v", r)
	}
	if s := a.Stats(); s.ReadErrors != 0 || s.SendErrors != 0 || s.SentExt[tsp.ExtProbe] != 50 {
		t.Fatalf("stats %+v", s)
	}
}

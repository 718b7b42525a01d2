package udp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/timed-project/timed/internal/limit"
	"github.com/timed-project/timed/tsp"
)

// TestPeerPastFloodedAggregate: in peers mode, a flood from many sources
// empties the aggregate bucket; a configured peer's datagrams are still
// delivered, another port on the peer's address is not (a peer is known
// by address and port), and neither is a new source.
func TestPeerPastFloodedAggregate(t *testing.T) {
	tr, _ := socketlessTransport(1024, limit.Config{Rate: 16, Burst: 64, GlobalRate: 100, GlobalBurst: 100})
	peer := netip.MustParseAddrPort("127.0.0.1:5250")
	tr.networks = []Network{{Interface: "peers", Peers: true}}
	tr.peers = []netip.AddrPort{peer}
	b, _ := (&tsp.Packet{Type: tsp.Ack, Version: tsp.Version, Name: "x"}).Marshal()
	now := time.Now()
	for i := range 1000 {
		tr.receive(b, nil, tr.parse4, false, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), uint16(1024+i)), now)
	}
	if got := tr.stats.snapshot().Dropped[DropRateLimited]; got != 900 {
		t.Fatalf("%d of the flood rate limited, want 900 (aggregate burst 100)", got)
	}
	for len(tr.packets) > 0 {
		<-tr.packets
	}
	tr.receive(b, nil, tr.parse4, false, peer, now)
	tr.receive(b, nil, tr.parse4, false, netip.AddrPortFrom(peer.Addr(), 5251), now)
	tr.receive(b, nil, tr.parse4, false, netip.MustParseAddrPort("127.0.0.3:5250"), now)
	if len(tr.packets) != 1 {
		t.Fatalf("%d delivered past the empty aggregate, want the peer's 1", len(tr.packets))
	}
	if r := <-tr.packets; r.From != peer {
		t.Fatalf("delivered from %v, want the peer %v", r.From, peer)
	}
}

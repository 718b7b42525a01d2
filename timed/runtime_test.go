package timed

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp/udp"
)

// TestElectionConfigs: one configuration per network, with the host's
// name and its own address there (so that the Host drops its own LOOPs);
// in peers mode, where daemons share 127.0.0.1, no address.
func TestElectionConfigs(t *testing.T) {
	base := election.FastConfig("")
	base.MayBeMaster = true
	nets := []udp.Network{
		{Interface: "eth0", Addr: netip.MustParseAddr("10.0.0.2"), Prefix: netip.MustParsePrefix("10.0.0.0/24")},
		{Interface: "eth1", Addr: netip.MustParseAddr("10.0.1.2"), Prefix: netip.MustParsePrefix("10.0.1.0/24")},
	}
	cfgs := electionConfigs(base, "gw", nets, 0, 525)
	if len(cfgs) != 2 {
		t.Fatalf("%d configurations for 2 networks", len(cfgs))
	}
	for i, c := range cfgs {
		if c.Name != "gw" || !c.MayBeMaster || c.Network != nets[i].String() {
			t.Errorf("network %d: name %q, master %v, network %q", i, c.Name, c.MayBeMaster, c.Network)
		}
		if want := netip.AddrPortFrom(nets[i].Addr, 525); c.Addr != want {
			t.Errorf("network %d: address %v, want %v", i, c.Addr, want)
		}
	}
	if _, err := election.NewHost(cfgs, rand.New(rand.NewPCG(1, 1))); err != nil {
		t.Fatal(err)
	}
	peers := electionConfigs(base, "n1", []udp.Network{{Interface: "peers", Peers: true}}, 500, 15250)
	if peers[0].Addr.IsValid() {
		t.Errorf("peers mode: address %v, want none (daemons share 127.0.0.1)", peers[0].Addr)
	}
	// The answer delay spreads the answers of the hosts that may answer:
	// a /24's 253 others at 50 µs apart (12.65 ms), 500 peers over 25 ms.
	if got, want := cfgs[0].AnswerDelay, 253*election.AnswerSpacing; got != want {
		t.Errorf("/24: answer delay %v, want %v", got, want)
	}
	if got, want := peers[0].AnswerDelay, 500*election.AnswerSpacing; got != want {
		t.Errorf("500 peers: answer delay %v, want %v", got, want)
	}
	if got := networkLabel(nets[1]); got != "10.0.1.0/24" {
		t.Errorf("label %q", got)
	}
	if got := networkLabel(udp.Network{Peers: true}); got != "peers" {
		t.Errorf("peers label %q", got)
	}
}

package udp

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/timed-project/timed/internal/limit"
	"github.com/timed-project/timed/tsp"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// Every test talks over loopback only, to transports on kernel-chosen
// ports that serve the loopback network.
const loopbackTemplate = `GetAllInterfaces | include "type" "IPv4" | include "flags" "loopback"`

// wait only guards against a hang; nothing waits for it to pass.
const wait = 10 * time.Second

var localhost = netip.MustParseAddr("127.0.0.1")

func listen(t *testing.T, cfg Config) *Transport {
	t.Helper()
	if cfg.Port == 0 {
		cfg.Port = AnyPort
	}
	if cfg.Interfaces == "" && len(cfg.Peers) == 0 {
		cfg.Interfaces = loopbackTemplate
	}
	tr, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// addr is where a transport is reached over loopback.
func addr(tr *Transport) netip.AddrPort { return netip.AddrPortFrom(localhost, tr.LocalAddr().Port()) }

func recv(t *testing.T, tr *Transport) Received {
	t.Helper()
	select {
	case r, ok := <-tr.Packets():
		if !ok {
			t.Fatal("Packets() closed")
		}
		return r
	case <-time.After(wait):
		t.Fatalf("%s: no packet within %v", tr.Hostname(), wait)
	}
	panic("unreachable")
}

// processed returns a config hook and a channel that receives once per
// datagram the reader has finished with (delivered or dropped), so tests
// await the reader instead of polling its counters.
func processed() (func(), <-chan struct{}) {
	ch := make(chan struct{}, 4096)
	return func() { ch <- struct{}{} }, ch
}

func awaitN(t *testing.T, ch <-chan struct{}, n int, what string) {
	t.Helper()
	deadline := time.After(wait)
	for i := 0; i < n; i++ {
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: reader finished %d of %d datagrams within %v", what, i, n, wait)
		}
	}
}

func sample(ty tsp.Type, seq uint16) tsp.Packet {
	p := tsp.Packet{Type: ty, Seq: seq}
	switch {
	case ty == tsp.AdjTime:
		p.Time = tsp.Timeval{Sec: -1, Usec: 990000}
	case ty.CarriesTime():
		p.Time = tsp.Timeval{Sec: 1_700_000_000, Usec: 123456}
	case ty == tsp.Loop:
		p.HopCount = 10
	}
	return p
}

// TestExchangeEveryType: two transports send each other every type, an
// unknown type and an extension message, and each arrives as sent, with
// its source, destination, interface, network and a kernel timestamp.
func TestExchangeEveryType(t *testing.T) {
	a := listen(t, Config{Hostname: "alpha"})
	b := listen(t, Config{Hostname: "beta"})
	lo := b.Networks()[0]
	types := []tsp.Type{}
	for ty := range tsp.Type(tsp.NumTypes) {
		types = append(types, ty)
	}
	types = append(types, 200) // unknown: delivered, the caller drops it

	for _, pair := range [][2]*Transport{{a, b}, {b, a}} {
		from, to := pair[0], pair[1]
		for i, ty := range types {
			p := sample(ty, uint16(1000+i))
			before := time.Now()
			if err := from.Send(&p, addr(to)); err != nil {
				t.Fatal(err)
			}
			r := recv(t, to)
			want := p
			want.Version, want.Name = tsp.Version, from.Hostname() // filled in by Send
			if r.Packet == nil || r.Ext != nil || *r.Packet != want {
				t.Fatalf("%v: got %+v, want %+v", ty, r.Packet, want)
			}
			checkMeta(t, r, from, lo, localhost, before)
		}
		e := tsp.ExtPacket{Kind: tsp.ExtProbe, Seq: 77, Payload: []byte{1, 2, 3, 4}}
		before := time.Now()
		if err := from.SendExt(&e, addr(to)); err != nil {
			t.Fatal(err)
		}
		r := recv(t, to)
		if r.Ext == nil || r.Packet != nil || r.Ext.Kind != tsp.ExtProbe || r.Ext.Seq != 77 ||
			r.Ext.Name != from.Hostname() || !bytes.Equal(r.Ext.Payload, e.Payload) {
			t.Fatalf("ext: got %+v", r.Ext)
		}
		checkMeta(t, r, from, lo, localhost, before)
	}
	for _, tr := range []*Transport{a, b} {
		s := tr.Stats()
		for _, ty := range types {
			if s.Received[ty] != 1 || s.Sent[ty] != 1 {
				t.Errorf("%s %v: received %d, sent %d, want 1 and 1", tr.Hostname(), ty, s.Received[ty], s.Sent[ty])
			}
		}
		if s.ReceivedExt[tsp.ExtProbe] != 1 || s.SentExt[tsp.ExtProbe] != 1 || len(s.Dropped) != 0 {
			t.Errorf("%s: stats %+v", tr.Hostname(), s)
		}
	}
}

func checkMeta(t *testing.T, r Received, from *Transport, lo Network, dst netip.Addr, before time.Time) {
	t.Helper()
	if r.From != addr(from) {
		t.Errorf("From = %v, want %v", r.From, addr(from))
	}
	if r.Dst != dst {
		t.Errorf("Dst = %v, want %v", r.Dst, dst)
	}
	if r.IfIndex != lo.Index {
		t.Errorf("IfIndex = %d, want %d (%s)", r.IfIndex, lo.Index, lo.Interface)
	}
	if r.Network == nil || *r.Network != lo {
		t.Errorf("Network = %v, want %v", r.Network, lo)
	}
	// A kernel timestamp, so no monotonic reading; close to the send.
	if strings.Contains(r.At.String(), "m=") {
		t.Errorf("At = %v is the read time, not a kernel timestamp", r.At)
	}
	if d := r.At.Sub(before); d < -time.Second || d > wait {
		t.Errorf("At = %v, %v after the send", r.At, d)
	}
}

// TestPeersFanOut: in peers mode, "broadcast" reaches every peer once, and
// the peers' answers arrive on the peers network.
func TestPeersFanOut(t *testing.T) {
	var rs []*Transport
	var peers []netip.AddrPort
	for _, name := range []string{"r1", "r2", "r3"} {
		r := listen(t, Config{Hostname: name})
		rs = append(rs, r)
		peers = append(peers, addr(r))
	}
	s := listen(t, Config{Hostname: "s", Peers: peers})
	nets := s.Networks()
	if len(nets) != 1 || !nets[0].Peers || !slices.Equal(s.Peers(), peers) {
		t.Fatalf("peers mode networks %v, peers %v", nets, s.Peers())
	}
	if err := s.BroadcastAll(&tsp.Packet{Type: tsp.MasterUp, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Broadcast(&tsp.Packet{Type: tsp.Election, Seq: 2}, nets[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.BroadcastAllExt(&tsp.ExtPacket{Kind: tsp.ExtRing, Seq: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.BroadcastExt(&tsp.ExtPacket{Kind: tsp.ExtRingCtl, Seq: 4}, nets[0]); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		for _, want := range []tsp.Type{tsp.MasterUp, tsp.Election} {
			got := recv(t, r)
			if got.Packet == nil || got.Packet.Type != want || got.Packet.Name != "s" || got.From != addr(s) {
				t.Errorf("%s: got %+v from %v, want %v from s", r.Hostname(), got.Packet, got.From, want)
			}
		}
		for _, want := range []tsp.ExtKind{tsp.ExtRing, tsp.ExtRingCtl} {
			got := recv(t, r)
			if got.Ext == nil || got.Ext.Kind != want || got.Ext.Name != "s" {
				t.Errorf("%s: got ext %+v, want %v", r.Hostname(), got.Ext, want)
			}
		}
		if err := r.Send(&tsp.Packet{Type: tsp.SlaveUp}, addr(s)); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	for range rs {
		r := recv(t, s)
		if r.Network == nil || *r.Network != nets[0] {
			t.Errorf("answer from %v on network %v, want the peers network", r.From, r.Network)
		}
		got[r.Packet.Name] = true
	}
	if len(got) != 3 {
		t.Errorf("answers from %v, want r1..r3", got)
	}
	if s := s.Stats(); s.Sent[tsp.MasterUp] != 3 || s.Sent[tsp.Election] != 3 || s.SentExt[tsp.ExtRing] != 3 {
		t.Errorf("sender stats %+v", s)
	}
}

// TestBadDatagrams sends garbage from a plain socket: each is dropped and
// counted under its reason, and the transport keeps working.
func TestBadDatagrams(t *testing.T) {
	tr := listen(t, Config{Hostname: "victim"})
	raw, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(localhost, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	valid := func(ty tsp.Type) []byte {
		p := tsp.Packet{Type: ty, Version: tsp.Version, Seq: 9, Name: "raw"}
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bytes10k := func(head []byte, fill byte) []byte {
		b := bytes.Repeat([]byte{fill}, 10<<10)
		copy(b, head)
		return b
	}
	badVersion := valid(tsp.Ack)
	badVersion[1] = 7
	noNUL := valid(tsp.Ack)
	for i := 12; i < len(noNUL); i++ {
		noNUL[i] = 'x'
	}
	extShort := []byte{byte(tsp.ExtProbe), tsp.VersionExt, 0, 1, 0, 5, 0, 0} // claims 5 payload bytes
	ext, _ := (&tsp.ExtPacket{Kind: tsp.ExtProbe, Name: "raw", Payload: []byte{1}}).Marshal()

	send := []struct {
		b    []byte
		want DropReason
	}{
		{nil, DropShort},
		{valid(tsp.Ack)[:43], DropShort},
		{badVersion, DropBadVersion},
		{bytes10k([]byte{byte(tsp.Ack), 0x41}, 'A'), DropBadVersion},
		{noNUL, DropNoNUL},
		{bytes10k([]byte{byte(tsp.Ack), tsp.Version}, 'x'), DropNoNUL}, // NUL only past the 268 bytes read
		{extShort, DropBadExt},
		{append(ext, 0), DropBadExt},                       // one byte too many
		{bytes10k(ext, 0), DropBadExt},                     // cut by the read buffer
		{bytes.Repeat([]byte{0xff}, 1000), DropBadVersion}, // type 255, version 255
	}
	want := map[DropReason]uint64{}
	for _, s := range send {
		want[s.want]++
	}
	// Random datagrams, version byte above 2: bad version, or short if
	// under 44 bytes.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		b := make([]byte, rng.IntN(1500))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		r := DropShort
		if len(b) > 1 {
			b[1] = byte(3 + rng.IntN(253))
		}
		if len(b) >= tsp.MinPacketSize {
			r = DropBadVersion
		}
		send = append(send, struct {
			b    []byte
			want DropReason
		}{b, r})
		want[r]++
	}
	for _, s := range send {
		if _, err := raw.WriteToUDPAddrPort(s.b, addr(tr)); err != nil {
			t.Fatal(err)
		}
	}
	// Still receiving: a datagram longer than 268 bytes is cut, as BSD
	// cuts it, and a valid one is delivered.
	if _, err := raw.WriteToUDPAddrPort(bytes10k(valid(tsp.SlaveUp), 0), addr(tr)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.WriteToUDPAddrPort(valid(tsp.MasterReq), addr(tr)); err != nil {
		t.Fatal(err)
	}
	got := []tsp.Type{recv(t, tr).Packet.Type, recv(t, tr).Packet.Type}
	slices.Sort(got)
	if !slices.Equal(got, []tsp.Type{tsp.MasterReq, tsp.SlaveUp}) {
		t.Errorf("after the garbage: got %v, want MASTERREQ and SLAVEUP", got)
	}
	// One reader handles datagrams in arrival order, and loopback keeps
	// the order they were sent in: the garbage was counted before the two
	// valid packets above were delivered.
	if s := tr.Stats(); !mapsEqual(s.Dropped, want) {
		t.Errorf("dropped %v, want %v", s.Dropped, want)
	}
}

func mapsEqual[K comparable](a, b map[K]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestOwnEcho: our own packets are dropped unless BSD lets them through;
// LOOP, broadcast on the loopback network, comes back to us.
func TestOwnEcho(t *testing.T) {
	tr := listen(t, Config{Hostname: "self"})
	lo := tr.Networks()[0]
	if err := tr.Broadcast(&tsp.Packet{Type: tsp.MasterUp}, lo); err != nil {
		t.Fatal(err)
	}
	if err := tr.Send(&tsp.Packet{Type: tsp.AdjTime}, addr(tr)); err != nil {
		t.Fatal(err)
	}
	if err := tr.SendExt(&tsp.ExtPacket{Kind: tsp.ExtRing}, addr(tr)); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := tr.Broadcast(&tsp.Packet{Type: tsp.Loop, HopCount: 10}, lo); err != nil {
		t.Fatal(err)
	}
	r := recv(t, tr)
	if r.Packet == nil || r.Packet.Type != tsp.Loop || r.Packet.HopCount != 10 || r.Packet.Name != "self" {
		t.Fatalf("got %+v, want our LOOP", r.Packet)
	}
	checkMeta(t, r, tr, lo, lo.Broadcast, before)
	if err := tr.Send(&tsp.Packet{Type: tsp.SetDate}, addr(tr)); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, tr); r.Packet == nil || r.Packet.Type != tsp.SetDate {
		t.Fatalf("got %+v, want our SETDATE", r.Packet)
	}
	// The echoes were sent before SETDATE, so they are counted by now.
	if s := tr.Stats(); s.Dropped[DropOwnEcho] != 3 || len(s.Dropped) != 1 {
		t.Errorf("dropped %v, want 3 own echoes", s.Dropped)
	}
}

// TestClassify checks readmsg's network and echo rules for every type, on
// sources loopback cannot produce.
func TestClassify(t *testing.T) {
	eth0 := Network{Interface: "eth0", Index: 2, Addr: netip.MustParseAddr("10.0.0.5"),
		Prefix: netip.MustParsePrefix("10.0.0.0/24"), Broadcast: netip.MustParseAddr("10.0.0.255")}
	lan := &Transport{hostname: "me", networks: []Network{eth0}}
	peer := netip.MustParseAddrPort("192.0.2.7:525")
	peers := &Transport{hostname: "me", networks: []Network{{Interface: "peers", Peers: true}}, peers: []netip.AddrPort{peer}}
	ap := netip.MustParseAddrPort

	fromAny := []tsp.Type{tsp.TraceOn, tsp.TraceOff, tsp.SetDate, tsp.MSite, tsp.Test}
	fromSelf := []tsp.Type{tsp.SetDate, tsp.Test, tsp.MSite, tsp.TraceOn, tsp.TraceOff, tsp.Loop}
	classify := func(tr *Transport, b []byte, from netip.AddrPort) (Received, DropReason, error) {
		r := Received{From: from}
		reason, err := tr.classify(b, false, &r)
		return r, reason, err
	}
	for ty := range tsp.Type(30) {
		other, _ := (&tsp.Packet{Type: ty, Version: tsp.Version, Name: "other"}).Marshal()
		me, _ := (&tsp.Packet{Type: ty, Version: tsp.Version, Name: "me"}).Marshal()

		r, reason, err := classify(lan, other, ap("10.0.0.9:525"))
		if err != nil || r.Network == nil || *r.Network != eth0 {
			t.Errorf("%v from the LAN: %v %v, network %v", ty, reason, err, r.Network)
		}
		r, reason, err = classify(lan, other, ap("192.0.2.1:525"))
		if slices.Contains(fromAny, ty) {
			if err != nil || r.Network != nil {
				t.Errorf("%v from elsewhere: dropped (%v), network %v; BSD accepts it", ty, reason, r.Network)
			}
		} else if reason != DropUnknownNetwork || err == nil {
			t.Errorf("%v from elsewhere: %v %v, want unknown network", ty, reason, err)
		}
		_, reason, err = classify(lan, me, ap("10.0.0.5:525"))
		if slices.Contains(fromSelf, ty) {
			if err != nil {
				t.Errorf("%v from self: dropped (%v); BSD accepts it", ty, reason)
			}
		} else if reason != DropOwnEcho || err == nil {
			t.Errorf("%v from self: %v %v, want own echo", ty, reason, err)
		}
		// Peers mode: peers (any port) and loopback are on the peers net.
		for _, src := range []string{"192.0.2.7:525", "192.0.2.7:1023", "127.0.0.1:5000", "127.1.2.3:9"} {
			if r, reason, err := classify(peers, other, ap(src)); err != nil || r.Network == nil || !r.Network.Peers {
				t.Errorf("peers mode, %v from %s: %v %v", ty, src, reason, err)
			}
		}
		if _, reason, err := classify(peers, other, ap("198.51.100.1:525")); !slices.Contains(fromAny, ty) && reason != DropUnknownNetwork {
			t.Errorf("peers mode, %v from a stranger: %v %v", ty, reason, err)
		}
	}
	// Extension messages: same rules, but ring control (timedc's) passes
	// from anywhere and under our own name, as BSD's timedc types do.
	for _, k := range []tsp.ExtKind{tsp.ExtProbe, tsp.ExtProbeReply, tsp.ExtRing, tsp.ExtRingCtl, 99} {
		other, _ := (&tsp.ExtPacket{Kind: k, Name: "other"}).Marshal()
		me, _ := (&tsp.ExtPacket{Kind: k, Name: "me"}).Marshal()
		if _, reason, err := classify(lan, other, ap("10.0.0.9:525")); err != nil {
			t.Errorf("ext %v from the LAN: %v", k, reason)
		}
		_, reason, err := classify(lan, other, ap("192.0.2.1:525"))
		if (k == tsp.ExtRingCtl) != (err == nil) {
			t.Errorf("ext %v from elsewhere: %v %v", k, reason, err)
		}
		_, reason, err = classify(lan, me, ap("10.0.0.5:525"))
		if k == tsp.ExtRingCtl && err != nil {
			t.Errorf("ring control under our own name (timedc beside its daemon): %v %v", reason, err)
		}
		if k != tsp.ExtRingCtl && reason != DropOwnEcho {
			t.Errorf("ext %v from self: %v, want own echo", k, reason)
		}
	}
	r := Received{}
	if reason, err := lan.classify(bytes.Repeat([]byte{2, 2}, 10), true, &r); reason != DropBadExt || err == nil {
		t.Errorf("truncated extension: %v %v", reason, err)
	}
}

// TestQueueFull: a consumer that does not read loses packets, counted, and
// the reader does not block.
func TestQueueFull(t *testing.T) {
	hook, done := processed()
	q := listen(t, Config{Hostname: "q", QueueLen: 1, onDatagram: hook})
	s := listen(t, Config{Hostname: "s"})
	for seq := range uint16(5) {
		if err := s.Send(&tsp.Packet{Type: tsp.Ack, Seq: seq}, addr(q)); err != nil {
			t.Fatal(err)
		}
	}
	awaitN(t, done, 5, "5 ACKs")
	if d := q.Stats().Dropped[DropQueueFull]; d != 4 {
		t.Errorf("queue-full drops %d, want 4", d)
	}
	if st := q.Stats(); st.Received[tsp.Ack] != 1 {
		t.Errorf("received %d, want 1", st.Received[tsp.Ack])
	}
	if r := recv(t, q); r.Packet.Type != tsp.Ack {
		t.Errorf("got %+v", r.Packet)
	}
	// Room again: the next one is delivered.
	if err := s.Send(&tsp.Packet{Type: tsp.Quit}, addr(q)); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, q); r.Packet.Type != tsp.Quit {
		t.Errorf("got %+v, want QUIT", r.Packet)
	}
}

// TestCloseNoLeak: Close stops the reader, closes Packets(), may be called
// twice, and leaves no goroutine behind.
func TestCloseNoLeak(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	for range 5 {
		tr, err := Listen(Config{Port: AnyPort, Interfaces: loopbackTemplate, Hostname: "c", QueueLen: 2})
		if err != nil {
			t.Fatal(err)
		}
		for range 4 { // more than the queue holds: Close must not block on it
			if err := tr.Send(&tsp.Packet{Type: tsp.Test}, addr(tr)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		if err := tr.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		for range tr.Packets() { // closed: drains and ends
		}
		if err := tr.Send(&tsp.Packet{Type: tsp.Test}, addr(tr)); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Send after Close: %v", err)
		}
	}
	// No reader may outlive its Close. goleak retries briefly: a goroutine
	// that has finished may take a moment to leave the scheduler.
	goleak.VerifyNone(t, ignore)
}

func TestListenErrors(t *testing.T) {
	lo := loopbackTemplate
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"-n and -i", Config{Interfaces: lo, UseOnly: []netip.Prefix{p("127.0.0.0/8")}, Ignore: []netip.Prefix{p("10.0.0.0/8")}}, "cannot be combined"},
		{"nothing left", Config{Interfaces: lo, Ignore: []netip.Prefix{p("127.0.0.0/8")}}, "no network"},
		{"peers and filters", Config{Peers: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:525")}, Ignore: []netip.Prefix{p("10.0.0.0/8")}}, "peers mode"},
		{"link-local peer without zone", Config{Peers: []netip.AddrPort{netip.MustParseAddrPort("[fe80::1]:525")}}, "needs its zone"},
		{"multicast peer", Config{Peers: []netip.AddrPort{netip.MustParseAddrPort("[ff02::20d]:525")}}, "unicast"},
		{"peers and family", Config{Peers: []netip.AddrPort{netip.MustParseAddrPort("[::1]:525")}, Family: FamilyIPv6}, "peers mode"},
		{"group not link-local", Config{Interfaces: lo, Group: netip.MustParseAddr("ff05::20d")}, "link-local multicast"},
		{"peer without port", Config{Peers: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}}, "port"},
		{"port", Config{Interfaces: lo, Port: 70000}, "out of range"},
		{"IPv6 listen", Config{Interfaces: lo, ListenAddr: netip.MustParseAddr("::1")}, "not IPv4"},
		{"bad template", Config{Interfaces: "{{ nope }}"}, "template"},
	} {
		tc.cfg.Hostname = "x"
		if tc.cfg.Port == 0 {
			tc.cfg.Port = AnyPort
		}
		tr, err := Listen(tc.cfg)
		if err == nil {
			tr.Close()
			t.Errorf("%s: no error", tc.name)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not mention %q", tc.name, err, tc.want)
		}
	}
}

func TestAddressInUse(t *testing.T) {
	a := listen(t, Config{Hostname: "a"})
	_, err := Listen(Config{Port: int(a.LocalAddr().Port()), Interfaces: loopbackTemplate, Hostname: "b"})
	if !errors.Is(err, unix.EADDRINUSE) || !strings.Contains(err.Error(), "another timed") {
		t.Errorf("second daemon on the port: %v", err)
	}
}

func TestBindErrorNoPrivilege(t *testing.T) {
	cause := &net.OpError{Op: "listen", Net: "udp4", Err: os.NewSyscallError("bind", unix.EACCES)}
	err := bindError(netip.MustParseAddrPort("0.0.0.0:525"), cause)
	if !errors.Is(err, unix.EACCES) || !strings.Contains(err.Error(), "CAP_NET_BIND_SERVICE") || !strings.Contains(err.Error(), "--port") {
		t.Errorf("EACCES: %v", err)
	}
}

func TestHostname(t *testing.T) {
	long := listen(t, Config{Hostname: strings.Repeat("h", 300)})
	if n := len(long.Hostname()); n != tsp.MaxNameLen {
		t.Errorf("host name of %d bytes, want it cut to %d", n, tsp.MaxNameLen)
	}
	other := listen(t, Config{Hostname: "other"})
	if err := long.Send(&tsp.Packet{Type: tsp.MasterReq}, addr(other)); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, other); r.Packet.Name != long.Hostname() {
		t.Errorf("name %q", r.Packet.Name)
	}
	sys, _ := os.Hostname()
	def := listen(t, Config{})
	if def.Hostname() != tsp.TruncateName(sys) {
		t.Errorf("default host name %q, want %q", def.Hostname(), sys)
	}
	// An explicit name is sent as given, with an explicit version kept.
	if err := def.Send(&tsp.Packet{Type: tsp.MasterReq, Name: "given", Version: 1}, addr(other)); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, other); r.Packet.Name != "given" {
		t.Errorf("name %q, want the one given", r.Packet.Name)
	}
	if err := def.Send(&tsp.Packet{Type: tsp.MasterReq, Name: strings.Repeat("n", 256)}, addr(other)); !errors.Is(err, tsp.ErrNameTooLong) {
		t.Errorf("over-long explicit name: %v", err)
	}
}

func TestDropReasonString(t *testing.T) {
	for r := range numDropReasons + 1 {
		if r.String() == "" {
			t.Errorf("DropReason(%d) has no name", r)
		}
	}
}

// socketlessTransport is a Transport with no socket, serving one LAN, for
// tests that call receive directly.
func socketlessTransport(queue int, rl limit.Config) (*Transport, Network) {
	lan := Network{Interface: "eth0", Index: 2, Addr: netip.MustParseAddr("10.0.0.5"),
		Prefix: netip.MustParsePrefix("10.0.0.0/24"), Broadcast: netip.MustParseAddr("10.0.0.255")}
	log := logrus.New()
	log.SetOutput(io.Discard)
	return &Transport{hostname: "me", networks: []Network{lan}, packets: make(chan Received, queue), log: log,
		limiter: limit.NewLimiter(rl), dropLog: limit.NewLogger(log, limit.LogConfig{})}, lan
}

// TestReceiveWithoutControlMessages: with no timestamp or IP_PKTINFO from
// the kernel, a datagram is still delivered, stamped with the read time.
func TestReceiveWithoutControlMessages(t *testing.T) {
	tr, lan := socketlessTransport(1, limit.Config{})
	b, _ := (&tsp.Packet{Type: tsp.Ack, Version: tsp.Version, Name: "x"}).Marshal()
	now := time.Now()
	tr.receive(b, nil, tr.parse4, false, netip.MustParseAddrPort("[::ffff:10.0.0.9]:525"), now)
	r := <-tr.packets
	if !r.At.Equal(now) || r.IfIndex != 0 || r.Dst.IsValid() || r.From != netip.MustParseAddrPort("10.0.0.9:525") || *r.Network != lan {
		t.Errorf("got %+v", r)
	}
}

// TestMain fails the package if any test leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRateLimitBeforeDecode: a source over its rate is dropped before its
// datagrams are decoded or queued, and another source is still heard.
func TestRateLimitBeforeDecode(t *testing.T) {
	tr, _ := socketlessTransport(100, limit.Config{Rate: 1, Burst: 2})
	b, _ := (&tsp.Packet{Type: tsp.Ack, Version: tsp.Version, Name: "x"}).Marshal()
	now := time.Now()
	flooder, other := netip.MustParseAddrPort("10.0.0.9:525"), netip.MustParseAddrPort("10.0.0.9:526")
	for range 50 {
		tr.receive(b, nil, tr.parse4, false, flooder, now)
	}
	tr.receive(b, nil, tr.parse4, false, other, now)
	st := tr.stats.snapshot()
	if got := st.Dropped[DropRateLimited]; got != 48 {
		t.Fatalf("rate limited %d of 50 (burst 2), want 48", got)
	}
	if len(tr.packets) != 3 {
		t.Fatalf("%d delivered, want the flooder's burst of 2 and the other source's 1", len(tr.packets))
	}
}

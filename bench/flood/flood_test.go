package flood

import (
	"context"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

// The mix: the share of random bytes asked for, the rest well-formed
// packets of the types given, in turn, under names a receiver accepts.
func TestMix(t *testing.T) {
	m := NewMix(1, 50, tsp.Accept, tsp.Quit)
	random, types := 0, map[tsp.Type]int{}
	for range 10000 {
		b := m.Next(nil)
		p, err := tsp.Unmarshal(b)
		if len(b) != tsp.PacketSize || err != nil || !tsp.ValidName(p.Name) {
			random++
			continue
		}
		types[p.Type]++
	}
	if random < 4500 || random > 5500 || types[tsp.Accept] < 2000 || types[tsp.Quit] < 2000 {
		t.Fatalf("%d random, %v: want about half random, the rest ACCEPT and QUIT", random, types)
	}
	a, b := NewMix(7, 50, tsp.Accept), NewMix(7, 50, tsp.Accept)
	for range 100 {
		if string(a.Next(nil)) != string(b.Next(nil)) {
			t.Fatal("two mixes of one seed differ")
		}
	}
}

// Send keeps to its rate and its bound, and sends only to loopback.
func TestSend(t *testing.T) {
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	to := rx.LocalAddr().(*net.UDPAddr).AddrPort()
	m := NewMix(1, 100)
	r, err := Send(context.Background(), []*net.UDPConn{tx}, to, 2000, 200*time.Millisecond, m.Next)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent+r.Errors > 400 || r.Sent < 200 || r.Elapsed > time.Second {
		t.Fatalf("%+v: want at most 400 datagrams in about 200 ms", r)
	}
	if _, err := Send(context.Background(), []*net.UDPConn{tx}, netip.MustParseAddrPort("192.0.2.1:525"), 1, time.Second, m.Next); err == nil {
		t.Fatal("sent to a non-loopback address")
	}
}

func TestProc(t *testing.T) {
	mem, err := ReadMem(os.Getpid())
	if err != nil || mem.RSS == 0 || mem.Peak < mem.RSS {
		t.Fatalf("%+v, %v", mem, err)
	}
	if cpu, err := CPUSeconds(os.Getpid()); err != nil || cpu < 0 {
		t.Fatalf("%v, %v", cpu, err)
	}
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := SocketDrops(c.LocalAddr().(*net.UDPAddr).Port); err != nil {
		t.Fatal(err)
	}
}

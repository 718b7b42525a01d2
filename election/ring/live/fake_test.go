package live

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/timed-project/timed/internal/vtime"
	"github.com/timed-project/timed/tsp"
)

// fakeNet carries packets between runners on virtual time, with no socket
// and no real clock: every packet is encoded and decoded as on the wire
// and delivered, after a delay drawn from the net's seeded source, by
// calling the receiver's runner. The hosts' network clocks are the
// scheduler's, each off by a fixed offset (the synchronisation's error).
type fakeNet struct {
	t       *testing.T
	s       *vtime.Scheduler
	rng     *rand.Rand
	delay   func() time.Duration // one packet's delay
	hosts   map[netip.AddrPort]*fakeHost
	order   []netip.AddrPort // the daemons in the order they were added: broadcasts go in this order
	clients map[netip.AddrPort]func(tsp.ExtPacket)
	peers   []netip.AddrPort // peers mode: what every host's Peers says
	down    map[netip.AddrPort]bool
	dup     time.Duration             // if not 0, every packet comes again this much later
	sent    map[[2]netip.AddrPort]int // per link: packets sent so far
	seen    map[[2]netip.AddrPort]int // per link: the highest send number delivered
	reorder int                       // deliveries that overtook an earlier packet on their link
}

type fakeHost struct {
	net    *fakeNet
	addr   netip.AddrPort
	name   string
	offset time.Duration
	r      *Runner
}

func newFakeNet(t *testing.T, seed uint64) *fakeNet {
	f := &fakeNet{t: t, s: vtime.New(vtime.Epoch), rng: rand.New(rand.NewPCG(seed, 0xfa4e)),
		hosts: map[netip.AddrPort]*fakeHost{}, clients: map[netip.AddrPort]func(tsp.ExtPacket){},
		down: map[netip.AddrPort]bool{}, sent: map[[2]netip.AddrPort]int{}, seen: map[[2]netip.AddrPort]int{}}
	f.delay = func() time.Duration { return 1 + time.Duration(f.rng.Int64N(int64(DefaultUnit/2))) }
	return f
}

// addrOf is the i-th host's address. Their order is not the order in
// which they are added, so that the ring order the coordinator sorts out
// is not the order of the roll call's answers.
func addrOf(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(100 - 7*i)}), 525)
}

// add puts n daemons on the net, host0 … host(n−1), with clocks off by up
// to maxOffset either way.
func (f *fakeNet) add(n int, maxOffset time.Duration) []*fakeHost {
	var hs []*fakeHost
	for i := range n {
		h := &fakeHost{net: f, addr: addrOf(i), name: fmt.Sprintf("host%d", i)}
		if maxOffset > 0 {
			h.offset = time.Duration(f.rng.Int64N(int64(2*maxOffset))) - maxOffset
		}
		h.r = New(h, Config{Name: h.name, Rand: rand.New(rand.NewPCG(f.rng.Uint64(), uint64(i)))})
		f.hosts[h.addr] = h
		f.order = append(f.order, h.addr)
		hs = append(hs, h)
	}
	return hs
}

// client adds an endpoint that is no daemon (timedc): it gets what is sent
// to addr.
func (f *fakeNet) client(addr netip.AddrPort, got func(tsp.ExtPacket)) {
	f.clients[addr] = got
}

func (f *fakeNet) send(from netip.AddrPort, p tsp.ExtPacket, to netip.AddrPort) error {
	b, err := p.Marshal()
	if err != nil {
		f.t.Errorf("%v sent an unencodable %v: %v", from, p.Kind, err)
		return fmt.Errorf("fake net: %w", err)
	}
	delay := f.delay()
	f.carry(from, b, to, delay)
	if f.dup > 0 {
		f.carry(from, b, to, delay+f.dup)
	}
	return nil
}

// carry delivers one copy of the datagram b after delay.
func (f *fakeNet) carry(from netip.AddrPort, b []byte, to netip.AddrPort, delay time.Duration) {
	link := [2]netip.AddrPort{from, to}
	f.sent[link]++
	n := f.sent[link]
	f.s.After(delay, func() {
		if f.down[from] || f.down[to] {
			return
		}
		if n < f.seen[link] {
			f.reorder++
		}
		f.seen[link] = max(f.seen[link], n)
		e, err := tsp.UnmarshalExt(b)
		if err != nil {
			f.t.Errorf("%v → %v: %v", from, to, err)
			return
		}
		if h := f.hosts[to]; h != nil {
			h.r.Receive(from, e)
		} else if got := f.clients[to]; got != nil {
			got(e)
		}
	})
}

// run runs the net until done says so, or fails the test when nothing is
// left to run, or the virtual clock has run for limit, or a million events
// have run (a loop that does not move the clock).
func (f *fakeNet) run(limit time.Duration, done func() bool) {
	f.t.Helper()
	end := f.s.Now().Add(limit)
	for n := 0; !done(); n++ {
		next, ok := f.s.Next()
		if !ok || next.After(end) || n > 1e6 {
			f.t.Fatalf("nothing done after %v of virtual time (%d events pending)", f.s.Now().Sub(vtime.Epoch), f.s.Pending())
		}
		f.s.Step()
	}
}

func (h *fakeHost) Send(p tsp.ExtPacket, to netip.AddrPort) error { return h.net.send(h.addr, p, to) }

func (h *fakeHost) Broadcast(p tsp.ExtPacket) error {
	for _, a := range h.net.order {
		if err := h.net.send(h.addr, p, a); err != nil {
			return err
		}
	}
	return nil
}

func (h *fakeHost) Now() time.Time            { return h.net.s.Now().Add(h.offset) }
func (h *fakeHost) At(t time.Time, fn func()) { h.net.s.At(t.Add(-h.offset), fn) }
func (h *fakeHost) Peers() []netip.AddrPort   { return h.net.peers }
func (h *fakeHost) Addr() netip.AddrPort      { return h.addr }

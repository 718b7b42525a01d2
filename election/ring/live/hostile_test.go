package live

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/election/ring"
	"github.com/timed-project/timed/tsp"
)

var evil = netip.MustParseAddrPort("10.6.6.6:525")

// begin asks hs[0] to coordinate an election of alg and runs the net until
// every daemon has its node, before T0: nothing of the election has run.
// The result, once there, is in *res.
func begin(t testing.TB, f *fakeNet, hs []*fakeHost, alg string) (res *Result) {
	res = &Result{}
	hs[0].r.Elect(alg, 0, func(r Result) { *res = r })
	f.run(time.Second, func() bool {
		for _, h := range hs {
			if h.r.node == nil {
				return false
			}
		}
		return true
	})
	return res
}

func ctlFrom(t testing.TB, id uint16, c any) tsp.ExtPacket {
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return tsp.ExtPacket{Kind: tsp.ExtRingCtl, Seq: id, Name: "evil", Payload: b}
}

func ringFrom(id uint16, payload []byte) tsp.ExtPacket {
	return tsp.ExtPacket{Kind: tsp.ExtRing, Seq: id, Name: "evil", Payload: payload}
}

// TestHostilePackets feeds every daemon of an election, once all have
// their node, packets that are malformed, out of range, for another
// election or from no member, then lets the election run: nothing
// panics, each packet is counted under its reason, none is answered, no
// node is replaced, and the election elects as if they had not come.
func TestHostilePackets(t *testing.T) {
	f := newFakeNet(t, 8)
	hs := f.add(3, 0)
	answered := 0
	f.client(evil, func(tsp.ExtPacket) { answered++ })
	res := begin(t, f, hs, "lelann")
	id := hs[0].r.node.id
	now := hs[0].Now()
	members := hs[1].r.node.n
	good := func(edit func(*Ctl)) Ctl {
		c := Ctl{Op: OpStart, Algorithm: "lelann", Unit: DefaultUnit, T0: now.Add(time.Second).UnixNano(),
			Members: []Member{{Name: "host0", ID: 1}, {Name: "host1", ID: 2, Addr: "10.0.0.1:525"}, {Name: "host2", ID: 3, Addr: "10.0.0.2:525"}}}
		edit(&c)
		return c
	}
	var many []Member
	for i := range maxMembers + 1 {
		many = append(many, Member{Name: fmt.Sprint("h", i), ID: uint64(i + 1), Addr: "10.0.0.1:525"})
	}
	msg := func(from, out int, count, sent uint64, m ring.Msg) []byte {
		return appendMsg(nil, header{from: from, out: ring.Port(out), count: count, sent: time.Duration(sent)}, m)
	}
	elect := ring.Msg{Kind: ring.KElect, ID: 99}
	cases := []struct {
		name, reason string
		p            func(h *fakeHost) tsp.ExtPacket
	}{
		{"not JSON", dropBadControl, func(*fakeHost) tsp.ExtPacket {
			return tsp.ExtPacket{Kind: tsp.ExtRingCtl, Seq: id, Payload: []byte("{")}
		}},
		{"JSON array", dropBadControl, func(*fakeHost) tsp.ExtPacket { return ctlFrom(t, id, []int{1, 2}) }},
		{"unknown op", dropBadControl, func(*fakeHost) tsp.ExtPacket { return ctlFrom(t, id, Ctl{Op: "frobnicate"}) }},
		{"start: unknown algorithm", dropBadStart, func(*fakeHost) tsp.ExtPacket { return ctlFrom(t, id, good(func(c *Ctl) { c.Algorithm = "nosuch" })) }},
		{"start: no members", dropBadStart, func(*fakeHost) tsp.ExtPacket { return ctlFrom(t, id, good(func(c *Ctl) { c.Members = nil })) }},
		{"start: too many members", dropBadStart, func(*fakeHost) tsp.ExtPacket {
			return ctlFrom(t, id, good(func(c *Ctl) { c.Members = append(many, Member{Name: "host1", ID: 999}) }))
		}},
		{"start: no unit", dropBadStart, func(*fakeHost) tsp.ExtPacket { return ctlFrom(t, id, good(func(c *Ctl) { c.Unit = 0 })) }},
		{"start: unit of an hour", dropBadStart, func(*fakeHost) tsp.ExtPacket { return ctlFrom(t, id, good(func(c *Ctl) { c.Unit = time.Hour })) }},
		{"start: in 1970", dropBadStart, func(*fakeHost) tsp.ExtPacket { return ctlFrom(t, id, good(func(c *Ctl) { c.T0 = 1 })) }},
		{"start: far future", dropBadStart, func(*fakeHost) tsp.ExtPacket { return ctlFrom(t, id, good(func(c *Ctl) { c.T0 = math.MaxInt64 })) }},
		{"start: id 0", dropBadStart, func(*fakeHost) tsp.ExtPacket { return ctlFrom(t, id, good(func(c *Ctl) { c.Members[2].ID = 0 })) }},
		{"start: ids repeat", dropBadStart, func(*fakeHost) tsp.ExtPacket { return ctlFrom(t, id, good(func(c *Ctl) { c.Members[2].ID = 1 })) }},
		{"start: names repeat", dropBadStart, func(*fakeHost) tsp.ExtPacket {
			return ctlFrom(t, id, good(func(c *Ctl) { c.Members[2].Name = "host1" }))
		}},
		{"start: not us", dropBadStart, func(h *fakeHost) tsp.ExtPacket {
			return ctlFrom(t, id, good(func(c *Ctl) {
				for i := range c.Members {
					c.Members[i].Name += "x"
				}
			}))
		}},
		{"start: bad address", dropBadStart, func(*fakeHost) tsp.ExtPacket {
			return ctlFrom(t, id, good(func(c *Ctl) {
				for i := range c.Members {
					c.Members[i].Addr = "nonsense"
				}
			}))
		}},
		{"start: complete network of one", dropBadStart, func(h *fakeHost) tsp.ExtPacket {
			return ctlFrom(t, id, good(func(c *Ctl) { c.Algorithm, c.Members = "afek-gafni-sync", []Member{{Name: h.name, ID: 1}} }))
		}},
		{"ring: other election", dropStray, func(*fakeHost) tsp.ExtPacket { return ringFrom(id+1, msg(0, 1, 0, 0, elect)) }},
		{"ring: empty", dropBadMessage, func(*fakeHost) tsp.ExtPacket { return ringFrom(id, nil) }},
		{"ring: truncated header", dropBadMessage, func(*fakeHost) tsp.ExtPacket { return ringFrom(id, []byte{0, 1, 0x80}) }},
		{"ring: bad message", dropBadMessage, func(*fakeHost) tsp.ExtPacket { return ringFrom(id, []byte{0, 1, 0, 0, 99}) }},
		{"ring: no such sender", dropBadMessage, func(*fakeHost) tsp.ExtPacket { return ringFrom(id, msg(members, 1, 0, 0, elect)) }},
		{"ring: from itself", dropBadMessage, func(h *fakeHost) tsp.ExtPacket { return ringFrom(id, msg(h.r.node.me, 1, 0, 0, elect)) }},
		{"ring: no such port", dropBadMessage, func(h *fakeHost) tsp.ExtPacket { return ringFrom(id, msg((h.r.node.me+1)%members, 7, 0, 0, elect)) }},
		{"ring: send time overflows", dropBadMessage, func(h *fakeHost) tsp.ExtPacket {
			return ringFrom(id, msg((h.r.node.me+1)%members, 1, 0, math.MaxUint64, elect))
		}},
		{"ring: far ahead of its link", dropFull, func(h *fakeHost) tsp.ExtPacket {
			return ringFrom(id, msg((h.r.node.me+1)%members, 1, maxHeld, 0, elect))
		}},
		{"report: no such member", "", func(*fakeHost) tsp.ExtPacket {
			return ctlFrom(t, id, Ctl{Op: OpReport, Report: &Report{Index: 7, Elected: true}})
		}},
		{"report: negative index", "", func(*fakeHost) tsp.ExtPacket {
			return ctlFrom(t, id, Ctl{Op: OpReport, Report: &Report{Index: -1, Elected: true}})
		}},
		{"result", "", func(*fakeHost) tsp.ExtPacket { return ctlFrom(t, id, Ctl{Op: OpResult, Result: &Result{}}) }},
	}
	for _, h := range hs {
		nd := h.r.node
		want := map[string]uint64{}
		for _, c := range cases {
			h.r.Receive(evil, c.p(h))
			if c.reason != "" {
				want[c.reason]++
			}
			if got := h.r.Drops(); !maps.Equal(got, want) {
				t.Errorf("%s, after %s: drops %v, want %v", h.name, c.name, got, want)
				want = got
			}
			if h.r.node != nd {
				t.Fatalf("%s: %s replaced the node", h.name, c.name)
			}
		}
	}
	f.run(2*timeout, func() bool { return res.Algorithm != "" })
	checkElected(t, ring.LeLann, *res, hs)
	if answered != 0 {
		t.Errorf("%d packets went to the intruder", answered)
	}
	// The cases were refused for what each changed: unchanged, the START
	// is taken (an unauthenticated START is the protocol's).
	drops := hs[1].r.Drops()
	hs[1].r.Receive(evil, ctlFrom(t, id, good(func(*Ctl) {})))
	if nd := hs[1].r.node; nd.coord != evil || !maps.Equal(drops, hs[1].r.Drops()) {
		t.Errorf("the well-formed START was refused: %v", hs[1].r.Drops())
	}
}

// TestDuplicates: the network may deliver a packet twice, here the second
// copy 250 ms late, while the election runs. A second ELECT does not
// answer timedc with "already running", a second ring message is not read
// twice; and a START that comes again once the election has run does not
// restart the node.
func TestDuplicates(t *testing.T) {
	f := newFakeNet(t, 9)
	hs := f.add(4, 0)
	f.dup = 250 * time.Millisecond
	timedc := netip.MustParseAddrPort("10.9.9.9:40000")
	var results []*Result
	f.client(timedc, func(p tsp.ExtPacket) {
		if r, ok := ResultOf(p, 5); ok {
			results = append(results, r)
		}
	})
	req, err := ElectPacket("admin", 5, "chang-roberts", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.send(timedc, req, hs[0].addr); err != nil {
		t.Fatal(err)
	}
	f.run(2*timeout, func() bool { return len(results) > 0 })
	checkElected(t, ring.ChangRoberts, *results[0], hs)
	f.run(timeout, func() bool { return f.s.Pending() == 0 })
	if len(results) != 2 || results[1].Error != "" {
		// Both copies of the RESULT; no third answer ("already running").
		t.Errorf("timedc got %d results, want the one result twice", len(results))
	}
	rc := hs[0].r.coord
	start := ctlFrom(t, rc.id, Ctl{Op: OpStart, Algorithm: rc.alg.Name, Unit: rc.unit, Members: rc.members, T0: rc.t0.UnixNano()})
	for _, h := range hs[1:] {
		nd := h.r.node
		h.r.Receive(hs[0].addr, start)
		if h.r.node != nd {
			t.Errorf("%s: the START again restarted the node", h.name)
		}
	}
}

// TestTablesBounded: a member (or someone posing as one) cannot make a
// node hold more than maxHeld messages on a link, nor queue more than
// maxQueue events.
func TestTablesBounded(t *testing.T) {
	f := newFakeNet(t, 10)
	hs := f.add(2, 0)
	begin(t, f, hs, "lelann")
	h := hs[1]
	nd := h.r.node
	other := 1 - nd.me
	id := nd.id
	ahead := ring.Msg{Kind: ring.KElect, ID: 7}
	for c := range uint64(3 * maxHeld) {
		h.r.Receive(evil, ringFrom(id, appendMsg(nil, header{from: other, out: ring.Right, count: 1 + c}, ahead)))
	}
	if len(nd.held[other]) != maxHeld-1 || h.r.Drops()[dropFull] != 2*maxHeld+1 {
		t.Errorf("held %d, dropped %v; want %d held", len(nd.held[other]), h.r.Drops(), maxHeld-1)
	}
	// In order, but to be read far in the future: they stay queued.
	nd.held[other] = nil
	for c := range uint64(2 * maxQueue) {
		h.r.Receive(evil, ringFrom(id, appendMsg(nil, header{from: other, out: ring.Right, count: c, sent: time.Hour}, ahead)))
	}
	if len(nd.queue) > maxQueue {
		t.Errorf("%d events queued, at most %d", len(nd.queue), maxQueue)
	}
}

// TestRollCallBounded: answers to the roll call beyond maxMembers are
// dropped, and an election with more daemons than a START holds fails.
func TestRollCallBounded(t *testing.T) {
	f := newFakeNet(t, 11)
	hs := f.add(1, 0)
	var res *Result
	hs[0].r.Elect("chang-roberts", 0, func(r Result) { res = &r })
	id := hs[0].r.coord.id
	for i := range 3 * maxMembers {
		p := ctlFrom(t, id, Ctl{Op: OpHere})
		p.Name = fmt.Sprint("fake", i)
		hs[0].r.Receive(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 525), p)
	}
	if n := len(hs[0].r.coord.here); n != maxMembers-1 {
		t.Errorf("%d answers kept, want %d", n, maxMembers-1)
	}
	f.run(2*timeout, func() bool { return res != nil })
	if !strings.Contains(res.Error, "do not fit") {
		t.Errorf("result %+v, want too many daemons for a START", res)
	}
}

// FuzzReceive feeds a node of a running election any ring message or
// ring control payload under its election's id, then runs the election:
// no input may panic a runner or a machine.
func FuzzReceive(f *testing.F) {
	f.Add(false, appendMsg(nil, header{from: 0, out: ring.Right, count: 0}, ring.Msg{Kind: ring.KElect, ID: 3}))
	f.Add(false, appendMsg(nil, header{from: 2, out: ring.Left, count: 1, sent: 20 * time.Millisecond}, ring.Msg{Kind: ring.KProbe, ID: 9, Phase: 2, Hops: 1}))
	f.Add(false, appendMsg(nil, header{from: 0, out: ring.Right, count: 0}, ring.Msg{Kind: ring.KLeader, ID: 1}))
	f.Add(true, []byte(`{"op":"report","report":{"i":1,"elected":true,"leader":1}}`))
	f.Add(true, []byte(`{"op":"collect"}`))
	f.Add(true, []byte(`{"op":"start","alg":"franklin","unit":10000000,"members":[{"name":"host1","id":1}]}`))
	f.Fuzz(func(t *testing.T, ctl bool, payload []byte) {
		for _, alg := range []string{"hirschberg-sinclair", "afek-gafni-async"} {
			n := newFakeNet(t, 12)
			hs := n.add(3, 0)
			res := begin(t, n, hs, alg)
			p := ringFrom(hs[1].r.node.id, payload)
			if ctl {
				p.Kind = tsp.ExtRingCtl
			}
			hs[1].r.Receive(evil, p)
			n.run(2*timeout, func() bool { return res.Algorithm != "" })
		}
	})
}

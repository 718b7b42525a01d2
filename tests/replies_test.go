package tests

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp"
)

// TestReplyTableLive walks the reply table's rows that a live daemon can
// be asked without changing the network (the machine's rows are walked
// in election's tests, SETDATE in TestSetDateMovesTheNetwork): each
// request goes from a reserved port on this host, as BSD's timedc sends
// it, to the master or to a slave, and the answer must be the table's,
// with the seq echoed and, for MSITE, the master's name.
func TestReplyTableLive(t *testing.T) {
	t.Parallel()
	c := newAttackCluster(t)
	conn := listenReserved(t)
	defer conn.Close()
	ask := func(to *node, p tsp.Packet) tsp.Packet {
		t.Helper()
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.WriteToUDP(b, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: to.port}); err != nil {
			t.Fatal(err)
		}
		var r tsp.Packet
		awaitDatagram(t, conn, 5*time.Second, fmt.Sprintf("%v to %s: no answer", p.Type, to.name), func(from *net.UDPAddr, b []byte) bool {
			var err error
			r, err = tsp.Unmarshal(b)
			return err == nil && from.Port == to.port && r.Seq == p.Seq
		})
		return r
	}
	walked := 0
	for i, r := range election.Replies {
		live := r.Runtime || r.Type == tsp.MasterReq || r.Type == tsp.MSiteReq
		if !live || r.Type == tsp.SetDate {
			continue
		}
		to := c.master
		if r.Role == election.RoleSlave {
			to = c.slaves[0]
		}
		seq := uint16(700 + i)
		got := ask(to, tsp.Packet{Type: r.Type, Version: tsp.Version, Seq: seq, Name: "admin"})
		if got.Type != r.Ours {
			t.Errorf("%v to the %s: answered %v, the table says %v", r.Type, r.Role, got.Type, r.Ours)
		}
		if r.Type == tsp.MSite && got.Name != c.master.name {
			t.Errorf("MSITE to the %s names %q, want the master %q", r.Role, got.Name, c.master.name)
		}
		walked++
	}
	ask(c.master, tsp.Packet{Type: tsp.TraceOff, Version: tsp.Version, Seq: 1, Name: "admin"}) // leave tracing off
	if walked < 5 {
		t.Fatalf("walked %d rows: the table lost its live rows", walked)
	}
}

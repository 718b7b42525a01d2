package tests

import (
	"net"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

// TestTimeSourceLive: a live master answers our version-2 question for
// its time source (SOURCEREQ) with SOURCE, the question's seq echoed, its
// own name and 0 hops (it follows nobody); a slave takes the question and
// answers nothing (only masters serve a source).
func TestTimeSourceLive(t *testing.T) {
	t.Parallel()
	c := newAttackCluster(t)
	a := newAttacker(t)
	conn := a.conn
	ask := func(to *node, seq uint16) {
		t.Helper()
		b, err := (&tsp.ExtPacket{Kind: tsp.ExtSourceReq, Seq: seq, Name: "asker"}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		a.sendRaw(to, b)
	}

	ask(c.master, 31)
	awaitDatagram(t, conn, 5*time.Second, "SOURCEREQ to the master "+c.master.name+": no answer", func(from *net.UDPAddr, b []byte) bool {
		e, err := tsp.UnmarshalExt(b)
		if err != nil || from.Port != c.master.port || e.Kind != tsp.ExtSource || e.Seq != 31 {
			return false
		}
		s, err := tsp.UnmarshalSource(e.Payload)
		if err != nil || s.Name != c.master.name || s.Hops != 0 || e.Name != c.master.name {
			t.Fatalf("answer %+v, payload %+v, %v: want the master's own name, 0 hops", e, s, err)
		}
		return true
	})

	// The slave: the question, then MSITE, which the daemon takes in the
	// order they came (one queue, one loop) and answers with an ACK. No
	// SOURCE may come before that ACK.
	slave := c.slaves[0]
	ask(slave, 32)
	a.send(slave, tsp.Packet{Type: tsp.MSite, Seq: 33, Name: "asker"})
	awaitDatagram(t, conn, 5*time.Second, "MSITE to the slave "+slave.name+": no ACK", func(from *net.UDPAddr, b []byte) bool {
		if from.Port != slave.port {
			return false
		}
		if e, err := tsp.UnmarshalExt(b); err == nil && e.Kind == tsp.ExtSource {
			t.Fatalf("the slave %s answered the question: %+v", slave.name, e)
		}
		p, err := tsp.Unmarshal(b)
		return err == nil && p.Type == tsp.Ack && p.Seq == 33
	})
}

package election

import (
	"testing"

	"github.com/timed-project/timed/tsp"
)

// TestReplyTable walks the machine's rows of the reply table: a master,
// and a slave of "m" at addr(9), each receive the type from the sender the
// rule allows, and answer with the rule's reply (echoing the seq) to that
// sender, or with nothing.
func TestReplyTable(t *testing.T) {
	for _, r := range Replies {
		if r.Runtime {
			continue
		}
		t.Run(string(r.Role)+"/"+r.Type.String(), func(t *testing.T) {
			name := "a"
			if r.Role == RoleMaster && r.Type == tsp.Quit {
				// A master named below the sender would answer its
				// MASTERUP with a QUIT, and ignore (unacknowledged) the
				// sender's QUIT that crossed it: the lower name stays.
				name = "c"
			}
			h := newHarness(t, DefaultConfig(name))
			from := addr(9) // the slave's master
			switch r.Role {
			case RoleMaster:
				h.toMaster()
				from = addr(5)
				if r.Type == tsp.Quit {
					// A master obeys QUIT from a known master: this one
					// announced itself.
					h.recv(tsp.MasterUp, 1, "b", from)
				}
			case RoleSlave:
				h.toSlave()
			}
			const seq = 4321
			acts := h.recv(r.Type, seq, "b", from)
			var got tsp.Type = tsp.Any
			for _, s := range sends(acts) {
				if s.To == from && s.Packet.Seq == seq && (s.Packet.Type == tsp.Ack || s.Packet.Type == tsp.MasterAck) {
					got = s.Packet.Type
				}
			}
			if got != r.Ours {
				t.Fatalf("%v to a %s: answered %v, the table says %v (%s)", r.Type, r.Role, got, r.Ours, sendTypes(acts))
			}
		})
	}
}

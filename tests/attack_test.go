package tests

import (
	"fmt"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/timed/control"
	"github.com/timed-project/timed/tsp"
)

// The attacker harness: an outsider on the same host with nothing but an
// unprivileged UDP socket forges, replays and floods TSP at loopback
// daemons on simulated clocks. Each attack asserts that the daemons
// counted it (the drop or refusal counter rose, so it was processed),
// that no simulated clock moved, and that the election held: the same
// master, every other node its slave.

// clockHeld is how far a simulated clock may move during an attack. The
// attacks try to move clocks by 900 s to 4995 s; what moves them otherwise
// is measurement noise of the daemons' own sync rounds on a loaded
// machine (tens of µs, rarely more), which this bound leaves room for.
const clockHeld = time.Millisecond

// attacker is an unprivileged UDP socket on loopback.
type attacker struct {
	t    *testing.T
	conn *net.UDPConn
}

func newAttacker(t *testing.T) *attacker {
	t.Helper()
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &attacker{t: t, conn: conn}
}

// awaitDatagram reads conn until match takes a datagram, failing the
// test with what when none has within the bound.
func awaitDatagram(t *testing.T, conn *net.UDPConn, within time.Duration, what string, match func(from *net.UDPAddr, b []byte) bool) {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(within)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	for {
		n, from, err := conn.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if match(from, buf[:n]) {
			return
		}
	}
}

func (a *attacker) sendRaw(to *node, b []byte) {
	a.t.Helper()
	if _, err := a.conn.WriteToUDP(b, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: to.port}); err != nil {
		a.t.Fatal(err)
	}
}

func (a *attacker) send(to *node, p tsp.Packet) {
	a.t.Helper()
	if p.Version == 0 {
		p.Version = tsp.Version
	}
	b, err := p.Marshal()
	if err != nil {
		a.t.Fatal(err)
	}
	a.sendRaw(to, b)
}

// attackCluster is three daemons that may all be master, on simulated
// clocks with neither offset nor drift, settled on one master.
type attackCluster struct {
	*cluster
	master *node
	slaves []*node
}

func newAttackCluster(t *testing.T, extra ...string) *attackCluster {
	t.Helper()
	return newAttackClusterOf(t, timedBin, extra...)
}

// newAttackClusterOf is newAttackCluster running bin.
func newAttackClusterOf(t *testing.T, bin string, extra ...string) *attackCluster {
	t.Helper()
	states := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	c := newClusterOf(t, bin, make([]time.Duration, 3), func(i int, peers string) []string {
		args := []string{"-M", "--clock", "sim:offset=0us,drift=0ppm"}
		for _, e := range extra {
			args = append(args, strings.NewReplacer("$PEERS", peers, "$STATE", states[i]).Replace(e))
		}
		return args
	})
	ac := &attackCluster{cluster: c, master: c.awaitOneMaster()}
	for _, n := range c.nodes {
		if n != ac.master {
			ac.slaves = append(ac.slaves, n)
		}
	}
	ac.settle()
	return ac
}

// settle waits until each slave has taken three corrections from the
// master. The first rounds after an election are its noisiest, and the
// frequency discipline takes its first estimate whole (with 1 s rounds,
// 400 µs of noise is 400 ppm): on a loaded machine an attack begun at the
// election saw clocks move by milliseconds that no attack moved. Settled,
// an idle cluster's clocks move by microseconds in 10 s.
func (c *attackCluster) settle() {
	c.t.Helper()
	from := map[*node]*control.Status{}
	for _, s := range c.slaves {
		from[s] = c.snapshot(s)
	}
	for s, st := range from {
		c.awaitCorrections(s, st, 3)
	}
}

// awaitCorrections waits until n has received at least by more ADJTIMEs
// and SETTIMEs together than in before.
func (c *attackCluster) awaitCorrections(n *node, before *control.Status, by uint64) {
	c.t.Helper()
	count := func(st *control.Status) uint64 {
		return st.Packets[tsp.AdjTime.String()].Rx + st.Packets[tsp.SetTime.String()].Rx
	}
	c.await(fmt.Sprintf("%s receives %d corrections", n.name, by), 10*time.Second, func() (bool, string) {
		st, err := c.status(n)
		if err != nil {
			return false, err.Error()
		}
		got := count(st) - count(before)
		return got >= by, fmt.Sprintf("%d received", got)
	})
}

// offsets reads every node's simulated clock offset.
func (c *attackCluster) offsets() map[*node]time.Duration {
	c.t.Helper()
	st, err := c.statuses()
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[*node]time.Duration{}
	for n, s := range st {
		out[n] = time.Duration(math.Round(s.OffsetSecs * 1e9))
	}
	return out
}

// held asserts that no clock moved more than clockHeld since before and
// that the election is as it was. It returns the largest move.
func (c *attackCluster) held(what string, before map[*node]time.Duration) time.Duration {
	c.t.Helper()
	moved := c.clocksHeld(what, before, clockHeld)
	if m, why := c.oneMaster(); m != c.master {
		c.t.Errorf("%s: the election did not hold: %s (master was %s)", what, why, c.master.name)
	}
	return moved
}

// clocksHeld asserts that no clock moved more than bound since before,
// and returns the largest move.
func (c *attackCluster) clocksHeld(what string, before map[*node]time.Duration, bound time.Duration) time.Duration {
	c.t.Helper()
	var moved time.Duration
	for n, off := range c.offsets() {
		d := off - before[n]
		if d > bound || d < -bound {
			c.t.Errorf("%s: %s's clock moved by %v", what, n.name, d)
		}
		moved = max(moved, d, -d)
	}
	return moved
}

// awaitDrop waits until n's drop counter named key has risen by at least
// by since before (a snapshot of n's status): the attack was processed.
func (c *attackCluster) awaitDrop(n *node, key string, before *control.Status, by uint64) {
	c.t.Helper()
	c.await(fmt.Sprintf("%s counts %q", n.name, key), 10*time.Second, func() (bool, string) {
		st, err := c.status(n)
		if err != nil {
			return false, err.Error()
		}
		got := st.Drops[key] - before.Drops[key]
		return got >= by, fmt.Sprintf("%q rose by %d, want %d; drops %v", key, got, by, st.Drops)
	})
}

func (c *attackCluster) snapshot(n *node) *control.Status {
	c.t.Helper()
	st, err := c.status(n)
	if err != nil {
		c.t.Fatal(err)
	}
	return st
}

func timevalIn(t *testing.T, d time.Duration) tsp.Timeval {
	t.Helper()
	tv, err := tsp.TimeTimeval(time.Now().Add(d))
	if err != nil {
		t.Fatal(err)
	}
	return tv
}

func durationTimeval(t *testing.T, d time.Duration) tsp.Timeval {
	t.Helper()
	tv, err := tsp.DurationTimeval(d)
	if err != nil {
		t.Fatal(err)
	}
	return tv
}

// TestAttackForgedPackets: forged SETDATE, ADJTIME, SETTIME, TRACEON and
// TEST from an unprivileged socket move no clock, turn nothing on and
// start no election; a QUIT storm leaves the master in place.
func TestAttackForgedPackets(t *testing.T) {
	t.Parallel()
	c := newAttackCluster(t)
	a := newAttacker(t)
	s1, s2 := c.slaves[0], c.slaves[1]

	t.Run("SETDATE to the master", func(t *testing.T) {
		before, st := c.offsets(), c.snapshot(c.master)
		a.send(c.master, tsp.Packet{Type: tsp.SetDate, Seq: 1, Time: timevalIn(t, 900*time.Second), Name: "date"})
		c.awaitDrop(c.master, "refused admin-unprivileged", st, 1)
		c.held("forged SETDATE", before)
	})

	t.Run("ADJTIME in the master's name", func(t *testing.T) {
		before, st := c.offsets(), c.snapshot(s1)
		a.send(s1, tsp.Packet{Type: tsp.AdjTime, Seq: 2, Time: durationTimeval(t, 4995*time.Second), Name: c.master.name})
		c.awaitDrop(s1, "refused not-master-followed", st, 1)
		c.held("forged ADJTIME", before)
	})

	t.Run("SETTIME to a second slave", func(t *testing.T) {
		before, st := c.offsets(), c.snapshot(s2)
		a.send(s2, tsp.Packet{Type: tsp.SetTime, Seq: 3, Time: timevalIn(t, 990*time.Second), Name: c.master.name})
		c.awaitDrop(s2, "refused not-master-followed", st, 1)
		c.held("forged SETTIME", before)
	})

	t.Run("TRACEON and TEST from an unprivileged port", func(t *testing.T) {
		before, st := c.offsets(), c.snapshot(s1)
		a.send(s1, tsp.Packet{Type: tsp.TraceOn, Seq: 4, Name: "x"})
		a.send(s1, tsp.Packet{Type: tsp.Test, Seq: 5, Name: "x"})
		c.awaitDrop(s1, "refused admin-unprivileged", st, 2)
		after := c.snapshot(s1)
		if after.Trace || after.Elections != st.Elections {
			t.Errorf("trace %v, elections %d → %d: an unprivileged admin packet was obeyed", after.Trace, st.Elections, after.Elections)
		}
		c.held("forged TRACEON/TEST", before)
	})

	t.Run("QUIT storm", func(t *testing.T) {
		before, st := c.offsets(), c.snapshot(c.master)
		tick := time.NewTicker(100 * time.Millisecond) // 10 packets/s, as the attack that kept a network masterless
		defer tick.Stop()
		for i := range 30 {
			<-tick.C
			for _, n := range c.nodes {
				a.send(n, tsp.Packet{Type: tsp.Quit, Seq: uint16(100 + i), Name: "a"})
			}
			if m, why := c.oneMaster(); m != c.master {
				t.Fatalf("during the storm, after %d QUITs: %s", i+1, why)
			}
		}
		c.awaitDrop(c.master, "refused quit-not-master", st, 30)
		c.held("QUIT storm", before)
	})
}

// TestAttackForgedTrustedName: with -F, a MASTERUP carrying a trusted
// master's name from another address is suppressed, not followed: trust
// binds to the address.
func TestAttackForgedTrustedName(t *testing.T) {
	t.Parallel()
	c := newAttackCluster(t, "--trusted", "$PEERS") // host:port: each daemon, not its address's every port
	a := newAttacker(t)
	before := c.offsets()
	for _, s := range c.slaves {
		a.send(s, tsp.Packet{Type: tsp.MasterUp, Seq: 7, Name: c.master.name})
		a.send(s, tsp.Packet{Type: tsp.AdjTime, Seq: 8, Time: durationTimeval(t, 4995*time.Second), Name: c.master.name})
	}
	// The slaves suppress the impostor: it gets QUIT.
	awaitDatagram(t, a.conn, 10*time.Second, "the impostor was never told to QUIT", func(_ *net.UDPAddr, b []byte) bool {
		p, err := tsp.Unmarshal(b)
		return err == nil && p.Type == tsp.Quit
	})
	c.held("forged trusted name", before)
}

// TestAttackHostileName: a name holding terminal escapes is dropped at
// decode and counted; timedc status never shows it.
func TestAttackHostileName(t *testing.T) {
	t.Parallel()
	c := newAttackCluster(t)
	a := newAttacker(t)
	st := c.snapshot(c.master)
	b := make([]byte, tsp.PacketSize)
	b[0], b[1] = byte(tsp.SlaveUp), tsp.Version
	copy(b[12:], "\x1b[2J\x1b[Hpwned")
	a.sendRaw(c.master, b)
	c.awaitDrop(c.master, "bad name", st, 1)
	out, err := timedc(t, "--control-socket", c.master.socket(), "status")
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsRune(out, 0x1b) || strings.ContainsRune(out, 0x9b) || strings.Contains(out, "pwned") {
		t.Fatalf("timedc status shows the hostile name: %q", out)
	}
}

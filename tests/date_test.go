package tests

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

// setDate sends SETDATE (as date(1) does) for when to the daemon at port
// and waits for its DATEACK.
func setDate(t *testing.T, port int, when time.Time) {
	t.Helper()
	conn := listenReserved(t) // date(1) is setuid root: timed takes SETDATE only from a reserved port
	defer conn.Close()
	tv, err := tsp.TimeTimeval(when)
	if err != nil {
		t.Fatal(err)
	}
	b, err := (&tsp.Packet{Type: tsp.SetDate, Version: tsp.Version, Seq: 77, Time: tv, Name: "date-tool"}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.WriteToUDP(b, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}); err != nil {
		t.Fatal(err)
	}
	// BSD's date(1) waits 2 s for the ACK and 5 s more for DATEACK; a
	// slave's DATEACK waits for its master's, after up to 6.2 s of tries.
	awaitDatagram(t, conn, 10*time.Second, fmt.Sprintf("no DATEACK from port %d", port), func(_ *net.UDPAddr, b []byte) bool {
		p, err := tsp.Unmarshal(b)
		return err == nil && p.Type == tsp.DateAck && p.Seq == 77
	})
}

// listenReserved opens a loopback UDP socket on a free reserved port, as
// a root-owned admin tool does (the tests run as root).
func listenReserved(t *testing.T) *net.UDPConn {
	t.Helper()
	var last error
	for port := 1023; port >= 600; port-- {
		conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		if err == nil {
			return conn
		}
		last = err
	}
	t.Fatalf("no reserved port (tests run as root): %v", last)
	return nil
}

// TestSetDateMovesTheNetwork: a SETDATE 30 s ahead (beyond the 20 s step
// threshold) sent to the master is acknowledged, and the master steps its
// clock and its slaves' with it (BSD's mchgdate and spreadtime); sent to
// a slave it is forwarded to the master as SETDATEREQ, confirmed with
// DATEACK, and moves the network again. So without auth, and with auth
// optional, where date(1)'s SETDATE is unsigned (from an unsigned peer, as
// BSD's) while the SETDATEREQ and the DATEACKs between the daemons are
// signed and must echo their receiver's nonce.
func TestSetDateMovesTheNetwork(t *testing.T) {
	t.Parallel()
	keys := writeKeys(t)
	for name, args := range map[string][]string{
		"auth off":      {"-M"},
		"auth optional": {"-M", "--auth", "optional", "--auth-keys", keys, "--unsigned-peers", "127.0.0.1/32"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testSetDate(t, args)
		})
	}
}

func testSetDate(t *testing.T, args []string) {
	c := newCluster(t, make([]time.Duration, 3), func(int) []string { return args })
	master := c.awaitOneMaster()
	var slave *node
	for _, n := range c.nodes {
		if n != master {
			slave = n
		}
	}
	// The date changes between rounds, not during the master's first one
	// (50 ms after a cold start made it master): a round that a SETDATE
	// overtakes is measured across the step and discarded (its vote once
	// stepped the master back: Machine.RoundOpen, TestRoundOpen), which
	// this test of the date path leaves aside.
	c.await("the master's first round", 5*syncInterval, func() (bool, string) {
		st, err := c.statuses()
		if err != nil {
			return false, err.Error()
		}
		for _, sl := range st[master].Slaves {
			if sl.LastSeen.IsZero() {
				return false, sl.Name + " not measured yet"
			}
		}
		return len(st[master].Slaves) == len(c.nodes)-1, "slaves missing from the master's list"
	})
	moved := func(by time.Duration) func() (bool, string) {
		return func() (bool, string) {
			st, err := c.statuses()
			if err != nil {
				return false, err.Error()
			}
			for n, s := range st {
				if off := time.Duration(s.OffsetSecs * 1e9); (off - by).Abs() > time.Second {
					return false, fmt.Sprintf("%s is %v off the kernel clock, want about %v", n.name, off, by)
				}
			}
			return true, ""
		}
	}
	setDate(t, master.port, time.Now().Add(30*time.Second))
	c.await("every clock 30 s ahead after SETDATE to the master", 5*syncInterval+5*time.Second, moved(30*time.Second))
	setDate(t, slave.port, time.Now().Add(60*time.Second))
	c.await("every clock 60 s ahead after SETDATE to a slave", 5*syncInterval+5*time.Second, moved(60*time.Second))
	if m := c.awaitOneMaster(); m == nil {
		t.Fatal("no master after the date changes")
	}
	c.noAuthDrops()
}

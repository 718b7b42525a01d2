//go:build linux

package sockopt

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

func TestTxTimestampGarbage(t *testing.T) {
	if _, ok := TxTimestamp([]byte{1, 2, 3}); ok {
		t.Error("TxTimestamp found a timestamp in garbage")
	}
	if _, ok := TxTimestamp(nil); ok {
		t.Error("TxTimestamp found a timestamp in no control messages")
	}
}

func loopbackPair(t *testing.T) (tx, rx *net.UDPConn) {
	t.Helper()
	lo := net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0"))
	rx, err := net.ListenUDP("udp4", lo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rx.Close() })
	tx, err = net.ListenUDP("udp4", lo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Close() })
	return tx, rx
}

func newStamper(t *testing.T, c *net.UDPConn) *TxStamper {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewTxStamper(rc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Each stamped write on loopback gets its own transmit timestamp: between
// the clock readings around the write, and in order.
func TestTxStamperLoopback(t *testing.T) {
	tx, rx := loopbackPair(t)
	s := newStamper(t, tx)
	to := rx.LocalAddr().(*net.UDPAddr).AddrPort()
	var last time.Time
	for i := range 20 {
		before := time.Now()
		at, ok, err := s.Write(func(oob []byte) error {
			_, _, err := tx.WriteMsgUDPAddrPort([]byte{byte(i)}, oob, to)
			return err
		})
		after := time.Now()
		if err != nil || !ok {
			t.Fatalf("write %d: stamp %v, %v", i, ok, err)
		}
		if at.Before(before) || at.After(after) || !at.After(last) {
			t.Fatalf("write %d: stamp %v outside [%v, %v] or not after %v", i, at, before, after, last)
		}
		last = at
	}
}

// Where stamps do not come (here: nothing is written), the stamper stops
// asking after maxTxMisses, and asks again every txRetryEvery-th write.
func TestTxStamperGivesUp(t *testing.T) {
	tx, _ := loopbackPair(t)
	s := newStamper(t, tx)
	asked := 0
	for range 2 * txRetryEvery {
		_, ok, err := s.Write(func(oob []byte) error {
			if oob != nil {
				asked++
			}
			return nil
		})
		if ok || err != nil {
			t.Fatalf("a stamp for nothing written: %v, %v", ok, err)
		}
	}
	if want := maxTxMisses + 2; asked != want {
		t.Fatalf("asked for %d stamps in %d writes, want %d", asked, 2*txRetryEvery, want)
	}
}

func FuzzTxTimestamp(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, oob []byte) {
		if at, ok := TxTimestamp(oob); ok && at.IsZero() {
			t.Fatal("ok with a zero time")
		}
		_, _ = RxTimestamp(oob)
	})
}

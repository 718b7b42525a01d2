package sockopt

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestRxTimestampGarbage(t *testing.T) {
	if _, ok := RxTimestamp([]byte{1, 2, 3}); ok {
		t.Error("RxTimestamp found a timestamp in garbage")
	}
	if _, ok := RxTimestamp(nil); ok {
		t.Error("RxTimestamp found a timestamp in no control messages")
	}
}

// TestRxTimestampLoopback: a socket with receive timestamps enabled gets
// the kernel's arrival time (no monotonic reading) with each datagram.
func TestRxTimestampLoopback(t *testing.T) {
	lo := net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0"))
	rx, err := net.ListenUDP("udp4", lo)
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	if err := EnableRxTimestamps(rx); err != nil {
		t.Fatal(err)
	}
	tx, err := net.ListenUDP("udp4", lo)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	before := time.Now()
	if _, err := tx.WriteToUDPAddrPort([]byte("x"), rx.LocalAddr().(*net.UDPAddr).AddrPort()); err != nil {
		t.Fatal(err)
	}
	if err := rx.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf, oob := make([]byte, 16), make([]byte, unix.CmsgSpace(16))
	_, oobn, _, _, err := rx.ReadMsgUDPAddrPort(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	at, ok := RxTimestamp(oob[:oobn])
	if !ok {
		t.Fatalf("no timestamp in %d bytes of control messages", oobn)
	}
	if strings.Contains(at.String(), "m=") {
		t.Errorf("timestamp %v has a monotonic reading", at)
	}
	if d := at.Sub(before); d < -time.Second || d > 10*time.Second {
		t.Errorf("timestamp %v is %v after the send", at, d)
	}
}

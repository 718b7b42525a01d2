package sockopt

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unsafe"

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

func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

// ControlMessage finds a message after others, and stops at a partial
// header (which it must not read past) or a length beyond the buffer.
func TestControlMessage(t *testing.T) {
	first := cmsg(unix.SOL_SOCKET, unix.SO_RXQ_OVFL, []byte{7, 0, 0, 0})
	second := cmsg(unix.SOL_IP, unix.IP_PKTINFO, make([]byte, 12))
	oob := append(append([]byte(nil), first...), second...)
	if d, ok := ControlMessage(oob, unix.SOL_IP, unix.IP_PKTINFO); !ok || len(d) != 12 {
		t.Fatalf("second message: %v, %d bytes", ok, len(d))
	}
	if d, ok := ControlMessage(oob, unix.SOL_SOCKET, unix.SO_RXQ_OVFL); !ok || d[0] != 7 {
		t.Fatalf("first message: %v, %v", ok, d)
	}
	if _, ok := ControlMessage(oob, unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS); ok {
		t.Fatal("found a message not there")
	}
	for n := 1; n < unix.SizeofCmsghdr; n++ {
		if _, ok := ControlMessage(append(first[:len(first):len(first)], second[:n]...), unix.SOL_IP, unix.IP_PKTINFO); ok {
			t.Fatalf("found a message in a %d-byte partial header", n)
		}
	}
	if _, ok := ControlMessage(second[:unix.CmsgLen(12)-1], unix.SOL_IP, unix.IP_PKTINFO); ok {
		t.Fatal("found a message longer than the buffer")
	}
}

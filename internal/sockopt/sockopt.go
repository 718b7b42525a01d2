// Package sockopt holds the few socket options that both the TSP transport
// (tsp/udp) and the clock probe's own sockets (clocksync) set, so that
// neither imports the other for them: kernel receive timestamps and
// boolean SOL_SOCKET options.
package sockopt

import (
	"encoding/binary"
	"net"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// EnableRxTimestamps asks the kernel for SCM_TIMESTAMPNS on every datagram
// the socket receives: the arrival time as close to the wire as the kernel
// offers, free of the reading goroutine's scheduling delay. The transport
// and the clock probe's own sockets use it.
func EnableRxTimestamps(conn *net.UDPConn) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	return Enable(rc, unix.SO_TIMESTAMPNS)
}

// Enable turns a SOL_SOCKET option on for a raw socket.
func Enable(rc syscall.RawConn, opt int) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt, 1)
	}); err != nil {
		return err
	}
	return serr
}

// RxTimestamp returns the SCM_TIMESTAMPNS timestamp among a datagram's
// control messages, if there is one. Its data is a struct timespec: two
// native longs (two int32 on 32-bit platforms).
func RxTimestamp(oob []byte) (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET || m.Header.Type != unix.SCM_TIMESTAMPNS {
			continue
		}
		return timespec(m.Data)
	}
	return time.Time{}, false
}

// timespec decodes the first struct timespec of d: two native longs.
func timespec(d []byte) (time.Time, bool) {
	switch sz := int(unsafe.Sizeof(unix.Timespec{})); {
	case len(d) < sz:
		return time.Time{}, false
	case sz == 16:
		return time.Unix(int64(binary.NativeEndian.Uint64(d)), int64(binary.NativeEndian.Uint64(d[8:]))), true
	default:
		return time.Unix(int64(int32(binary.NativeEndian.Uint32(d))), int64(int32(binary.NativeEndian.Uint32(d[4:])))), true
	}
}

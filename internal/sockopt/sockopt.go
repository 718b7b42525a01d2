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
	if d, ok := ControlMessage(oob, unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS); ok {
		return timespec(d)
	}
	return time.Time{}, false
}

// ControlMessage returns the data of the first control message of level
// and typ among oob's, without allocating: it runs on every datagram
// received, a flood included. Malformed control messages end the search.
func ControlMessage(oob []byte, level, typ int32) ([]byte, bool) {
	// ParseOneSocketControlMessage reads a whole header without checking
	// that b holds one.
	for len(oob) >= unix.SizeofCmsghdr {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return nil, false
		}
		if h.Level == level && h.Type == typ {
			return data, true
		}
		oob = rest
	}
	return nil, false
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

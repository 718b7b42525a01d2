package udp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"github.com/timed-project/timed/internal/sockopt"
	"golang.org/x/sys/unix"
)

// DefaultReceiveBuffer is the receive buffer the transport asks for. The
// kernel charges each datagram its buffer's true size, not its length: a
// 44-byte SLAVEUP costs about 800 bytes on loopback and up to 4 KiB from
// some NICs. Asked 2 MiB, Linux grants twice that (the doubling it applies
// for its bookkeeping): room for BSD's NHOSTS (1013) answers at 4 KiB,
// which arrive at once when the fast profile's answer delay spreads them
// over a few milliseconds, whatever the reader's scheduling.
const DefaultReceiveBuffer = 2 << 20

// sizeReceiveBuffer asks for want bytes of receive buffer: SO_RCVBUFFORCE
// first, which root (CAP_NET_ADMIN) may set past net.core.rmem_max, then
// SO_RCVBUF, which the kernel caps there. It returns the size granted, as
// the kernel reports it.
func sizeReceiveBuffer(rc syscall.RawConn, want int) (granted int, forced bool, err error) {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, want); serr == nil {
			forced = true
		} else if errors.Is(serr, unix.EPERM) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, want)
		}
		if serr != nil {
			return
		}
		granted, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
	}); err != nil {
		return 0, false, err
	}
	if serr != nil {
		return 0, false, fmt.Errorf("receive buffer of %d bytes: %w", want, serr)
	}
	return granted, forced, nil
}

// rxqOverflow returns the SO_RXQ_OVFL count among a datagram's control
// messages: how many datagrams the kernel has dropped on this socket, for
// a full receive buffer, since it was opened.
func rxqOverflow(oob []byte) (uint32, bool) {
	if d, ok := sockopt.ControlMessage(oob, unix.SOL_SOCKET, unix.SO_RXQ_OVFL); ok && len(d) >= 4 {
		return binary.NativeEndian.Uint32(d), true
	}
	return 0, false
}

//go:build linux

package clocksync

import (
	"encoding/binary"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

func enableRxTimestamps(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return err
	}
	return serr
}

// rxTimestamp finds SCM_TIMESTAMPNS in control messages.
func rxTimestamp(oob []byte) (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET || m.Header.Type != unix.SCM_TIMESTAMPNS {
			continue
		}
		switch len(m.Data) { // struct timespec: two C longs
		case 16:
			sec, nsec := binary.NativeEndian.Uint64(m.Data), binary.NativeEndian.Uint64(m.Data[8:])
			return time.Unix(int64(sec), int64(nsec)), true
		case 8:
			sec, nsec := binary.NativeEndian.Uint32(m.Data), binary.NativeEndian.Uint32(m.Data[4:])
			return time.Unix(int64(int32(sec)), int64(int32(nsec))), true
		}
	}
	return time.Time{}, false
}

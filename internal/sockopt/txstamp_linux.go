//go:build linux

package sockopt

import (
	"encoding/binary"
	"errors"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sofOptRxFilter (Linux 6.12) keeps the software reporting flag from adding
// SCM_TIMESTAMPING to received datagrams: they carry SCM_TIMESTAMPNS
// already. Older kernels refuse it; they are asked again without it.
const sofOptRxFilter = 0x20000

// EnableTxTimestamps prepares a socket for software transmit timestamps
// (SO_TIMESTAMPING): it sets only the reporting flags, so no datagram is
// stamped unless its write carries TxCmsg. Stamps come back on the
// socket's error queue, without the datagram (OPT_TSONLY: cheaper, and
// allowed to unprivileged processes whatever net.core.tstamp_allow_data).
func EnableTxTimestamps(rc syscall.RawConn) error {
	base := unix.SOF_TIMESTAMPING_SOFTWARE | unix.SOF_TIMESTAMPING_OPT_TSONLY
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPING, base|sofOptRxFilter)
		if serr != nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPING, base)
		}
	}); err != nil {
		return err
	}
	return serr
}

// TxCmsg is the control message that asks the kernel for a software
// transmit timestamp of the one datagram written with it (Linux ≥ 4.13).
var TxCmsg = func() []byte {
	b := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.SOL_SOCKET, unix.SO_TIMESTAMPING
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(b[unix.CmsgLen(0):], unix.SOF_TIMESTAMPING_TX_SOFTWARE)
	return b
}()

// txPoll is how long ReadTxTimestamp waits in one poll: a software stamp
// is taken when the driver queues the datagram, within the write on
// loopback and veth, a softirq later behind a busy qdisc.
const txPoll = time.Millisecond

// ReadTxTimestamp reads the error queue for the transmit timestamp of a
// datagram written at or after since (real time), waiting up to wait.
// Older stamps found on the way (of writes whose reader gave up) are
// dropped. The caller serialises stamped writes on the socket, so the
// first stamp not before since is its own.
func ReadTxTimestamp(rc syscall.RawConn, since time.Time, wait time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(wait)
	var data [64]byte
	oob := make([]byte, 256)
	for {
		var at time.Time
		found, empty := false, false
		err := rc.Control(func(fd uintptr) {
			for !found && !empty {
				_, oobn, _, _, err := unix.Recvmsg(int(fd), data[:], oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
				switch {
				case errors.Is(err, unix.EINTR):
				case err != nil:
					empty = true
				default:
					if t, ok := TxTimestamp(oob[:oobn]); ok && !t.Before(since) {
						at, found = t, true
					}
				}
			}
		})
		if err != nil || found {
			return at, found
		}
		left := time.Until(deadline)
		if left <= 0 {
			return time.Time{}, false
		}
		ms := int(min(left, txPoll) / time.Millisecond)
		_ = rc.Control(func(fd uintptr) {
			// Events 0: poll reports POLLERR, a non-empty error queue.
			_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd)}}, max(ms, 1))
		})
	}
}

// TxTimestamp returns the software transmit timestamp in an error-queue
// message's control messages: SCM_TIMESTAMPING's first timespec, when the
// extended error beside it (if any) says it is a send stamp.
func TxTimestamp(oob []byte) (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	var at time.Time
	stamp, send := false, true
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPING:
			at, stamp = timespec(m.Data)
		case m.Header.Level == unix.SOL_IP && m.Header.Type == unix.IP_RECVERR,
			m.Header.Level == unix.SOL_IPV6 && m.Header.Type == unix.IPV6_RECVERR:
			if len(m.Data) >= int(unsafe.Sizeof(unix.SockExtendedErr{})) {
				ee := (*unix.SockExtendedErr)(unsafe.Pointer(&m.Data[0]))
				send = ee.Origin == unix.SO_EE_ORIGIN_TIMESTAMPING && ee.Info == unix.SCM_TSTAMP_SND
			}
		}
	}
	if !stamp || !send || at.IsZero() || at.Unix() == 0 {
		return time.Time{}, false
	}
	return at, true
}

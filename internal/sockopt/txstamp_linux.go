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

// enableTxTimestamps prepares a socket for software transmit timestamps
// (SO_TIMESTAMPING): it sets only the reporting flags, so no datagram is
// stamped unless its write carries txCmsg. Stamps come back on the
// socket's error queue, without the datagram (OPT_TSONLY: cheaper, and
// allowed to unprivileged processes whatever net.core.tstamp_allow_data).
func enableTxTimestamps(rc syscall.RawConn) error {
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

// TxStamper writes datagrams asking for their transmit timestamps and
// reads them back, on one socket. Where stamps stop coming (a driver that
// takes none), waiting for each would cost every send txWait: after
// maxTxMisses misses in a row it asks only every txRetryEvery-th write.
// The caller serialises Write, so that the first stamp after a write is
// its own.
type TxStamper struct {
	rc     syscall.RawConn
	misses int
	writes int
	// The error-queue read's buffers, reused: Write is serialised.
	data [64]byte
	oob  [256]byte
}

const (
	txWait       = 2 * time.Millisecond
	maxTxMisses  = 8
	txRetryEvery = 64
)

// NewTxStamper enables transmit timestamps on the socket.
func NewTxStamper(rc syscall.RawConn) (*TxStamper, error) {
	if err := enableTxTimestamps(rc); err != nil {
		return nil, err
	}
	return &TxStamper{rc: rc}, nil
}

// Write calls write with the control messages to pass to the socket's
// sendmsg, and returns the datagram's transmit timestamp (real time), ok
// false when there is none.
func (s *TxStamper) Write(write func(oob []byte) error) (time.Time, bool, error) {
	s.writes++
	if s.misses >= maxTxMisses && s.writes%txRetryEvery != 0 {
		return time.Time{}, false, write(nil)
	}
	before := time.Now()
	if err := write(txCmsg); err != nil {
		return time.Time{}, false, err
	}
	at, ok := s.readTxTimestamp(before, txWait)
	if ok {
		s.misses = 0
	} else {
		s.misses = min(s.misses+1, maxTxMisses)
	}
	return at, ok, nil
}

// txCmsg is the control message that asks the kernel for a software
// transmit timestamp of the one datagram written with it (Linux ≥ 4.13).
var txCmsg = func() []byte {
	b := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.SOL_SOCKET, unix.SO_TIMESTAMPING
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(b[unix.CmsgLen(0):], unix.SOF_TIMESTAMPING_TX_SOFTWARE)
	return b
}()

// txPoll is how long readTxTimestamp waits in one poll: a software stamp
// is taken when the driver queues the datagram, within the write on
// loopback and veth, a softirq later behind a busy qdisc.
const txPoll = time.Millisecond

// readTxTimestamp reads the error queue for the transmit timestamp of a
// datagram written at or after since (real time), waiting up to wait.
// Older stamps found on the way (of writes whose reader gave up) are
// dropped. The caller serialises stamped writes on the socket, so the
// first stamp not before since is its own.
func (s *TxStamper) readTxTimestamp(since time.Time, wait time.Duration) (time.Time, bool) {
	rc, data, oob := s.rc, s.data[:], s.oob[:]
	deadline := time.Now().Add(wait)
	for {
		var at time.Time
		found, empty := false, false
		err := rc.Control(func(fd uintptr) {
			for !found && !empty {
				_, oobn, _, _, err := unix.Recvmsg(int(fd), data, oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
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
//
// It walks the messages in place, as ControlMessage does: it runs after
// every stamped send.
func TxTimestamp(oob []byte) (time.Time, bool) {
	var at time.Time
	stamp, send := false, true
	for len(oob) >= unix.SizeofCmsghdr {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return time.Time{}, false
		}
		switch {
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPING:
			at, stamp = timespec(data)
		case h.Level == unix.SOL_IP && h.Type == unix.IP_RECVERR,
			h.Level == unix.SOL_IPV6 && h.Type == unix.IPV6_RECVERR:
			// struct sock_extended_err: errno u32, origin u8, type u8,
			// code u8, pad u8, info u32, data u32.
			if len(data) >= 16 {
				send = data[4] == unix.SO_EE_ORIGIN_TIMESTAMPING && binary.NativeEndian.Uint32(data[8:]) == unix.SCM_TSTAMP_SND
			}
		}
		oob = rest
	}
	if !stamp || !send || at.IsZero() || at.Unix() == 0 {
		return time.Time{}, false
	}
	return at, true
}

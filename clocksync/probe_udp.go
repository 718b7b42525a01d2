package clocksync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/timed-project/timed/internal/sockopt"
	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/auth"
)

// UDPConn is a PacketConn over a UDP socket. On Linux it asks the kernel
// for receive timestamps (SO_TIMESTAMPNS) and reports each datagram's
// arrival (At) from them. Datagrams that are not extension packets are skipped.
type UDPConn struct {
	c       *net.UDPConn
	stamped bool
	// tx reads transmit timestamps (nil: the kernel gives none); txMu
	// serialises stamped writes, so that the first stamp after a write
	// is its own.
	tx   *sockopt.TxStamper
	txMu sync.Mutex
	// Signer, when set, signs every packet written (for daemons with
	// --auth); answers are read with any auth trailer cut off.
	Signer *auth.Signer
}

// ListenUDP opens a UDPConn on addr (e.g. "127.0.0.1:0").
func ListenUDP(addr string) (*UDPConn, error) {
	la, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	c, err := net.ListenUDP("udp", la)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return NewUDPConn(c), nil
}

// NewUDPConn wraps an open UDP socket, enabling kernel receive timestamps
// where the platform has them.
func NewUDPConn(c *net.UDPConn) *UDPConn {
	u := &UDPConn{c: c, stamped: sockopt.EnableRxTimestamps(c) == nil}
	if rc, err := c.SyscallConn(); err == nil {
		u.tx, _ = sockopt.NewTxStamper(rc) // nil: user-space stamps
	}
	return u
}

// LocalAddr is the socket's address.
func (u *UDPConn) LocalAddr() netip.AddrPort { return u.c.LocalAddr().(*net.UDPAddr).AddrPort() }

// Close closes the socket.
func (u *UDPConn) Close() error { return u.c.Close() }

// WriteExt sends an extension packet.
func (u *UDPConn) WriteExt(p tsp.ExtPacket, to netip.AddrPort) error {
	b, err := u.encode(p)
	if err != nil {
		return err
	}
	_, err = u.c.WriteToUDPAddrPort(b, to)
	return err
}

func (u *UDPConn) encode(p tsp.ExtPacket) ([]byte, error) {
	b, err := p.Marshal()
	if err != nil {
		return nil, err
	}
	return u.Signer.Sign(b, time.Now())
}

// WriteExtStamped sends an extension packet and returns the kernel's
// software transmit timestamp of it, if the kernel gives one.
func (u *UDPConn) WriteExtStamped(p tsp.ExtPacket, to netip.AddrPort) (time.Time, bool, error) {
	if u.tx == nil {
		return time.Time{}, false, u.WriteExt(p, to)
	}
	b, err := u.encode(p)
	if err != nil {
		return time.Time{}, false, err
	}
	u.txMu.Lock()
	defer u.txMu.Unlock()
	return u.tx.Write(func(oob []byte) error {
		_, _, err := u.c.WriteMsgUDPAddrPort(b, oob, to)
		return err
	})
}

// readPoll bounds each blocking read so ReadExt notices ctx.
const readPoll = 100 * time.Millisecond

// ReadExt returns the next extension datagram.
func (u *UDPConn) ReadExt(ctx context.Context) (Datagram, error) {
	buf := make([]byte, 2048)
	oob := make([]byte, 128)
	for {
		if err := ctx.Err(); err != nil {
			return Datagram{}, err
		}
		dl := time.Now().Add(readPoll)
		if d, ok := ctx.Deadline(); ok && d.Before(dl) {
			dl = d
		}
		if err := u.c.SetReadDeadline(dl); err != nil {
			return Datagram{}, err
		}
		n, oobn, _, from, err := u.c.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return Datagram{}, err
		}
		b := buf[:n]
		if !tsp.IsExt(b) {
			continue
		}
		if pk, _, err := auth.Split(b); err == nil {
			b = pk
		}
		p, err := tsp.UnmarshalExt(b)
		if err != nil {
			continue
		}
		d := Datagram{Packet: p, From: from}
		if u.stamped {
			// Datagram.arrival judges the stamp's age where it is used.
			d.At, _ = sockopt.RxTimestamp(oob[:oobn])
		}
		return d, nil
	}
}

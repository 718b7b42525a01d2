//go:build e2e && linux

package e2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// This kernel has no netem qdisc (CONFIG_NET_SCH_NETEM is not set, and it
// has no loadable modules), so `tc qdisc add … netem` fails with
// "Specified qdisc kind is unknown". The closest honest alternative, in
// each container's network namespace:
//
//   - loss: iptables' statistic match on the receiving side,
//     `INPUT -i eth0 -m statistic --mode random --probability 0.2 -j DROP`:
//     every packet into a container is dropped with probability 0.2,
//     independently per receiver (a broadcast is lost for some hosts and
//     not others), as netem on the host end of each veth would;
//   - jitter: `OUTPUT -o eth0 -j NFQUEUE` hands every packet a container
//     sends to the delayer below (nfnetlink_queue, from the host, one
//     netlink socket opened inside each container's namespace), which
//     releases it after a delay drawn uniformly from [0, 10 ms]: netem's
//     `delay 5ms 5ms`, reordering included. It must be the sender's side:
//     the daemons time a packet's arrival by its kernel receive timestamp
//     (SO_TIMESTAMPNS), taken before the INPUT hook, so a delay there
//     would slow delivery but be invisible to every measurement; on the
//     sender's OUTPUT, before the wire, it is network delay to both ends
//     (they take send times in user space). One difference from netem on
//     each veth remains: a broadcast is delayed once, the same for all its
//     receivers. --queue-bypass lets packets through should the delayer be
//     gone.

const (
	nfqQueue      = 525
	jitterMax     = 10 * time.Millisecond
	nfnlSubsysQ   = 3
	nfqMsgPacket  = 0
	nfqMsgVerdict = 1
	nfqMsgConfig  = 2
	nfqCfgCmd     = 1
	nfqCfgParams  = 2
	nfqCmdBind    = 1
	nfqCopyMeta   = 1
	nfqaPacketHdr = 1
	nfqaVerdict   = 2
	nfAccept      = 1
)

// delayer holds queued packets for a random delay, in several network
// namespaces.
type delayer struct {
	stop    atomic.Bool
	wg      sync.WaitGroup
	delayed atomic.Uint64
	mu      sync.Mutex
	errs    []error
}

// attach opens a queue socket in the namespace of pid and serves it.
func (d *delayer) attach(pid string) error {
	fd, err := nfqSocketIn(pid)
	if err != nil {
		return err
	}
	d.wg.Add(1)
	go d.serve(fd)
	return nil
}

// nfqSocketIn creates the netlink socket on a thread moved into the
// namespace; the thread is never moved back (it ends with its goroutine),
// the socket stays in that namespace.
func nfqSocketIn(pid string) (int, error) {
	type res struct {
		fd  int
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the runtime ends this thread with the goroutine
		ns, err := os.Open("/proc/" + pid + "/ns/net")
		if err != nil {
			ch <- res{-1, err}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- res{-1, fmt.Errorf("setns %s: %w", pid, err)}
			return
		}
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err != nil {
			ch <- res{-1, fmt.Errorf("netlink socket: %w", err)}
			return
		}
		ch <- res{fd, nil}
	}()
	r := <-ch
	if r.err != nil {
		return -1, r.err
	}
	fd := r.fd
	fail := func(err error) (int, error) {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fail(fmt.Errorf("bind netlink: %w", err))
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fail(err)
	}
	bind := []byte{nfqCmdBind, 0, 0, 0} // command, pad, pf (unused since 3.8)
	if err := nfqRequest(fd, nfqMsgConfig, attr(nfqCfgCmd, bind)); err != nil {
		return fail(fmt.Errorf("bind queue %d: %w", nfqQueue, err))
	}
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params, 0) // copy range: no payload
	params[4] = nfqCopyMeta
	if err := nfqRequest(fd, nfqMsgConfig, attr(nfqCfgParams, params)); err != nil {
		return fail(fmt.Errorf("queue %d copy mode: %w", nfqQueue, err))
	}
	return fd, nil
}

func attr(typ uint16, data []byte) []byte {
	n := 4 + len(data)
	b := make([]byte, (n+3)&^3)
	binary.NativeEndian.PutUint16(b, uint16(n))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[4:], data)
	return b
}

func nfqMessage(msg uint16, flags uint16, attrs ...[]byte) []byte {
	b := make([]byte, 20)
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysQ<<8|msg)
	binary.NativeEndian.PutUint16(b[6:], unix.NLM_F_REQUEST|flags)
	b[16] = unix.AF_UNSPEC
	b[17] = 0 // NFNETLINK_V0
	binary.BigEndian.PutUint16(b[18:], nfqQueue)
	for _, a := range attrs {
		b = append(b, a...)
	}
	binary.NativeEndian.PutUint32(b, uint32(len(b)))
	return b
}

// nfqRequest sends a configuration message and waits for its ACK.
func nfqRequest(fd int, msg uint16, attrs ...[]byte) error {
	if err := unix.Sendto(fd, nfqMessage(msg, unix.NLM_F_ACK, attrs...), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	if n < 20 || binary.NativeEndian.Uint16(buf[4:]) != unix.NLMSG_ERROR {
		return fmt.Errorf("unexpected answer (%d bytes)", n)
	}
	if code := int32(binary.NativeEndian.Uint32(buf[16:])); code != 0 {
		return unix.Errno(-code)
	}
	return nil
}

func (d *delayer) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs = append(d.errs, err)
}

func (d *delayer) serve(fd int) {
	defer d.wg.Done()
	var pending sync.WaitGroup
	defer func() {
		pending.Wait()
		unix.Close(fd)
	}()
	buf := make([]byte, 1<<16)
	for !d.stop.Load() {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOBUFS) {
				continue
			}
			d.fail(fmt.Errorf("nfqueue receive: %w", err))
			return
		}
		for b := buf[:n]; len(b) >= 16; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < 16 || l > len(b) {
				break
			}
			msg := b[:l]
			b = b[(l+3)&^3:]
			if binary.NativeEndian.Uint16(msg[4:]) != nfnlSubsysQ<<8|nfqMsgPacket || len(msg) < 20 {
				continue
			}
			id, ok := packetID(msg[20:])
			if !ok {
				continue
			}
			delay := rand.N(jitterMax + 1)
			pending.Add(1)
			time.AfterFunc(delay, func() {
				defer pending.Done()
				v := make([]byte, 8)
				binary.BigEndian.PutUint32(v, nfAccept)
				binary.BigEndian.PutUint32(v[4:], id)
				if err := unix.Sendto(fd, nfqMessage(nfqMsgVerdict, 0, attr(nfqaVerdict, v)), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
					d.fail(fmt.Errorf("nfqueue verdict: %w", err))
					return
				}
				d.delayed.Add(1)
			})
		}
	}
}

// packetID finds NFQA_PACKET_HDR's packet id among the attributes.
func packetID(attrs []byte) (uint32, bool) {
	for len(attrs) >= 4 {
		l := int(binary.NativeEndian.Uint16(attrs))
		typ := binary.NativeEndian.Uint16(attrs[2:]) & 0x3fff
		if l < 4 || l > len(attrs) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(attrs[4:]), true
		}
		attrs = attrs[(l+3)&^3:]
	}
	return 0, false
}

// close stops serving (packets still held are released first) and
// returns what went wrong.
func (d *delayer) close() error {
	d.stop.Store(true)
	d.wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	return errors.Join(d.errs...)
}

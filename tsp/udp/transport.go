package udp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/timed-project/timed/internal/limit"
	"github.com/timed-project/timed/internal/sockopt"
	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/auth"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

const (
	// DefaultPort is the timed/udp port of /etc/services.
	DefaultPort = 525
	// AnyPort in Config.Port lets the kernel choose a free port
	// (tests, several daemons on one host); LocalAddr tells which.
	AnyPort = -1
	// DefaultQueueLen is the default capacity of Packets(). BSD queued at
	// most NHOSTS×3 = 3039 messages; a few hundred is plenty for a reader
	// that keeps up.
	DefaultQueueLen = 1024

	// readBufSize holds the largest extension datagram (1472 bytes) with
	// room to spare; a longer datagram is cut, as BSD cut at 268 bytes.
	readBufSize = 2048
)

// Config configures Listen. The zero value serves every broadcast
// interface on port 525 under the system host name.
type Config struct {
	Port int // 0: DefaultPort; AnyPort: kernel's choice
	// ListenAddr is the IPv4 socket's address; zero: 0.0.0.0, which
	// broadcasts need. The IPv6 socket is bound to [::], which joining
	// the group needs.
	ListenAddr netip.Addr
	// Interfaces is a go-sockaddr template selecting the networks to
	// serve (see Discover); empty means DefaultInterfaces.
	Interfaces string
	UseOnly    []netip.Prefix // BSD -n: serve only networks matching these
	Ignore     []netip.Prefix // BSD -i: do not serve networks matching these
	Family     Family         // which family serves a link with both ("": auto)
	Group      netip.Addr     // the IPv6 group that stands for broadcast (zero: DefaultGroup)
	// Peers switches to peers mode: no interface discovery, one network
	// (Network.Peers) whose "broadcast" is unicast to each of these, for
	// links without broadcast and for several daemons on 127.0.0.1 or
	// ::1. A link-local peer carries its zone (fe80::1%eth0). Cannot be
	// combined with Interfaces, UseOnly, Ignore or Family.
	Peers []netip.AddrPort
	// Hostname is the name written in packets and used to recognise our
	// own echoes; default os.Hostname(). Always cut by tsp.TruncateName.
	// Daemons sharing a host (peers mode) need distinct names, or each
	// drops the others' packets as its own echo, as BSD would.
	Hostname string
	Logger   logrus.FieldLogger // nil: discard
	QueueLen int                // capacity of Packets(); 0: DefaultQueueLen
	// RateLimit sizes the per-source and aggregate token buckets every
	// datagram passes before it is even decoded (zero fields: limit's
	// defaults). A flood is dropped here, at the cost of a map lookup.
	RateLimit limit.Config
	// Signer signs every datagram sent, Verifier checks every one
	// received (tsp/auth); nil: off, as BSD. The transport saves their
	// state every auth save interval and when they ask, and closes them
	// when it closes.
	Signer       *auth.Signer
	Verifier     *auth.Verifier
	SaveInterval time.Duration // 0: auth.DefaultSaveInterval
	// ReceiveBuffer is the socket receive buffer asked for, in bytes
	// (0: DefaultReceiveBuffer; negative: the kernel's default). A burst
	// of answers larger than the buffer is dropped by the kernel, which
	// Stats.KernelDrops counts.
	ReceiveBuffer int

	// onDatagram, for tests in this package, runs on the reader goroutine
	// after each datagram has been delivered or counted as dropped, so a
	// test can await "processed" instead of polling counters.
	onDatagram func()
}

// Received is one datagram that passed the receiver's checks. Exactly one
// of Packet and Ext is set. Unknown TSP types (≥ tsp.NumTypes) are
// delivered too, as BSD's readmsg does: dropping them is the caller's job.
type Received struct {
	Packet *tsp.Packet    // a TSP packet (version 0 or 1)
	Ext    *tsp.ExtPacket // an extension datagram (version byte tsp.VersionExt)
	From   netip.AddrPort
	// Network is the served network the source is on (the peers network
	// for a peer or loopback source in peers mode), or nil when it is on
	// none: only the types BSD accepts from anywhere (and ring control)
	// arrive so. It points to the transport's own read-only copy; compare
	// *Network with Networks() values.
	Network *Network
	Dst     netip.Addr // destination address: ours, or a broadcast address
	IfIndex int        // interface the datagram came in on
	// At is the kernel's receive timestamp (SO_TIMESTAMPNS), or the time
	// of the read if the kernel gave none. A kernel timestamp carries no
	// monotonic reading.
	At time.Time
}

// Transport owns the TSP sockets, one per address family: it sends
// packets and delivers the received ones on Packets(). All methods are
// safe for concurrent use.
type Transport struct {
	conn     *net.UDPConn
	pc       *ipv4.PacketConn // the same socket, for per-interface sends
	v6       *socket6         // the IPv6 socket; nil where IPv6 is not served
	local    netip.AddrPort
	hostname string
	networks []Network // immutable after Listen
	// links are each IPv6 network's on-link prefixes but link-local, by
	// interface index: the global sources that are on it.
	links map[int][]netip.Prefix
	// other are the IPv6 links of interfaces served on IPv4 (Family
	// auto): their group is joined only to hear, and say once per
	// source, that IPv6-only daemons are there, in a TSP network of their
	// own.
	other    []Network
	otherLog *limit.Logger
	peers    []netip.AddrPort
	log      logrus.FieldLogger

	packets   chan Received
	readers   sync.WaitGroup
	done      chan struct{} // closed when the readers have exited
	closeOnce sync.Once
	closeErr  error
	stats     counters
	limiter   *limit.Limiter
	dropLog   *limit.Logger // drop lines: one per reason and source a minute
	signer    *auth.Signer
	verifier  *auth.Verifier
	saverDone chan struct{} // closed when the auth state saver has exited
	// sendMu makes signing and writing one step: a datagram signed first
	// is written first, so its counter reaches the receiver first.
	sendMu sync.Mutex
	// stampMu serialises stamped writes with the reading of their stamp,
	// so that the first transmit stamp after one is its own. Only those
	// writes ask for a stamp, so the others need not wait for it: a
	// stamp can take up to the stamper's wait to come.
	stampMu sync.Mutex
	rcvbuf  int // receive buffer granted, bytes (0: unknown)
	// tx reads transmit timestamps from the socket's error queue; nil
	// when the kernel gives none.
	tx *sockopt.TxStamper

	onDatagram func()
}

// Listen opens the TSP socket, works out the networks to serve and starts
// the reader goroutine. Close releases both.
func Listen(cfg Config) (*Transport, error) {
	log := cfg.Logger
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		l.SetLevel(logrus.PanicLevel)
		log = l
	}
	hostname := cfg.Hostname
	if hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("tsp: host name: %w", err)
		}
		hostname = h
	}
	if hostname = tsp.TruncateName(hostname); hostname == "" {
		return nil, errors.New("tsp: empty host name")
	}
	port := cfg.Port
	switch {
	case port == 0:
		port = DefaultPort
	case port == AnyPort:
		port = 0
	case port < 0 || port > 65535:
		return nil, fmt.Errorf("tsp: port %d out of range", cfg.Port)
	}
	laddr := cfg.ListenAddr.Unmap()
	if !laddr.IsValid() {
		laddr = netip.IPv4Unspecified()
	}
	if !laddr.Is4() {
		return nil, fmt.Errorf("tsp: listen address %v is not IPv4 (the IPv6 socket is bound to [::])", laddr)
	}
	qlen := cfg.QueueLen
	if qlen <= 0 {
		qlen = DefaultQueueLen
	}
	found, peers, err := servedNetworks(cfg)
	if err != nil {
		return nil, fmt.Errorf("tsp: %w", err)
	}
	nets := found.nets
	// The IPv4 socket is always there: loopback's 127.0.0.1 is where
	// timedc asks a daemon, and where BSD's tools send. The IPv6 one is
	// where an IPv6 network or peer is served, and opened on the IPv4
	// one's port (the kernel's choice included).
	want6 := slices.ContainsFunc(nets, Network.IPv6) || len(found.other) > 0 || slices.ContainsFunc(peers, func(p netip.AddrPort) bool { return p.Addr().Is6() })
	conn, v6, err := listenBoth(netip.AddrPortFrom(laddr, uint16(port)), want6, port == 0)
	if err != nil {
		return nil, err
	}
	pc := ipv4.NewPacketConn(conn)
	// IP_PKTINFO: the destination address and the arrival interface.
	if err := pc.SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true); err != nil {
		conn.Close()
		v6.close()
		return nil, fmt.Errorf("tsp: enable IP_PKTINFO: %w", err)
	}
	tx, rcvbuf := setupSocket(conn, cfg.ReceiveBuffer, log)
	if v6 != nil {
		if err := v6.setup(append(slices.Clone(nets), found.other...), cfg.ReceiveBuffer, log); err != nil {
			conn.Close()
			v6.close()
			return nil, err
		}
	}
	t := &Transport{
		conn:     conn,
		pc:       pc,
		v6:       v6,
		local:    conn.LocalAddr().(*net.UDPAddr).AddrPort(),
		hostname: hostname,
		networks: nets,
		links:    found.links,
		other:    found.other,
		peers:    peers,
		log:      log,
		packets:  make(chan Received, qlen),
		done:     make(chan struct{}),
		limiter:  limit.NewLimiter(cfg.RateLimit),
		dropLog:  limit.NewLogger(log, limit.LogConfig{}),
		otherLog: limit.NewLogger(log, limit.LogConfig{Once: true}),
		signer:   cfg.Signer,
		verifier: cfg.Verifier,
		rcvbuf:   rcvbuf,
		tx:       tx,

		onDatagram: cfg.onDatagram,
	}
	for _, n := range nets {
		log.WithField("network", n.String()).Debug("tsp: serving network")
	}
	t.readers.Add(1)
	go t.readLoop(t.conn, t.parse4)
	if v6 != nil {
		t.readers.Add(1)
		go t.readLoop(v6.conn, parse6)
	}
	go func() {
		t.readers.Wait()
		close(t.packets)
		close(t.done)
	}()
	t.saverDone = make(chan struct{})
	go t.saveAuthState(cfg.SaveInterval)
	return t, nil
}

// setupReceiveBuffer sizes the socket's receive buffer (want bytes, 0:
// DefaultReceiveBuffer, < 0: the kernel's) and turns on SO_RXQ_OVFL, the
// kernel's count of the datagrams it dropped for a full buffer. Neither
// failing stops the transport. It returns the size granted (0: unknown).
func setupReceiveBuffer(conn *net.UDPConn, want int, log logrus.FieldLogger) int {
	rc, err := conn.SyscallConn()
	if err != nil {
		log.WithError(err).Debug("tsp: receive buffer left to the kernel")
		return 0
	}
	if err := sockopt.Enable(rc, unix.SO_RXQ_OVFL); err != nil {
		log.WithError(err).Debug("tsp: no count of the kernel's receive-buffer drops")
	}
	if want == 0 {
		want = DefaultReceiveBuffer
	}
	if want < 0 {
		return 0
	}
	granted, forced, err := sizeReceiveBuffer(rc, want)
	if err != nil {
		log.WithError(err).Debug("tsp: receive buffer left to the kernel")
		return 0
	}
	// Linux grants twice what is asked (its bookkeeping's share), capped
	// at net.core.rmem_max without SO_RCVBUFFORCE.
	log.WithFields(logrus.Fields{"asked": want, "granted": granted, "forced": forced}).Debug("tsp: receive buffer")
	return granted
}

// setupSocket turns on a socket's kernel receive timestamps, sizes its
// receive buffer and prepares its transmit stamps (nil where the kernel
// gives none); none of them failing stops the transport.
func setupSocket(conn *net.UDPConn, rcvbuf int, log logrus.FieldLogger) (*sockopt.TxStamper, int) {
	if err := sockopt.EnableRxTimestamps(conn); err != nil {
		log.WithError(err).Debug("tsp: no kernel receive timestamps; using the time of the read")
	}
	granted := setupReceiveBuffer(conn, rcvbuf, log)
	var tx *sockopt.TxStamper
	rc, err := conn.SyscallConn()
	if err == nil {
		tx, err = sockopt.NewTxStamper(rc)
	}
	if err != nil {
		log.WithError(err).Debug("tsp: no kernel transmit timestamps; probes use the time before the write")
	}
	return tx, granted
}

// servedNetworks is the one peers network in peers mode, else what
// discovery found.
func servedNetworks(cfg Config) (found, []netip.AddrPort, error) {
	if len(cfg.Peers) == 0 {
		f, err := discover(Selection{Template: cfg.Interfaces, UseOnly: cfg.UseOnly, Ignore: cfg.Ignore, Family: cfg.Family, Group: cfg.Group})
		return f, nil, err
	}
	if cfg.Interfaces != "" || len(cfg.UseOnly) > 0 || len(cfg.Ignore) > 0 || cfg.Family != "" && cfg.Family != FamilyAuto {
		return found{}, nil, errors.New("peers mode replaces interface discovery: do not combine peers with interfaces, -n/-i filters or a family")
	}
	peers := make([]netip.AddrPort, 0, len(cfg.Peers))
	for _, p := range cfg.Peers {
		a := p.Addr().Unmap()
		if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || p.Port() == 0 {
			return found{}, nil, fmt.Errorf("peer %v: need a unicast address and a port", p)
		}
		if a.Is6() && a.IsLinkLocalUnicast() && a.Zone() == "" {
			return found{}, nil, fmt.Errorf("peer %v: a link-local address needs its zone, e.g. [fe80::1%%eth0]:525", p)
		}
		peers = append(peers, netip.AddrPortFrom(a, p.Port()))
	}
	return found{nets: []Network{{Interface: "peers", Peers: true}}}, peers, nil
}

// listenBoth binds the IPv4 socket at addr and, when want6, the IPv6 one
// at [::] on the same port. Where the kernel chose the port (anyPort),
// another process may hold it on IPv6: the pair is tried again on a new
// one, a few times.
func listenBoth(addr netip.AddrPort, want6, anyPort bool) (*net.UDPConn, *socket6, error) {
	for try := 0; ; try++ {
		conn, err := listenUDP("udp4", addr)
		if err != nil || !want6 {
			return conn, nil, err
		}
		port := conn.LocalAddr().(*net.UDPAddr).AddrPort().Port()
		c6, err := listenUDP("udp6", netip.AddrPortFrom(netip.IPv6Unspecified(), port))
		if err == nil {
			return conn, &socket6{conn: c6, pc: ipv6.NewPacketConn(c6)}, nil
		}
		conn.Close()
		if !anyPort || !errors.Is(err, unix.EADDRINUSE) || try == 4 {
			return nil, nil, err
		}
	}
}

// listenUDP binds a socket ("udp4" with SO_BROADCAST set; "udp6", which Go
// makes IPv6-only), and turns the two usual bind failures into advice.
func listenUDP(network string, addr netip.AddrPort) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		if network == "udp6" {
			return nil
		}
		return sockopt.Enable(c, unix.SO_BROADCAST)
	}}
	pc, err := lc.ListenPacket(context.Background(), network, addr.String())
	if err != nil {
		return nil, bindError(addr, err)
	}
	return pc.(*net.UDPConn), nil
}

func bindError(addr netip.AddrPort, err error) error {
	switch {
	case errors.Is(err, unix.EACCES):
		return fmt.Errorf("tsp: bind UDP %v: %w: ports below 1024 need root or CAP_NET_BIND_SERVICE (systemd: AmbientCapabilities=CAP_NET_BIND_SERVICE), or choose another port with --port", addr, err)
	case errors.Is(err, unix.EADDRINUSE):
		return fmt.Errorf("tsp: bind UDP %v: %w: another timed is probably running on this port", addr, err)
	}
	return fmt.Errorf("tsp: bind UDP %v: %w", addr, err)
}

// Packets delivers the received datagrams. It is closed by Close.
func (t *Transport) Packets() <-chan Received { return t.packets }

// Networks returns the networks served, in discovery order.
func (t *Transport) Networks() []Network { return append([]Network(nil), t.networks...) }

// Peers returns the configured peers (peers mode), or nil.
func (t *Transport) Peers() []netip.AddrPort { return append([]netip.AddrPort(nil), t.peers...) }

// Hostname is the name written in packets and compared for own echoes.
func (t *Transport) Hostname() string { return t.hostname }

// LocalAddr is the address and port the socket is bound to.
func (t *Transport) LocalAddr() netip.AddrPort { return t.local }

// ReceiveBuffer is the socket receive buffer the kernel granted, in bytes
// (0 if unknown).
func (t *Transport) ReceiveBuffer() int { return t.rcvbuf }

// Stats returns a snapshot of the counters.
func (t *Transport) Stats() Stats { return t.stats.snapshot() }

// Close closes the socket and returns once the reader goroutine has
// exited and Packets() is closed. It may be called more than once.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.closeErr = errors.Join(t.conn.Close(), t.v6.close())
		<-t.done
		if t.saverDone != nil {
			<-t.saverDone
		}
		// After the last send and receive: the exact counters go to disk.
		t.closeErr = errors.Join(t.closeErr, t.signer.Close(), t.verifier.Close())
	})
	<-t.done
	return t.closeErr
}

// saveAuthState writes the signer's and verifier's state every interval
// and whenever either asks (its counters near what was saved), until the
// reader exits. Without auth there is nothing to do.
func (t *Transport) saveAuthState(interval time.Duration) {
	defer close(t.saverDone)
	if t.signer == nil && t.verifier == nil {
		return
	}
	if interval <= 0 {
		interval = auth.DefaultSaveInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var sw, vw <-chan struct{}
	if t.signer != nil {
		sw = t.signer.SaveWanted()
	}
	if t.verifier != nil {
		vw = t.verifier.SaveWanted()
	}
	for {
		select {
		case <-t.done:
			return
		case <-tick.C:
		case <-sw:
		case <-vw:
		}
		if err := errors.Join(t.signer.Save(), t.verifier.Save()); err != nil {
			t.log.WithError(err).Error("tsp: saving the auth replay state")
		}
	}
}

// Send unicasts p. The caller sets Type, Seq, Time and HopCount; an empty
// Name becomes our host name and Version 0 becomes tsp.Version (1), so the
// zero values give what every BSD sender writes. p is not modified.
func (t *Transport) Send(p *tsp.Packet, to netip.AddrPort) error {
	b, err := t.encode(p)
	if err != nil {
		return err
	}
	return t.send(b, to, 0, &t.stats.sent[p.Type])
}

// Broadcast sends p to n's broadcast address (IPv6: its group) on our
// port, out of n's interface; on the peers network, to every peer.
func (t *Transport) Broadcast(p *tsp.Packet, n Network) error {
	b, err := t.encode(p)
	if err != nil {
		return err
	}
	return t.broadcast(b, n, &t.stats.sent[p.Type])
}

// BroadcastAll broadcasts p on every served network. It tries every
// network and returns the errors joined.
func (t *Transport) BroadcastAll(p *tsp.Packet) error {
	b, err := t.encode(p)
	if err != nil {
		return err
	}
	return t.broadcastAll(b, &t.stats.sent[p.Type])
}

// SendExt unicasts an extension message; an empty Name becomes our host
// name.
func (t *Transport) SendExt(e *tsp.ExtPacket, to netip.AddrPort) error {
	b, err := t.encodeExt(e)
	if err != nil {
		return err
	}
	return t.send(b, to, 0, &t.stats.sentExt[e.Kind])
}

// SendExtStamped unicasts an extension message, like SendExt, and
// returns the kernel's software transmit timestamp of it (real time), ok
// false when the kernel gave none. Only this send asks for one: the
// stamps come back on the socket's error queue, which is read here.
func (t *Transport) SendExtStamped(e *tsp.ExtPacket, to netip.AddrPort) (time.Time, bool, error) {
	b, err := t.encodeExt(e)
	if err != nil {
		return time.Time{}, false, err
	}
	to = unmap(to)
	tx := t.tx
	if to.Addr().Is6() {
		tx = t.v6.stamper()
	}
	if tx == nil {
		return time.Time{}, false, t.send(b, to, 0, &t.stats.sentExt[e.Kind])
	}
	t.stampMu.Lock()
	at, ok, err := tx.Write(func(oob []byte) error { return t.write(b, to, 0, oob) })
	t.stampMu.Unlock()
	return at, ok, t.sent(to, err, &t.stats.sentExt[e.Kind])
}

// BroadcastExt broadcasts an extension message on n, like Broadcast.
func (t *Transport) BroadcastExt(e *tsp.ExtPacket, n Network) error {
	b, err := t.encodeExt(e)
	if err != nil {
		return err
	}
	return t.broadcast(b, n, &t.stats.sentExt[e.Kind])
}

// BroadcastAllExt broadcasts an extension message on every served network.
func (t *Transport) BroadcastAllExt(e *tsp.ExtPacket) error {
	b, err := t.encodeExt(e)
	if err != nil {
		return err
	}
	return t.broadcastAll(b, &t.stats.sentExt[e.Kind])
}

// encode marshals p; send signs it.
func (t *Transport) encode(p *tsp.Packet) ([]byte, error) {
	q := *p
	if q.Name == "" {
		q.Name = t.hostname
	}
	if q.Version == 0 {
		q.Version = tsp.Version
	}
	return q.Marshal()
}

func (t *Transport) encodeExt(e *tsp.ExtPacket) ([]byte, error) {
	q := *e
	if q.Name == "" {
		q.Name = t.hostname
	}
	return q.Marshal()
}

func (t *Transport) broadcastAll(b []byte, sent *atomic.Uint64) error {
	var errs []error
	for _, n := range t.networks {
		errs = append(errs, t.broadcast(b, n, sent))
	}
	return errors.Join(errs...)
}

func (t *Transport) broadcast(b []byte, n Network, sent *atomic.Uint64) error {
	if n.Peers {
		var errs []error
		for _, p := range t.peers {
			errs = append(errs, t.send(b, p, 0, sent))
		}
		return errors.Join(errs...)
	}
	if !n.Broadcast.IsValid() {
		return fmt.Errorf("tsp: network %v has no broadcast address or group", n)
	}
	return t.send(b, netip.AddrPortFrom(n.Broadcast, t.local.Port()), n.Index, sent)
}

// send signs one datagram and writes it; a non-zero ifIndex picks the
// outgoing interface through IP_PKTINFO (IPV6_PKTINFO), as a broadcast
// must leave by its network and a group's datagram by its link.
//
// The auth trailer (nothing without a signer; a BSD receiver reads the
// first 268 bytes and never sees it) is drawn and written under one lock.
// A receiver drops any counter not above the highest it accepted from the
// sender, and the daemon sends from several goroutines (the loop, a sync
// round's measurements): a datagram signed and then held up before its
// write, while another was signed and written, arrived second and was
// dropped as a replay. One socket writes in the order it is called.
func (t *Transport) send(b []byte, to netip.AddrPort, ifIndex int, sent *atomic.Uint64) error {
	to = unmap(to)
	return t.sent(to, t.write(b, to, ifIndex, nil), sent)
}

// write signs b for to and writes it there under sendMu, on the socket
// of to's family: with oob (a stamped send's control message) when given,
// else through ifIndex's interface when non-zero (IP_PKTINFO,
// IPV6_PKTINFO), else plainly; a zoned IPv6 destination leaves by its
// zone.
func (t *Transport) write(b []byte, to netip.AddrPort, ifIndex int, oob []byte) error {
	t.sendMu.Lock()
	defer t.sendMu.Unlock()
	d, err := t.sign(b, to)
	if err != nil {
		return err
	}
	v6, conn := to.Addr().Is6(), t.conn
	if v6 {
		if t.v6 == nil {
			return errNoIPv6
		}
		conn = t.v6.conn
	}
	switch {
	case oob != nil:
		_, _, err = conn.WriteMsgUDPAddrPort(d, oob, to)
	case ifIndex == 0:
		_, err = conn.WriteToUDPAddrPort(d, to)
	case v6:
		_, err = t.v6.pc.WriteTo(d, &ipv6.ControlMessage{IfIndex: ifIndex}, net.UDPAddrFromAddrPort(to))
	default:
		_, err = t.pc.WriteTo(d, &ipv4.ControlMessage{IfIndex: ifIndex}, net.UDPAddrFromAddrPort(to))
	}
	return err
}

func unmap(a netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) }

// sent counts a send's outcome.
func (t *Transport) sent(to netip.AddrPort, err error, sent *atomic.Uint64) error {
	if err != nil {
		t.stats.sendErrors.Add(1)
		return fmt.Errorf("tsp: send to %v: %w", to, err)
	}
	sent.Add(1)
	return nil
}

// sign appends the auth trailer for to to a copy of b (b may go to
// several peers), or returns b without a signer. The trailer echoes the
// nonce last heard from to (none for a broadcast address), which to wants
// in whatever moves its clock.
func (t *Transport) sign(b []byte, to netip.AddrPort) ([]byte, error) {
	if t.signer == nil {
		return b, nil
	}
	return t.signer.SignTo(b[:len(b):len(b)], to, time.Now())
}

// pktinfo is what a datagram's IP_PKTINFO or IPV6_PKTINFO says: the
// interface it came in on and the address it was sent to.
type pktinfo func(oob []byte) (ifIndex int, dst netip.Addr)

func (t *Transport) parse4(oob []byte) (int, netip.Addr) {
	var cm ipv4.ControlMessage
	if cm.Parse(oob) != nil {
		return 0, netip.Addr{}
	}
	a, _ := netip.AddrFromSlice(cm.Dst)
	return cm.IfIndex, a.Unmap()
}

// readLoop reads one socket until it is closed; parse reads its
// family's packet information.
func (t *Transport) readLoop(conn *net.UDPConn, parse pktinfo) {
	defer t.readers.Done()
	buf := make([]byte, readBufSize)
	// IP_PKTINFO (IPV6_PKTINFO is larger), SCM_TIMESTAMPNS (a timespec),
	// SO_RXQ_OVFL (a uint32), and SCM_TIMESTAMPING (three timespecs),
	// which kernels before 6.12 add once transmit stamps are enabled.
	oob := make([]byte, len(ipv6.NewControlMessage(ipv6.FlagDst|ipv6.FlagInterface))+unix.CmsgSpace(16)+unix.CmsgSpace(4)+unix.CmsgSpace(48))
	var backoff time.Duration
	for {
		n, oobn, flags, from, err := conn.ReadMsgUDPAddrPort(buf, oob)
		now := time.Now()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient (e.g. ENOMEM): a daemon must not stop receiving,
			// but an error that repeats must not spin a core either.
			t.stats.readErrors.Add(1)
			t.log.WithError(err).Warn("tsp: read")
			backoff = min(max(2*backoff, time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if drops, ok := rxqOverflow(oob[:oobn]); ok {
			t.stats.kernelDrops.Store(uint64(drops))
		}
		t.receive(buf[:n], oob[:oobn], parse, flags&unix.MSG_TRUNC != 0, from, now)
		if t.onDatagram != nil {
			t.onDatagram()
		}
	}
}

// receive checks one datagram and delivers it or counts its drop. It never
// blocks on the consumer: a full queue drops the datagram.
func (t *Transport) receive(b, oob []byte, parse pktinfo, truncated bool, from netip.AddrPort, now time.Time) {
	r := Received{From: netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), At: now}
	// Before anything else: a flood costs a bucket lookup per datagram,
	// not a decode, a queue slot or a log line. A configured peer (peers
	// mode, by address and port) is limited by its own bucket only, so
	// that a flood from many sources cannot silence the daemons.
	var allowed bool
	if t.isKnown(r.From) {
		allowed = t.limiter.AllowKnown(r.From, now)
	} else {
		allowed = t.limiter.Allow(r.From, now)
	}
	if !allowed {
		t.stats.dropped[DropRateLimited].Add(1)
		t.logDrop(DropRateLimited, r, len(b), errRateLimited, now)
		return
	}
	// Then authentication, before the packet is decoded.
	if t.verifier == nil {
		if p, _, err := auth.Split(b); err == nil {
			b = p // a signer's trailer, which an unauthenticated receiver ignores
		}
	} else {
		p, res, err := t.verifier.Check(r.From, b, now)
		switch res {
		case auth.Bad:
			t.stats.auth[auth.ReasonOf(err)].Add(1)
			t.logDrop(DropAuth, r, len(b), err, now)
			return
		case auth.Own:
			// Our own datagram come back, known by its sender identity
			// (the MAC verified): before the name check, which a crash
			// once turned into "replayed counter" drops.
			t.stats.dropped[DropOwnEcho].Add(1)
			t.logDrop(DropOwnEcho, r, len(b), errOwnIdentity, now)
			return
		}
		b = p
	}
	r.IfIndex, r.Dst = parse(oob)
	if at, ok := sockopt.RxTimestamp(oob); ok {
		r.At = at
	}
	reason, err := t.classify(b, truncated, &r)
	if err == nil {
		c := t.counter(&r)
		c.Add(1) // before the send, so a reader of the packet sees it counted
		select {
		case t.packets <- r:
			return
		default:
			c.Add(^uint64(0))
			reason, err = DropQueueFull, errQueueFull
		}
	}
	t.stats.dropped[reason].Add(1)
	t.logDrop(reason, r, len(b), err, now)
	if reason == DropUnknownNetwork {
		t.otherFamily(r, now)
	}
}

// otherFamily warns, once per source, of a TSP datagram over IPv6 from a
// link this daemon serves on IPv4 (Family auto): the daemons that have
// only IPv6 there elect a master of their own, which an operator should
// know of.
func (t *Transport) otherFamily(r Received, now time.Time) {
	a := r.From.Addr()
	i := slices.IndexFunc(t.other, func(n Network) bool {
		return a.Is6() && (a.Zone() == n.Interface || !a.IsLinkLocalUnicast() && r.IfIndex == n.Index)
	})
	if i < 0 {
		return
	}
	const msg = "tsp: TSP over IPv6 on a link this daemon serves on IPv4 (family auto): the daemons there with IPv6 only elect a master of their own; give this link's dual-stack daemons --family both to serve both families under one master"
	if e := t.otherLog.Entry(limit.Key{Msg: msg, Source: a}, now); e != nil {
		e.WithFields(logrus.Fields{"from": r.From.String(), "interface": t.other[i].Interface}).Warn(msg)
	}
}

// logDrop logs a dropped datagram at debug level, at most once a minute
// per reason and source (with the count suppressed since): a flood must
// not become a flood of log lines.
func (t *Transport) logDrop(reason DropReason, r Received, n int, err error, now time.Time) {
	e := t.dropLog.Entry(limit.Key{Msg: "tsp: dropped datagram: " + reason.String(), Source: r.From.Addr()}, now)
	if e == nil {
		return
	}
	e = e.WithFields(logrus.Fields{"from": r.From.String(), "reason": reason.String(), "bytes": n})
	if r.Packet != nil {
		e = e.WithField("packet", r.Packet.String())
	}
	e.WithError(err).Debug("tsp: dropped datagram")
}

func (t *Transport) counter(r *Received) *atomic.Uint64 {
	if r.Ext != nil {
		return &t.stats.recvExt[r.Ext.Kind]
	}
	return &t.stats.recv[r.Packet.Type]
}

var (
	errUnknownNetwork = errors.New("source is on no served network")
	errOwnEcho        = errors.New("our own name")
	errOwnIdentity    = errors.New("our own sender identity")
	errQueueFull      = errors.New("receive queue full")
	errRateLimited    = errors.New("source over its rate limit")
	errTruncated      = errors.New("extension datagram truncated")
)

// classify decodes b into r and applies BSD readmsg's checks in its order:
// length, version, NUL in the name, known network, own echo. A non-nil
// error means drop, for the reason returned. Extension datagrams are
// recognised first, by their version byte, since they may be shorter than
// 44 bytes; they face the same network and echo checks.
func (t *Transport) classify(b []byte, truncated bool, r *Received) (DropReason, error) {
	if tsp.IsExt(b) {
		if truncated {
			return DropBadExt, errTruncated
		}
		e, err := tsp.UnmarshalExt(b)
		if errors.Is(err, tsp.ErrBadName) {
			return DropBadName, err
		}
		if err != nil {
			return DropBadExt, err
		}
		r.Ext = &e
		r.Network = t.networkOf(r.From, r.IfIndex)
		// Ring control comes from timedc, like TRACEON: from anywhere, and
		// under this host's name when timedc runs beside its daemon. The
		// daemon tells its own echoes apart itself.
		if e.Kind == tsp.ExtRingCtl {
			return 0, nil
		}
		if r.Network == nil {
			return DropUnknownNetwork, errUnknownNetwork
		}
		if e.Name == t.hostname {
			return DropOwnEcho, errOwnEcho
		}
		return 0, nil
	}
	p, err := tsp.Unmarshal(b)
	switch {
	case err == nil:
	case errors.Is(err, tsp.ErrShort):
		return DropShort, err
	case errors.Is(err, tsp.ErrBadVersion):
		return DropBadVersion, err
	case errors.Is(err, tsp.ErrNameNoNUL):
		return DropNoNUL, err
	case errors.Is(err, tsp.ErrBadName):
		return DropBadName, err
	default:
		return DropMalformed, err
	}
	r.Packet = &p
	r.Network = t.networkOf(r.From, r.IfIndex)
	if r.Network == nil && !fromAnywhere(p.Type) {
		return DropUnknownNetwork, errUnknownNetwork
	}
	if p.Name == t.hostname && !fromSelf(p.Type) {
		return DropOwnEcho, errOwnEcho
	}
	return 0, nil
}

// fromAnywhere: the types readmsg accepts from a source on no known
// network (timedc's and date's requests).
func fromAnywhere(ty tsp.Type) bool {
	switch ty {
	case tsp.TraceOn, tsp.TraceOff, tsp.SetDate, tsp.MSite, tsp.Test:
		return true
	}
	return false
}

// fromSelf: the types readmsg accepts under our own name; LOOP is how a
// master finds its own packets coming round a loop of submasters.
func fromSelf(ty tsp.Type) bool {
	switch ty {
	case tsp.SetDate, tsp.Test, tsp.MSite, tsp.TraceOn, tsp.TraceOff, tsp.Loop:
		return true
	}
	return false
}

// networkOf is readmsg's fromnet: the first served network holding the
// source. In peers mode every peer address, and loopback (local tools and
// daemons), is on the peers network; peers match by address, since a
// tool on a peer host sends from another port. An IPv6 source is on the
// link it came in by (ifIndex) when it is link-local there (its zone is
// the link's interface) or in one of the link's prefixes.
func (t *Transport) networkOf(src netip.AddrPort, ifIndex int) *Network {
	a := src.Addr()
	for i := range t.networks {
		n := &t.networks[i]
		switch {
		case n.Peers:
			if a.IsLoopback() || t.isPeer(a) {
				return n
			}
		case n.IPv6():
			if a.Is6() && (a.IsLinkLocalUnicast() && a.Zone() == n.Interface ||
				!a.IsLinkLocalUnicast() && ifIndex == n.Index && prefixesContain(t.links[n.Index], a)) {
				return n
			}
		case n.Prefix.Contains(a):
			return n
		}
	}
	return nil
}

func prefixesContain(ps []netip.Prefix, a netip.Addr) bool {
	return slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Contains(a) })
}

// isKnown: from a configured peer's own address and port.
func (t *Transport) isKnown(src netip.AddrPort) bool {
	for _, p := range t.peers {
		if p == src {
			return true
		}
	}
	return false
}

func (t *Transport) isPeer(a netip.Addr) bool {
	for _, p := range t.peers {
		if p.Addr() == a {
			return true
		}
	}
	return false
}

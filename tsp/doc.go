// Package tsp is the wire format of the Time Synchronization Protocol of
// 4.3BSD timed: the 268-byte packet that FreeBSD's daemon sends (and the
// shorter 4.3BSD forms it still accepts), the message types, the
// (seconds, microseconds) time it carries, and this project's version-2
// extension framing (ExtPacket) that BSD daemons drop unread.
//
// The package encodes and decodes bytes, and does nothing else: it opens
// no socket, reads no file, performs no I/O and imports neither net, os
// nor syscall, so that pure packages such as the election state machine
// can use it without pulling the network into their build. The UDP
// transport that carries these packets between daemons is package
// tsp/udp; a test in internal/archtest keeps the two apart.
//
// A packet, every field big-endian (byteorder.c):
//
//	0 type | 1 version | 2..3 seq
//	4..11 union: time (4..7 seconds, 8..11 microseconds) for ADJTIME,
//	      SETTIME, SETDATE and SETDATEREQ; hop count (byte 4) for LOOP;
//	      zero for every other type (ignored when read)
//	12..267 the sender's host name, NUL-terminated (4.3BSD sent 32 or 64
//	      name bytes: 44- and 76-byte packets)
//
// Decoding accepts exactly what the BSD receiver (readmsg.c) accepts, so
// that a daemon built on it interoperates with BSD daemons in both
// directions, with one exception: a name that is not a printable host
// name (control bytes, spaces, bytes beyond ASCII) is refused (ErrBadName),
// since names end up on admins' screens.
//
// With keyed authentication on (package tsp/auth) a datagram carries a
// trailer after the packet. BSD's receiver reads 268 bytes and never sees
// it, and Unmarshal ignores bytes past 268 in the same way, so a signed
// packet is still a valid TSP packet. The trailer, all integers
// big-endian, 52 + L bytes:
//
//	0..3 magic "TSPA" | 4 trailer version 2 | 5 MAC length L (20, 32, 48, 64)
//	6..7 reserved, zero | 8..11 key ID | 12..19 sender identity
//	20..27 counter, increasing per sender | 28..35 sender's time, Unix ns
//	36..43 sender's nonce of this run | 44..51 echo of the receiver's nonce
//	52.. HMAC(key, packet ‖ trailer bytes 0..51), L bytes
//
// An extension packet's trailer follows its payload (the packet ends where
// its header says). tsp/auth's package doc has the details, the replay
// rules and why ADJTIME, SETTIME and the date packets must echo the
// receiver's nonce.
package tsp

// Package auth is keyed authentication for TSP: a trailer with an HMAC
// after each datagram sent, and the policy that decides on each datagram
// received. It is off by default, and built so that BSD daemons keep
// working beside hosts that sign.
//
// The package is pure but for three files: the key file (LoadKeys) and
// the two state files in Config.StateDir. It opens no socket.
//
// # Why a trailer is invisible to BSD
//
// BSD's timed reads every datagram with recvfrom into a struct tsp of 268
// bytes: whatever follows the 268th byte is cut off by the kernel, unseen.
// Our TSP packets are always 268 bytes, so a trailer after them changes
// nothing for a BSD receiver, and tsp.Unmarshal, which also ignores bytes
// past 268, still decodes the signed datagram. Extension packets (version
// 2, which BSD drops) end where their own header says (8 + name length +
// payload length); tsp.UnmarshalExt wants that length exactly, so the
// transport decodes the packet Check returns, not the datagram.
//
// # Trailer layout
//
// The trailer follows the packet; Split finds where by the packet's own
// framing, never by a field of the trailer. All integers are big-endian.
//
//	offset size field
//	     0    4 magic "TSPA" (54 53 50 41)
//	     4    1 trailer version, 2
//	     5    1 MAC length L in bytes: 20 (SHA1), 32 (SHA256), 48 (SHA384), 64 (SHA512)
//	     6    2 reserved, sent as zero; a trailer with either byte set is malformed
//	     8    4 key ID (uint32), a line of the key file
//	    12    8 sender identity (uint64), random, kept in the sender's state
//	    20    8 counter (uint64), strictly increasing per sender identity
//	    28    8 timestamp (int64), the sender's wall clock, Unix nanoseconds
//	    36    8 nonce (uint64), the sender's, random, new each run, never saved
//	    44    8 echo (uint64), the receiver's nonce as the sender last heard it; 0: none
//	    52    L MAC = HMAC-hash(key, packet ‖ trailer bytes 0…51)
//
// A trailer is 52 + L bytes: 72, 84, 100 or 116 (MaxTrailerSize); the
// datagram must end exactly after the MAC. A signed TSP packet is at most
// 384 bytes. The largest extension datagram (1472 bytes, one Ethernet
// frame) becomes 1588 with a SHA512 trailer, so it may be fragmented;
// the transport's 2048-byte read buffer holds it. The MAC covers
// everything before it, magic and version included; the full hash output
// is sent, never truncated, and compared in constant time.
//
// Version 1 (36 bytes before the MAC: no nonce, no echo) is no longer
// accepted, nor does a version-1 host accept version 2: every host that
// signs is upgraded at once (BSD hosts, which read 268 bytes, are not
// concerned).
//
// # Modes and what they protect
//
// Off (the default) signs nothing and checks nothing: anyone on the
// network can forge or replay any packet, as with BSD. A trailer on a
// received datagram is cut off unread, so that a host still on Off reads
// packets of hosts already signing.
//
// Optional signs every datagram sent. A received datagram without a
// trailer is accepted only from an address in UnsignedPeers (the BSD
// hosts; addresses or CIDR prefixes); one with a trailer must verify,
// whoever sends it. It protects against forged packets from any address
// not listed, and against replay of signed packets; it does not protect
// against an attacker who sends unsigned packets with the source address
// of a listed peer (UDP source addresses are not authenticated), so an
// attacker on the path or on the LAN can still impersonate the BSD hosts,
// and through them disturb elections and clocks.
//
// Required signs everything and drops every datagram that is unsigned or
// does not verify. It protects against forgery and replay by anyone who
// does not hold a key in the key file. BSD hosts cannot take part.
//
// No mode protects against: a key holder (every key in the file is fully
// trusted; any host with the file can forge any sender, claim any sender
// identity and so block a sender by running its counter ahead); delay
// attacks (a datagram held back and delivered late, once, is accepted if
// nothing newer from its sender came first, and, if it moves a clock, if
// the receiver has not restarted since — TSP's own timeouts and
// round-trip measurements are what bound their effect); dropping or
// reordering; the first contact limits under "Replay protection" below,
// for datagrams that move no clock; and the source address, which no mode
// authenticates (the trailer authenticates the bytes and the sender
// identity, not the address). Unsigned datagrams from UnsignedPeers
// (Optional) carry no trailer, so none of this applies to them.
//
// # Keys
//
// The key file has chrony's format (see ParseKeys): ID TYPE KEY lines,
// HMAC with SHA1, SHA256, SHA384 or SHA512, at least 16 bytes of key
// material (MinKeyLen), mode 0600. MD5 is refused. The signing key is
// Config.SignKey, by default the lowest ID. To rotate without dropping a
// packet: add the new key to every host's file (they then accept both),
// switch SignKey to it on every host, then remove the old key. Do not
// reuse the keys of chrony's NTP authentication.
//
// # Freshness of what moves a clock
//
// ADJTIME, SETTIME, SETDATE, SETDATEREQ and DATEACK (MovesClock) are
// accepted only if their trailer's echo is the receiver's nonce of this
// run (ErrNoEcho otherwise), whoever sends them and whatever the receiver
// knows of the sender. The nonce is 64 random bits drawn by the Signer
// when the daemon starts, never saved, and drawn again when the replay
// table evicts a sender; every trailer the daemon sends carries it. The
// Verifier paired with that Signer (NewVerifier's self) tells it, for
// each datagram it accepts, the sender's nonce, and SignTo echoes the
// nonce last heard from the address it sends to (Sign, for broadcasts and
// tools, echoes none). A master measures a slave (its probe replies carry
// the slave's nonce) or hears its SLAVEUP before every correction it
// sends it, so its corrections echo the nonce of the slave's current run;
// a slave that asks its master for a date change has heard the master.
//
// Why it holds, with no state on either side. The echo is under the MAC,
// so only a key holder can write one. A datagram made before the receiver
// drew its nonce cannot carry it (bar a 2⁻⁶⁴ guess): its sender had not
// seen it. So a datagram that moves a clock and is accepted was made in
// the receiver's current run, since its last renewal; within that span the
// receiver's table has held its sender's entry (an eviction renews the
// nonce), whose counter drops the datagram if it was accepted before. A
// capture replayed after the receiver restarts, crashes, is reinstalled
// or has its state directory wiped (and whatever the sender's state) is
// refused; so is a capture replayed while the receiver runs, by the
// counter. The argument uses no clock and no state file: the window and
// the saved ceilings are what protect the datagrams that move no clock
// (elections), for which the echo cannot be asked (broadcasts).
//
// What it costs: a correction from a master that has not heard the slave
// since the slave started is dropped (ErrNoEcho): the slave's SLAVEUP and
// probe replies teach the master within the round. A daemon's own
// datagrams that come back (broadcasts looped to it) are recognised by
// their sender identity, after the MAC, and reported as Own, which the
// transport counts as its own echoes: before, after a crash, they read as
// replays of its own saved ceiling.
//
// # Replay protection
//
// Every trailer carries the sender identity and a counter. The receiver
// keeps, per sender identity, the ReplayWindow (64) highest counters it
// accepted, and drops any datagram whose counter is one of them or below
// all of them (ErrReplay): every counter ever accepted is one or the
// other, so every replay is dropped, while a datagram overtaken by up to
// 64 later ones of its sender (a daemon sends from several goroutines; a
// network may reorder) is still taken, once. A window that moved only
// with the highest counter dropped such datagrams as replays. The table is
// keyed on the identity, which the MAC covers, and not on the source
// address: keyed on the address, a recorded packet replayed from a
// spoofed new address would be a first contact, and a stream of such
// replays could flush the bounded table. Entries are made only for
// datagrams whose MAC verified.
//
// The sender's counter. A Signer's counter advances with the monotonic
// clock, in nanoseconds, and by at least one per datagram: never with the
// wall clock, which timed steps both ways. With a StateDir the identity
// and a reservation live in SenderStateFile: each Save reserves the
// counters up to the last one used plus two save intervals, and a new run
// starts above the reservation, so a restart, a crash or a wall clock set
// back a day never reuses a counter, and receivers that know the sender
// accept it at once (TestSenderCrash). Close saves the exact last counter.
// Without a StateDir each run draws a new random identity, and is a first
// contact everywhere.
//
// After first contact the counter alone decides: no timestamp is compared
// with the receiver's clock, so a sender whose clock the master steps by
// any amount, either way, or a receiver whose clock is stepped, keeps
// being accepted (TestClockSteps).
//
// First contact, when the receiver has no entry for the sender identity,
// is the one place the counter cannot tell a replay. For what moves a
// clock the echo of the nonce does (above); for the rest the timestamp
// must: it has to be within Window of the receiver's clock, either way
// (ErrWindow; default one hour, NoWindow turns it off; Config.Clock is
// the clock read). So a recorded datagram that moves no clock (an
// election's) can be replayed to a receiver that does not know its sender
// while its timestamp is within the window (and the datagrams recorded
// after it, in order, until the sender's own arrive); an entry so made
// does not stand for the echo of a correction. The receiver does
// not know a sender: before it first hears it; after it evicted it; after
// a restart without state, or a crash before the entry was first saved.
// The price of the window: a host whose clock is more than Window from a
// receiver's at their very first contact is dropped by it, both ways; set
// that clock by hand once, or widen the window for the first join. With
// state on both sides this happens once in the life of a pair, not after
// each restart, and never after a step.
//
// Across receiver restarts. With a StateDir the Verifier saves its table
// to ReplayStateFile (temporary file, fsync, rename, 0600) at start, on
// Save and at Close. For each sender the file holds a ceiling, and this is
// the invariant: every counter accepted from a sender in the file, since
// its entry was made, is at most its ceiling there. Save writes ceilings four save intervals
// ahead of each sender's last counter, and only once they are on disk
// does Check accept counters up to them; a datagram past its sender's
// saved ceiling is dropped (ErrNotSaved) and a save asked for
// (SaveWanted); after it, the same datagram passes (it was never
// accepted: this is delay, not replay). Close writes the exact last
// counters. A restarted Verifier takes each ceiling as the sender's last
// counter, so everything accepted before the crash or stop is a replay.
// The argument needs no clock, no bound on delays, and no assumption on
// when the crash happened; it assumes the file is not rolled back (a
// restored backup, or another user writing it: state files writable by
// group or others are refused) and that fsync and rename keep their
// promise. Its cost is availability, after a crash only: a sender's fresh
// datagrams are dropped as replays until its counter passes the saved
// ceiling, at most four save intervals (2 minutes by default) after its
// last datagram saved (TestReplayAcrossCrash). After a clean stop they
// pass at once (TestCleanRestart). A sender first heard since the last
// save was not in the file: after a crash it is a first contact again.
//
// Without a StateDir nothing is kept: every restart of a receiver is a
// first contact with every sender, bounded by the window only, and every
// restart of a sender a new identity, which receivers take as a first
// contact (TestNoStateDir).
//
// The table holds MaxSenders (default 4096) entries; a new sender evicts
// the one accepted least recently, whose next datagram is then a first
// contact (TestEviction). Only key holders make entries (a new identity
// needs a valid MAC), plus replays of recorded datagrams of identities
// the receiver does not know, which the window bounds. An evicted
// sender's saved ceiling stays in force until the next save, for the file
// still has it.
//
// # Wiring into the transport
//
// Start: keys, err := LoadKeys(path); s, err := NewSigner(cfg, time.Now());
// v, err := NewVerifier(cfg, s). Send: datagram, err := s.SignTo(packet,
// to, time.Now()) on every marshalled packet, for the address it goes to,
// sent as is. Receive:
//
//	packet, res, err := v.Check(from, datagram, at)
//	switch res {
//	case auth.Bad:
//		dropped[auth.ReasonOf(err)]++ // err says why, without key material
//		continue
//	case auth.Own:
//		ownEchoes++ // our own datagram came back
//		continue
//	}
//	// decode packet (not datagram) with tsp.Unmarshal or tsp.UnmarshalExt
//
// Persist: every Config.SaveInterval and whenever s.SaveWanted() or
// v.SaveWanted() is signalled, call s.Save() and v.Save(); at stop,
// s.Close() and v.Close() after the last send and receive. Check waits
// while Save writes. A nil *Signer or *Verifier acts as Mode Off.
package auth

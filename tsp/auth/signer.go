package auth

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Signer appends a trailer to every datagram sent. Safe for concurrent
// use. A nil *Signer, like one made for Mode Off, signs nothing.
type Signer struct {
	key     *Key // nil: mode Off
	sender  uint64
	path    string // "": nothing persisted
	reserve uint64 // how far ahead of the counter a Save reserves, ns

	mu      sync.Mutex
	anchorC uint64    // counter at anchorT
	anchorT time.Time // the time given to NewSigner
	last    uint64    // last counter used
	saved   uint64    // reservation on disk: no counter above it was used before this run
	closed  bool
	wanted  chan struct{}
	clock   func() time.Time // nil: the timestamp is Sign's time

	// nonce is this run's nonce, which every trailer carries: random,
	// never saved, drawn again by renew. The Verifier made with this
	// signer accepts a datagram that moves a clock only if it echoes it.
	nonce  atomic.Uint64
	echoes echoes // the nonces of the peers heard, to echo back to them
}

// echoes is what a Signer echoes to each address: the nonce of the last
// datagram its Verifier accepted from there. Bounded: past max entries,
// the address heard least recently is forgotten (its next datagram
// teaches it again).
type echoes struct {
	mu   sync.Mutex
	max  int
	seq  uint64
	from map[netip.AddrPort]echo
}

type echo struct{ nonce, seen uint64 }

func (e *echoes) heard(from netip.AddrPort, nonce uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.from == nil {
		e.from = map[netip.AddrPort]echo{}
	}
	if _, known := e.from[from]; !known && len(e.from) >= e.max {
		var oldest netip.AddrPort
		least := ^uint64(0)
		for a, x := range e.from {
			if x.seen < least {
				oldest, least = a, x.seen
			}
		}
		delete(e.from, oldest)
	}
	e.seq++
	e.from[from] = echo{nonce: nonce, seen: e.seq}
}

func (e *echoes) of(to netip.AddrPort) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.from[to].nonce
}

const senderHeader = "timed-auth-sender 1"

// NewSigner makes the signer of cfg. With a StateDir it takes the sender
// identity and counter from SenderStateFile there (made on first use),
// and saves a new reservation at once, so that a state directory that
// cannot be written fails here, at start. Without one it draws a random
// identity. now should be time.Now(): its monotonic reading drives the
// counter.
func NewSigner(cfg Config, now time.Time) (*Signer, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	s := &Signer{wanted: make(chan struct{}, 1), echoes: echoes{max: cfg.maxSenders()}, clock: cfg.Clock}
	if cfg.Mode == Off {
		return s, nil
	}
	if err := s.renew(); err != nil {
		return nil, err
	}
	s.key = cfg.signKey()
	s.reserve = uint64(2 * cfg.saveInterval())
	if cfg.StateDir != "" {
		s.path = filepath.Join(cfg.StateDir, SenderStateFile)
		lines, err := readState(s.path)
		if err != nil {
			return nil, err
		}
		if lines != nil {
			if s.sender, s.saved, err = parseSender(s.path, lines); err != nil {
				return nil, err
			}
		}
	}
	if s.sender == 0 {
		id, err := randomSender()
		if err != nil {
			return nil, err
		}
		s.sender = id
	}
	s.last = s.saved
	s.anchorC, s.anchorT = satAdd(s.saved, 1), now
	if err := s.Save(); err != nil {
		return nil, err
	}
	return s, nil
}

func randomSender() (uint64, error) { return random("sender identity") }

// random is a random uint64 other than 0.
func random(what string) (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("auth: %s: %w", what, err)
		}
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id, nil
		}
	}
}

// renew draws a new nonce: every datagram echoing the old one is refused
// from now on where a clock would move.
func (s *Signer) renew() error {
	n, err := random("nonce")
	if err != nil {
		return err
	}
	s.nonce.Store(n)
	return nil
}

// Nonce is the nonce this signer's trailers carry now (0 for Off).
func (s *Signer) Nonce() uint64 {
	if s == nil {
		return 0
	}
	return s.nonce.Load()
}

func parseSender(path string, lines []string) (id, reserved uint64, err error) {
	if err := stateHeader(path, lines, senderHeader); err != nil {
		return 0, 0, err
	}
	var haveID, haveRes bool
	for i, l := range lines[1:] {
		if skipLine(l) {
			continue
		}
		f := strings.Fields(l)
		bad := func(what string) error {
			return fmt.Errorf("%w: %s:%d: %s%s", ErrState, path, i+2, what, removeHint(path))
		}
		if len(f) != 2 {
			return 0, 0, bad("want \"sender <16 hex digits>\" or \"reserved <counter>\"")
		}
		switch f[0] {
		case "sender":
			if id, err = strconv.ParseUint(f[1], 16, 64); err != nil || id == 0 || len(f[1]) != 16 {
				return 0, 0, bad("sender is not 16 hex digits (and not zero)")
			}
			haveID = true
		case "reserved":
			if reserved, err = strconv.ParseUint(f[1], 10, 64); err != nil {
				return 0, 0, bad("reserved is not a decimal counter")
			}
			haveRes = true
		default:
			return 0, 0, bad("unknown key word")
		}
	}
	if !haveID || !haveRes {
		return 0, 0, fmt.Errorf("%w: %s: needs both a sender and a reserved line%s", ErrState, path, removeHint(path))
	}
	return id, reserved, nil
}

// Sender is the identity this signer writes in its trailers (0 for Off).
func (s *Signer) Sender() uint64 {
	if s == nil {
		return 0
	}
	return s.sender
}

// Sign returns the datagram to send: packet followed by its trailer (the
// trailer is appended to packet, as append does), echoing no nonce (a
// broadcast, or a tool that verifies nothing). With Mode Off, or a nil
// Signer, it returns packet itself. packet must be one whole TSP packet
// of 268 bytes (version 0 or 1) or one extension packet as
// tsp.ExtPacket.Marshal makes it: else ErrFraming, since a receiver could
// not find where the trailer starts. now should be time.Now(): the
// monotonic reading drives the counter, the wall clock is the timestamp
// (Config.Clock's reading instead, when set).
func (s *Signer) Sign(packet []byte, now time.Time) ([]byte, error) {
	return s.SignTo(packet, netip.AddrPort{}, now)
}

// SignTo is Sign for a datagram unicast to to: its trailer echoes the
// nonce of the last datagram the paired Verifier accepted from to, which
// a receiver wants in every datagram that moves its clock.
func (s *Signer) SignTo(packet []byte, to netip.AddrPort, now time.Time) ([]byte, error) {
	if s == nil || s.key == nil {
		return packet, nil
	}
	if end := packetEnd(packet); end != len(packet) {
		return nil, fmt.Errorf("auth: sign %d bytes: %w (%d)", len(packet), ErrFraming, end)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("auth: sign: %w", ErrClosed)
	}
	c := s.next(now)
	if s.path != "" && satAdd(c, s.reserve/2) > s.saved {
		signal(s.wanted)
	}
	s.mu.Unlock()
	stamp := now
	if s.clock != nil {
		stamp = s.clock()
	}
	t := Trailer{KeyID: s.key.ID, Sender: s.sender, Counter: c, Timestamp: stamp.UnixNano(), MACLen: s.key.Hash.Size(),
		Nonce: s.nonce.Load()}
	if to.IsValid() {
		t.Echo = s.echoes.of(netip.AddrPortFrom(to.Addr().Unmap(), to.Port()))
	}
	d := t.appendHeader(packet)
	return s.key.mac(d, d), nil
}

// next is the counter for a datagram sent at now: above the last one,
// and advancing with the monotonic clock (not the wall clock, which the
// daemon steps both ways), from anchorC at anchorT. Called with s.mu.
func (s *Signer) next(now time.Time) uint64 {
	c := satAdd(s.last, 1)
	if d := now.Sub(s.anchorT); d > 0 {
		c = max(c, satAdd(s.anchorC, uint64(d)))
	}
	s.last = c
	return c
}

// SaveWanted is signalled when the counter nears the saved reservation:
// save now rather than at the next tick.
func (s *Signer) SaveWanted() <-chan struct{} {
	if s == nil {
		return nil
	}
	return s.wanted
}

// Save writes the sender state: identity, and a reservation of counters
// two save intervals ahead of the last one used. Called every save
// interval and when SaveWanted is signalled. Without a StateDir it does
// nothing.
func (s *Signer) Save() error {
	if s == nil || s.path == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	return s.write(satAdd(s.last, s.reserve))
}

// Close stops signing and saves the exact last counter, so that the next
// run starts right after it.
func (s *Signer) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.path == "" {
		s.closed = true
		return nil
	}
	s.closed = true
	return s.write(s.last)
}

// write saves reserved as the reservation; called with s.mu.
func (s *Signer) write(reserved uint64) error {
	data := fmt.Appendf(nil, "%s\n# this daemon's sender identity and the highest counter it may have used\nsender %016x\nreserved %d\n",
		senderHeader, s.sender, reserved)
	if err := writeState(s.path, data); err != nil {
		return err
	}
	s.saved = reserved
	return nil
}

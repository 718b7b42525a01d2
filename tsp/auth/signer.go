package auth

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	s := &Signer{wanted: make(chan struct{}, 1)}
	if cfg.Mode == Off {
		return s, nil
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

func randomSender() (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("auth: sender identity: %w", err)
		}
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id, nil
		}
	}
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
// trailer is appended to packet, as append does). With Mode Off, or a nil
// Signer, it returns packet itself. packet must be one whole TSP packet
// of 268 bytes (version 0 or 1) or one extension packet as
// tsp.ExtPacket.Marshal makes it: else ErrFraming, since a receiver could
// not find where the trailer starts. now should be time.Now(): the
// monotonic reading drives the counter, the wall clock is the timestamp.
func (s *Signer) Sign(packet []byte, now time.Time) ([]byte, error) {
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
	t := Trailer{KeyID: s.key.ID, Sender: s.sender, Counter: c, Timestamp: now.UnixNano(), MACLen: s.key.Hash.Size()}
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

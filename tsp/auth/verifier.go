package auth

import (
	"cmp"
	"crypto/hmac"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Verifier checks every received datagram against the mode, the keys and
// the replay table. Safe for concurrent use. A nil *Verifier behaves as
// one made for Mode Off.
type Verifier struct {
	mode      Mode
	keys      *Keyring
	peers     []netip.Prefix
	window    time.Duration // ≤ 0: no first-contact check
	lookahead uint64        // ceilings run this far ahead of the counters seen, ns
	max       int
	path      string // "": nothing persisted
	wanted    chan struct{}
	// self is this daemon's own signer: its identity marks our own
	// datagrams come back, its nonce is what a datagram that moves a clock
	// must echo, and it learns the nonces of the senders accepted. nil:
	// no datagram that moves a clock is ever accepted.
	self  *Signer
	clock func() time.Time // nil: the window reads Check's now

	mu      sync.Mutex // guards what follows; held through Save's write
	senders map[uint64]*entry
	// gone holds the saved ceilings of senders evicted since the last
	// save: the file still has them, so a new entry for one of them may
	// not accept past that ceiling until the file is written again. Its
	// IDs are among the file's, so it holds at most max.
	gone   map[uint64]uint64
	seq    uint64 // ticks once per accepted datagram: recency for eviction
	closed bool
}

// entry is what the verifier knows of one sender.
type entry struct {
	last    uint64 // highest counter accepted (after a restart: the ceiling loaded)
	ceiling uint64 // counters above it are not accepted until saved; 0: not on disk, no ceiling
	want    uint64 // highest counter refused for the ceiling: the next save covers it
	seen    uint64 // Verifier.seq at the last accept
	// The replay window: recent holds the highest counters accepted (at
	// most ReplayWindow, ascending); every counter accepted and not in it
	// is at most floor. A counter above floor and not in recent was never
	// accepted, so a datagram overtaken by a later one of the same sender
	// (two goroutines sending, a network that reorders) still passes,
	// while every replay is a counter at most floor or in recent.
	floor  uint64
	recent []uint64
}

// ReplayWindow is how many of a sender's highest counters the verifier
// remembers: a datagram overtaken by up to that many later ones of its
// sender still passes (once).
const ReplayWindow = 64

// fresh reports whether counter c was never accepted from this sender.
func (e *entry) fresh(c uint64) bool {
	if c <= e.floor {
		return false
	}
	_, found := slices.BinarySearch(e.recent, c)
	return !found
}

// accept records c, which fresh approved.
func (e *entry) accept(c uint64) {
	i, _ := slices.BinarySearch(e.recent, c)
	e.recent = slices.Insert(e.recent, i, c)
	if len(e.recent) > ReplayWindow {
		e.floor, e.recent = e.recent[0], e.recent[1:]
	}
	e.last = max(e.last, c)
}

const replayHeader = "timed-auth-replay 1"

// NewVerifier makes the verifier of cfg, paired with self, the signer of
// the same daemon (made from the same cfg): datagrams of self's identity
// are its own come back (Own), those that move a clock must echo self's
// nonce, and self echoes the nonces of the senders accepted. With a nil
// self no datagram that moves a clock passes. With a StateDir it loads
// the replay table from ReplayStateFile there and saves it back at once
// with fresh ceilings, so that a state directory that cannot be written
// fails here, at start.
func NewVerifier(cfg Config, self *Signer) (*Verifier, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	v := &Verifier{
		mode:      cfg.Mode,
		keys:      cfg.Keys,
		peers:     slices.Clone(cfg.UnsignedPeers),
		window:    cfg.window(),
		lookahead: uint64(4 * cfg.saveInterval()),
		max:       cfg.maxSenders(),
		wanted:    make(chan struct{}, 1),
		senders:   map[uint64]*entry{},
		self:      self,
		clock:     cfg.Clock,
	}
	if cfg.Mode == Off || cfg.StateDir == "" {
		return v, nil
	}
	v.path = filepath.Join(cfg.StateDir, ReplayStateFile)
	lines, err := readState(v.path)
	if err != nil {
		return nil, err
	}
	if lines != nil {
		if err := v.load(lines); err != nil {
			return nil, err
		}
	}
	if err := v.Save(); err != nil {
		return nil, err
	}
	return v, nil
}

// load restores the table: each sender's ceiling becomes its last counter,
// so that every counter accepted before (all at most the ceiling) is a
// replay now. Lines run from least to most recently accepted; past
// MaxSenders, the oldest are dropped.
func (v *Verifier) load(lines []string) error {
	if err := stateHeader(v.path, lines, replayHeader); err != nil {
		return err
	}
	for i, l := range lines[1:] {
		if skipLine(l) {
			continue
		}
		f := strings.Fields(l)
		id, err1 := strconv.ParseUint(firstOr(f, 0), 16, 64)
		c, err2 := strconv.ParseUint(firstOr(f, 1), 10, 64)
		if len(f) != 2 || len(f[0]) != 16 || err1 != nil || err2 != nil || c == 0 {
			return fmt.Errorf("%w: %s:%d: want \"<sender, 16 hex digits> <ceiling, decimal, not 0>\"%s", ErrState, v.path, i+2, removeHint(v.path))
		}
		v.seq++
		v.senders[id] = &entry{last: c, ceiling: c, seen: v.seq, floor: c}
		if len(v.senders) > v.max {
			v.evict()
		}
	}
	return nil
}

func firstOr(f []string, i int) string {
	if i < len(f) {
		return f[i]
	}
	return ""
}

// Check decides on one received datagram from src, at now (the receive
// time, by our wall clock; Config.Clock's reading instead, when set). It returns the packet to decode (the datagram
// without its trailer) and the verdict; for Bad, a nil packet and a
// *DropError. The packet shares datagram's memory.
//
//   - Off (or a nil Verifier): Unchecked; a well-formed trailer is cut off.
//   - No trailer: Unsigned if the mode is Optional and src is an unsigned
//     peer, else Bad (ErrUnsigned).
//   - A trailer: its key must be known (ErrUnknownKey) and its MAC verify
//     (ErrBadMAC). If its sender is our own signer's identity, Own: our
//     datagram came back (the caller drops it as its own echo). Else its
//     counter must be fresh (ErrReplay); a packet that moves a clock
//     (MovesClock) must echo our signer's nonce (ErrNoEcho); the counter
//     must be covered by the saved state (ErrNotSaved) and, at first
//     contact with the sender, its timestamp be within the window of now
//     (ErrWindow); then Valid, and our signer echoes the trailer's nonce
//     to src from now on. Bytes after the packet that are no trailer:
//     ErrMalformed.
func (v *Verifier) Check(src netip.AddrPort, datagram []byte, now time.Time) ([]byte, Result, error) {
	packet, trailer, err := Split(datagram)
	if v == nil || v.mode == Off {
		return packet, Unchecked, nil
	}
	if err != nil {
		return nil, Bad, err
	}
	if trailer == nil {
		if v.mode == Optional && v.unsignedPeer(src.Addr()) {
			return packet, Unsigned, nil
		}
		return nil, Bad, drop(ReasonUnsigned, "from %v, mode %v%s", src, v.mode, v.unsignedHint())
	}
	t, mac, _ := ParseTrailer(trailer) // Split checked it
	k, ok := v.keys.Lookup(t.KeyID)
	if !ok {
		return nil, Bad, drop(ReasonUnknownKey, "key %d from %v: not in the key file (IDs there: %v)", t.KeyID, src, v.keys.ids)
	}
	if k.Hash.Size() != t.MACLen {
		return nil, Bad, drop(ReasonBadMAC, "from %v: key %d is %v here (%d-byte MAC), the sender's MAC has %d bytes: the key files differ",
			src, k.ID, k.Hash, k.Hash.Size(), t.MACLen)
	}
	var buf [64]byte
	if !hmac.Equal(k.mac(buf[:0], packet, trailer[:TrailerHeaderSize]), mac) {
		return nil, Bad, drop(ReasonBadMAC, "from %v with key %d: altered, or the key material differs", src, k.ID)
	}
	if v.self != nil && t.Sender == v.self.sender {
		return packet, Own, nil
	}
	if err := v.fresh(src, &t, MovesClock(packet), now); err != nil {
		return nil, Bad, err
	}
	if v.self != nil {
		v.self.echoes.heard(src, t.Nonce)
	}
	return packet, Valid, nil
}

// proven reports whether a trailer echoes our current nonce.
func (v *Verifier) proven(t *Trailer) bool {
	return v.self != nil && t.Echo != 0 && t.Echo == v.self.Nonce()
}

func (v *Verifier) noEcho(src netip.AddrPort, t *Trailer) error {
	what := "echoes no nonce"
	if t.Echo != 0 {
		what = fmt.Sprintf("echoes nonce %016x, ours is another (sent before our start, or before we renewed it)", t.Echo)
	}
	return drop(ReasonNoEcho, "sender %016x from %v, counter %d: it moves a clock and %s: a datagram made before we could be heard, or a replay", t.Sender, src, t.Counter, what)
}

func (v *Verifier) unsignedPeer(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range v.peers {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (v *Verifier) unsignedHint() string {
	if v.mode == Optional {
		return ", not an unsigned peer"
	}
	return ""
}

// fresh is the replay check of a datagram whose MAC verified, and its
// record: only key holders get here, so only they make entries. A
// datagram that moves a clock (clock) must also echo our nonce; one that
// does not is dropped, and makes no entry.
func (v *Verifier) fresh(src netip.AddrPort, t *Trailer, clock bool, now time.Time) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return drop(ReasonClosed, "from %v", src)
	}
	c := t.Counter
	if e := v.senders[t.Sender]; e != nil {
		if !e.fresh(c) {
			return drop(ReasonReplay, "sender %016x from %v: counter %d, already accepted or older than the %d last accepted (up to %d)", t.Sender, src, c, ReplayWindow, e.last)
		}
		if clock && !v.proven(t) {
			return v.noEcho(src, t)
		}
		if e.ceiling != 0 && c > e.ceiling {
			e.want = max(e.want, c)
			signal(v.wanted)
			return drop(ReasonNotSaved, "sender %016x from %v: counter %d, saved state covers up to %d: passes once saved", t.Sender, src, c, e.ceiling)
		}
		v.seq++
		e.accept(c)
		e.seen = v.seq
		if e.ceiling != 0 && e.ceiling-c < v.lookahead/2 {
			signal(v.wanted)
		}
		return nil
	}
	// First contact: the counter cannot tell a replay. Where a clock
	// would move, the echo of our nonce must; elsewhere the clock.
	if clock && !v.proven(t) {
		return v.noEcho(src, t)
	}
	if v.clock != nil {
		now = v.clock()
	}
	if v.window > 0 {
		if d, ahead := clockDiff(t.Timestamp, now.UnixNano()); d > uint64(v.window) {
			way := "behind"
			if ahead {
				way = "ahead of"
			}
			return drop(ReasonWindow, "first contact with sender %016x from %v: its clock is %s %s ours, beyond the window of %v: set the clock that is wrong, or widen the window for this first contact",
				t.Sender, src, fmtNanos(d), way, v.window)
		}
	}
	ceiling, stale := v.gone[t.Sender]
	if stale && c > ceiling {
		signal(v.wanted)
		return drop(ReasonNotSaved, "first contact with sender %016x from %v, evicted since the last save: counter %d, the saved state has %d: passes once saved", t.Sender, src, c, ceiling)
	}
	delete(v.gone, t.Sender) // the entry carries the ceiling now
	if len(v.senders) >= v.max {
		v.evict()
	}
	v.seq++
	// Counters before the first one accepted are not taken later: the
	// window opens at first contact.
	e := &entry{ceiling: ceiling, seen: v.seq, floor: c - 1}
	e.accept(c)
	v.senders[t.Sender] = e
	if v.path != "" {
		signal(v.wanted)
	}
	return nil
}

// clockDiff is |ts − now| in nanoseconds, without overflow, and whether
// ts is ahead.
func clockDiff(ts, now int64) (uint64, bool) {
	if ts > now {
		return uint64(ts) - uint64(now), true
	}
	return uint64(now) - uint64(ts), false
}

func fmtNanos(d uint64) string {
	if d > uint64(1<<63-1) {
		return "more than 292 years"
	}
	return time.Duration(d).Round(time.Millisecond).String()
}

// evict forgets the sender accepted least recently; called with v.mu.
// That sender's next datagram is a first contact again. Its saved ceiling
// is kept in gone until the next save.
func (v *Verifier) evict() {
	var oldest *entry
	var id uint64
	for i, e := range v.senders {
		if oldest == nil || e.seen < oldest.seen {
			id, oldest = i, e
		}
	}
	if oldest == nil {
		return
	}
	delete(v.senders, id)
	// A datagram accepted from that sender, replayed now, would be a first
	// contact: a new nonce keeps those that move a clock out.
	if v.self != nil {
		_ = v.self.renew() // on failure the nonce stays: rand.Read does not fail on Linux
	}
	if oldest.ceiling != 0 {
		if v.gone == nil {
			v.gone = map[uint64]uint64{}
		}
		v.gone[id] = oldest.ceiling
	}
}

// Len is the number of senders in the replay table.
func (v *Verifier) Len() int {
	if v == nil {
		return 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.senders)
}

// SaveWanted is signalled when a Save should not wait for the next tick:
// a new sender, a sender nearing its saved ceiling, or a datagram dropped
// for ErrNotSaved.
func (v *Verifier) SaveWanted() <-chan struct{} {
	if v == nil {
		return nil
	}
	return v.wanted
}

// Save writes the replay table with each sender's ceiling four save
// intervals ahead of its last counter (or of a counter refused for the
// ceiling), then makes those ceilings the limits of what Check accepts.
// Check waits while Save writes. Call it every save interval and when
// SaveWanted is signalled; without a StateDir it does nothing.
func (v *Verifier) Save() error {
	if v == nil || v.path == "" {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	return v.write(func(e *entry) uint64 { return satAdd(max(e.last, e.want), v.lookahead) })
}

// Close stops accepting (Check returns ErrClosed) and saves each sender's
// exact last counter as its ceiling: after a clean stop the next run
// accepts every sender's next datagram at once.
func (v *Verifier) Close() error {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed || v.path == "" {
		v.closed = true
		return nil
	}
	v.closed = true
	return v.write(func(e *entry) uint64 { return e.last })
}

// write saves the table with the ceilings ceil gives and, once they are
// on disk, makes them the entries' ceilings; called with v.mu.
func (v *Verifier) write(ceil func(*entry) uint64) error {
	type row struct {
		id uint64
		e  *entry
	}
	rows := make([]row, 0, len(v.senders))
	for id, e := range v.senders {
		rows = append(rows, row{id, e})
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(a.e.seen, b.e.seen) })
	ceilings := make([]uint64, len(rows))
	b := fmt.Appendf(nil, "%s\n# sender ceiling: no counter above the ceiling was accepted; least recently heard first\n", replayHeader)
	for i, r := range rows {
		ceilings[i] = ceil(r.e)
		b = fmt.Appendf(b, "%016x %d\n", r.id, ceilings[i])
	}
	if err := writeState(v.path, b); err != nil {
		return err
	}
	for i, r := range rows {
		r.e.ceiling = ceilings[i]
	}
	v.gone = nil // the file has only the senders in the table now
	return nil
}

package udp

import (
	"sync/atomic"

	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/auth"
)

// DropReason says why the receiver dropped a datagram. The first five are
// BSD readmsg's checks, in its order.
type DropReason uint8

const (
	DropShort          DropReason = iota // fewer than 44 bytes
	DropBadVersion                       // version above 1 and not the extension framing
	DropNoNUL                            // no NUL in the name bytes
	DropUnknownNetwork                   // source on no served network (nor a peer)
	DropOwnEcho                          // our own name: our broadcast came back
	DropBadExt                           // extension framing that does not decode
	DropQueueFull                        // the consumer of Packets() is behind
	DropMalformed                        // any other decode error (none today)
	DropBadName                          // a name that is not a printable host name
	DropRateLimited                      // its source (or all sources together) over the rate limit
	DropAuth                             // refused by authentication: counted in Stats.Auth by its reason only
	numDropReasons
)

var dropNames = [numDropReasons]string{
	"short", "bad version", "no NUL", "unknown network", "own echo", "bad extension", "queue full", "malformed", "bad name", "rate limited", "auth",
}

func (r DropReason) String() string {
	if r < numDropReasons {
		return dropNames[r]
	}
	return "unknown"
}

// Stats is a snapshot of the transport's counters. Maps hold only non-zero
// counts. Received counts datagrams delivered on Packets(); every other
// datagram read is in Dropped.
type Stats struct {
	Received    map[tsp.Type]uint64
	Sent        map[tsp.Type]uint64
	ReceivedExt map[tsp.ExtKind]uint64
	SentExt     map[tsp.ExtKind]uint64
	// Dropped and Auth count each datagram dropped once: Dropped by the
	// transport's reason (never DropAuth), Auth the datagrams refused by
	// authentication, by its reason. DropCounts names them all.
	Dropped    map[DropReason]uint64
	Auth       map[auth.Reason]uint64
	ReadErrors uint64
	SendErrors uint64
	// KernelDrops is how many datagrams the kernel dropped on this socket
	// for a full receive buffer (SO_RXQ_OVFL, as of the last datagram
	// read): they never reached the transport, so Dropped lacks them.
	KernelDrops uint64
}

// counters are updated by the reader and by senders concurrently.
type counters struct {
	recv, sent, recvExt, sentExt [256]atomic.Uint64
	dropped                      [numDropReasons]atomic.Uint64
	auth                         [auth.NumReasons]atomic.Uint64
	readErrors, sendErrors       atomic.Uint64
	kernelDrops                  atomic.Uint64
}

func (c *counters) snapshot() Stats {
	s := Stats{
		Received:    map[tsp.Type]uint64{},
		Sent:        map[tsp.Type]uint64{},
		ReceivedExt: map[tsp.ExtKind]uint64{},
		SentExt:     map[tsp.ExtKind]uint64{},
		Dropped:     map[DropReason]uint64{},
		Auth:        map[auth.Reason]uint64{},
		ReadErrors:  c.readErrors.Load(),
		SendErrors:  c.sendErrors.Load(),
		KernelDrops: c.kernelDrops.Load(),
	}
	for i := range 256 {
		put(s.Received, tsp.Type(i), c.recv[i].Load())
		put(s.Sent, tsp.Type(i), c.sent[i].Load())
		put(s.ReceivedExt, tsp.ExtKind(i), c.recvExt[i].Load())
		put(s.SentExt, tsp.ExtKind(i), c.sentExt[i].Load())
	}
	for i := range numDropReasons {
		put(s.Dropped, i, c.dropped[i].Load())
	}
	for i := range auth.NumReasons {
		put(s.Auth, i, c.auth[i].Load())
	}
	return s
}

// AuthDropPrefix starts the names DropCounts gives the drops of
// authentication: "auth " and the auth.Reason ("auth replayed counter").
const AuthDropPrefix = "auth "

// DropCounts is every drop counter under its name, for the status and
// the metrics: the transport's reasons by DropReason.String, those of
// authentication as AuthDropPrefix + auth.Reason.String. Each datagram
// dropped is in exactly one, so the counters may be summed.
func (s Stats) DropCounts() map[string]uint64 {
	out := make(map[string]uint64, len(s.Dropped)+len(s.Auth))
	for r, n := range s.Dropped {
		out[r.String()] += n
	}
	for r, n := range s.Auth {
		out[AuthDropPrefix+r.String()] += n
	}
	return out
}

func put[K comparable](m map[K]uint64, k K, v uint64) {
	if v != 0 {
		m[k] = v
	}
}

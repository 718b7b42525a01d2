package limit

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of a Limiter, sized for TSP on a LAN. A master measures each
// slave with up to 24 probes a round, so one source may send a few dozen
// datagrams at once and then next to nothing until the next round, 240 s
// later; a master of 100 slaves receives some 2,400 probe replies within
// the round's 3 s budget.
const (
	DefaultRate        rate.Limit = 16   // datagrams per second from one source
	DefaultBurst                  = 64   // from one source at once
	DefaultGlobalRate  rate.Limit = 1000 // datagrams per second from all sources
	DefaultGlobalBurst            = 4000
	DefaultMaxSources             = 4096 // sources tracked at once
)

// Config sizes a Limiter; zero fields take the defaults.
type Config struct {
	Rate        rate.Limit // per source, datagrams per second
	Burst       int        // per source
	GlobalRate  rate.Limit // all sources together
	GlobalBurst int
	// MaxSources bounds the table of sources: when it is full, the source
	// seen least recently is forgotten (and starts again with a full
	// bucket if it comes back).
	MaxSources int
}

func (c Config) withDefaults() Config {
	orDefault(&c.Rate, DefaultRate)
	orDefault(&c.Burst, DefaultBurst)
	orDefault(&c.GlobalRate, DefaultGlobalRate)
	orDefault(&c.GlobalBurst, DefaultGlobalBurst)
	orDefault(&c.MaxSources, DefaultMaxSources)
	return c
}

// orDefault sets *p to def unless it is positive.
func orDefault[T ~int | ~int64 | ~float64](p *T, def T) {
	if *p <= 0 {
		*p = def
	}
}

// Limiter decides, before a datagram changes any state, whether its source
// may send it: each source (address and port: daemons that share an
// address, as in peers mode, are separate senders) has its own token
// bucket, and all of
// them share an aggregate one, so that a flood from random spoofed sources,
// each new and with a full bucket, is capped as a whole. The table of
// sources is bounded (Config.MaxSources, least recently seen evicted).
type Limiter struct {
	cfg Config

	mu      sync.Mutex
	global  *rate.Limiter
	sources *lru[netip.AddrPort, *rate.Limiter]

	allowed, deniedSource, deniedGlobal, evicted, knownPastGlobal atomic.Uint64
}

// LimiterStats are a Limiter's counters since it was made.
type LimiterStats struct {
	Allowed      uint64
	DeniedSource uint64 // the source's own bucket was empty
	DeniedGlobal uint64 // the aggregate bucket was empty
	Evicted      uint64 // sources forgotten to make room for new ones
	Sources      int    // sources tracked now
	// KnownPastGlobal counts the datagrams of known sources (AllowKnown)
	// let through while the aggregate bucket was empty.
	KnownPastGlobal uint64
}

// NewLimiter returns a Limiter with cfg's rates (defaults for zero fields).
func NewLimiter(cfg Config) *Limiter {
	cfg = cfg.withDefaults()
	return &Limiter{
		cfg:     cfg,
		global:  rate.NewLimiter(cfg.GlobalRate, cfg.GlobalBurst),
		sources: newLRU[netip.AddrPort, *rate.Limiter](cfg.MaxSources),
	}
}

// Config is the configuration in effect, defaults filled in.
func (l *Limiter) Config() Config { return l.cfg }

// Allow reports whether a datagram from src, received at now, may be
// processed, and takes a token from src's bucket and from the aggregate
// one if so. A denied datagram takes no token: the aggregate is checked
// before it is spent, and a new source denied by the aggregate is not even
// entered in the table, so a spoofed flood churns the table no faster than
// the aggregate rate.
func (l *Limiter) Allow(src netip.AddrPort, now time.Time) bool { return l.allow(src, now, false) }

// AllowKnown is Allow for a source the caller knows for one of its own
// (a configured peer): its own bucket limits it as any other, and it
// spends an aggregate token when there is one, but an empty aggregate
// bucket does not refuse it. The aggregate is what a flood from many
// sources drains, made-up addresses or merely one host's many ports; were
// the daemons' own datagrams refused with the flood's, a master would
// stop hearing its slaves and the election would fall apart under a
// flood that no source of which exceeds its own rate.
func (l *Limiter) AllowKnown(src netip.AddrPort, now time.Time) bool { return l.allow(src, now, true) }

func (l *Limiter) allow(src netip.AddrPort, now time.Time, known bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	global := l.global.TokensAt(now) >= 1
	if !global && !known {
		l.deniedGlobal.Add(1)
		return false
	}
	if b, ok := l.sources.get(src); ok {
		if !(*b).AllowN(now, 1) {
			l.deniedSource.Add(1)
			return false
		}
	} else {
		b := rate.NewLimiter(l.cfg.Rate, l.cfg.Burst)
		b.AllowN(now, 1) // a new bucket is full
		if _, _, evicted := l.sources.add(src, b); evicted {
			l.evicted.Add(1)
		}
	}
	if global {
		l.global.AllowN(now, 1) // cannot fail: tokens were checked under mu
	} else {
		l.knownPastGlobal.Add(1)
	}
	l.allowed.Add(1)
	return true
}

// Stats returns the counters; they are read without the lock, so a
// snapshot taken during a flood may be off by the datagrams in flight.
func (l *Limiter) Stats() LimiterStats {
	l.mu.Lock()
	n := l.sources.len()
	l.mu.Unlock()
	return LimiterStats{
		Allowed:      l.allowed.Load(),
		DeniedSource: l.deniedSource.Load(),
		DeniedGlobal: l.deniedGlobal.Load(),
		Evicted:      l.evicted.Load(),
		Sources:      n,

		KnownPastGlobal: l.knownPastGlobal.Load(),
	}
}

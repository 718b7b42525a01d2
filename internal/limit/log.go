package limit

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// Defaults of a LogLimiter.
const (
	DefaultLogLines    = 1           // lines per key per interval
	DefaultLogInterval = time.Minute // the span Lines and Total count over
	DefaultLogTotal    = 60          // lines per interval over all keys
	DefaultMaxKeys     = 1024        // keys tracked at once
)

// Key names what a limited line says: its message and, for a line about a
// peer, the peer's address. Both are plain values, so making a Key in the
// receive path allocates nothing.
type Key struct {
	Msg    string
	Source netip.Addr // the zero Addr for lines about no one in particular
}

// LogConfig sizes a LogLimiter; zero fields take the defaults.
type LogConfig struct {
	Lines    int           // lines per key per Interval
	Interval time.Duration // the span Lines and Total count over
	// Total caps the lines of all keys together per Interval, so that a
	// flood from ever-new (spoofed) sources, each a new key, cannot write
	// more either.
	Total int
	// MaxKeys bounds the keys tracked; the least recently seen is
	// forgotten, its pending count going to Flush's others.
	MaxKeys int
	// Once: a key logs its Lines lines once, not once per Interval, and
	// is only counted afterwards (for as long as it is tracked). For
	// "refused X from Y" lines, which say all there is to say the first
	// time.
	Once bool
}

func (c LogConfig) withDefaults() LogConfig {
	orDefault(&c.Lines, DefaultLogLines)
	orDefault(&c.Interval, DefaultLogInterval)
	orDefault(&c.Total, DefaultLogTotal)
	orDefault(&c.MaxKeys, DefaultMaxKeys)
	return c
}

// window is a fixed interval's count of lines, and what was suppressed
// since the last report.
type window struct {
	start      time.Time // of the interval
	n          int       // lines logged in it
	reported   time.Time // last line logged or flushed
	suppressed uint64    // since reported
}

// roll starts a new interval at now if the current one has ended.
func (w *window) roll(now time.Time, interval time.Duration) {
	if !now.Before(w.start.Add(interval)) {
		w.start, w.n = now, 0
	}
}

// LogLimiter decides which lines to log: at most Lines per key and Total
// over all keys per Interval. It is the pure part of Logger, for callers
// that log otherwise.
type LogLimiter struct {
	cfg LogConfig

	mu    sync.Mutex
	keys  *lru[Key, window]
	total window // all keys together; only start and n are used
	lost  uint64 // suppressed lines of keys forgotten before a report

	logged, suppressed atomic.Uint64
}

// LogStats are a LogLimiter's counters since it was made.
type LogStats struct {
	Logged, Suppressed uint64
	Keys               int // tracked now
}

// Suppressed is one key's count of lines suppressed since its last report.
type Suppressed struct {
	Key Key
	N   uint64
}

// NewLogLimiter returns a LogLimiter (defaults for cfg's zero fields).
func NewLogLimiter(cfg LogConfig) *LogLimiter {
	cfg = cfg.withDefaults()
	return &LogLimiter{cfg: cfg, keys: newLRU[Key, window](cfg.MaxKeys)}
}

// Allow reports whether k's line may be logged at now and, if so, how many
// of k's lines were suppressed since its last report: the line should say
// so (Logger adds the field suppressed=N).
func (l *LogLimiter) Allow(k Key, now time.Time) (ok bool, suppressed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, found := l.keys.get(k)
	if !found {
		var old window
		var evicted bool
		w, old, evicted = l.keys.add(k, window{start: now, reported: now})
		if evicted {
			l.lost += old.suppressed
		}
	}
	if !l.cfg.Once {
		w.roll(now, l.cfg.Interval)
	}
	l.total.roll(now, l.cfg.Interval)
	if w.n >= l.cfg.Lines || l.total.n >= l.cfg.Total {
		w.suppressed++
		l.suppressed.Add(1)
		return false, 0
	}
	w.n++
	l.total.n++
	suppressed, w.suppressed, w.reported = w.suppressed, 0, now
	l.logged.Add(1)
	return true, suppressed
}

// Flush returns, for every key with suppressed lines whose last report is
// at least an Interval old, how many, and counts them as reported: at most
// Total keys, those with the most lines. The rest, and the lines of keys
// since forgotten, are summed in others. Call it about once an Interval,
// so that a key that went quiet still gets its count said.
func (l *LogLimiter) Flush(now time.Time) (pending []Suppressed, others uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys.each(func(k Key, w *window) {
		if w.suppressed > 0 && !now.Before(w.reported.Add(l.cfg.Interval)) {
			pending = append(pending, Suppressed{Key: k, N: w.suppressed})
			w.suppressed, w.reported = 0, now
		}
	})
	others, l.lost = l.lost, 0
	if len(pending) > l.cfg.Total {
		slices.SortStableFunc(pending, func(a, b Suppressed) int { return cmp.Compare(b.N, a.N) })
		for _, p := range pending[l.cfg.Total:] {
			others += p.N
		}
		pending = pending[:l.cfg.Total]
	}
	return pending, others
}

// Stats returns the counters.
func (l *LogLimiter) Stats() LogStats {
	l.mu.Lock()
	n := l.keys.len()
	l.mu.Unlock()
	return LogStats{Logged: l.logged.Load(), Suppressed: l.suppressed.Load(), Keys: n}
}

// Logger logs through a logrus.FieldLogger what its LogLimiter allows.
// Logrus hooks cannot drop an entry, hence a wrapper; and it hands out the
// entry rather than logging a message itself, so that a suppressed line
// costs no fields:
//
//	k := limit.Key{Msg: "refused ADJTIME from a host that is not our master", Source: src}
//	if e := lg.Entry(k, now); e != nil {
//		e.WithField("name", p.Name).Warn(k.Msg)
//	}
type Logger struct {
	log logrus.FieldLogger
	lim *LogLimiter
}

// NewLogger returns a Logger over log, limited as cfg says.
func NewLogger(log logrus.FieldLogger, cfg LogConfig) *Logger {
	return &Logger{log: log, lim: NewLogLimiter(cfg)}
}

// Limiter is the Logger's LogLimiter, for its Stats.
func (l *Logger) Limiter() *LogLimiter { return l.lim }

// Entry returns the entry to log k's line at now with, or nil when the line
// is suppressed. The entry carries k.Source as "source" (when valid) and,
// after suppressed lines, their number as "suppressed".
func (l *Logger) Entry(k Key, now time.Time) *logrus.Entry {
	ok, n := l.lim.Allow(k, now)
	if !ok {
		return nil
	}
	return l.entry(k, n)
}

func (l *Logger) entry(k Key, suppressed uint64) *logrus.Entry {
	f := logrus.Fields{}
	if k.Source.IsValid() {
		f["source"] = k.Source.String()
	}
	if suppressed > 0 {
		f["suppressed"] = suppressed
	}
	return l.log.WithFields(f)
}

// Flush logs at level, for every key that has gone quiet with suppressed
// lines, its message with suppressed=N, and one line for the others (see
// LogLimiter.Flush): at most Total + 1 lines.
func (l *Logger) Flush(now time.Time, level logrus.Level) {
	pending, others := l.lim.Flush(now)
	for _, p := range pending {
		l.entry(p.Key, p.N).Log(level, p.Key.Msg)
	}
	if others > 0 {
		l.log.WithField("suppressed", others).Log(level, "suppressed lines of other keys")
	}
}

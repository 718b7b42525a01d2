package timed

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/timed-project/timed/internal/limit"
	"golang.org/x/sys/unix"
)

// NewLogger builds the daemon's logger: text by default, JSON on request,
// and no timestamps when stderr is the systemd journal, which stamps every
// line itself.
func NewLogger(w io.Writer, level logrus.Level, format string) (*logrus.Logger, error) {
	l := logrus.New()
	l.SetOutput(w)
	l.SetLevel(level)
	journal := stderrIsJournal()
	switch format {
	case "json":
		l.SetFormatter(&logrus.JSONFormatter{DisableTimestamp: journal})
	case "text", "":
		l.SetFormatter(&logrus.TextFormatter{DisableTimestamp: journal, FullTimestamp: true, DisableColors: journal})
	default:
		return nil, fmt.Errorf("log-format %q: accepted: text or json", format)
	}
	return l, nil
}

// stderrIsJournal follows systemd.exec(5): JOURNAL_STREAM holds the device
// and inode of the journal stream, and it counts only if stderr is still
// that file (a child whose stderr was redirected inherits the variable).
func stderrIsJournal() bool {
	v := os.Getenv("JOURNAL_STREAM")
	if v == "" {
		return false
	}
	var dev, ino uint64
	if _, err := fmt.Sscanf(v, "%d:%d", &dev, &ino); err != nil {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(os.Stderr.Fd()), &st); err != nil {
		return false
	}
	return uint64(st.Dev) == dev && st.Ino == ino
}

// logFlushInterval is how often the rate-limited loggers report what they
// suppressed.
const logFlushInterval = time.Minute

// flushLogs reports, once a logFlushInterval, how many lines about others'
// packets were suppressed, and schedules itself again on the loop.
func (d *Daemon) flushLogs() {
	d.after(logFlushInterval, func() {
		now := time.Now()
		d.refusedLog.Flush(now, logrus.DebugLevel)
		d.refusedOnce.Flush(now, logrus.WarnLevel)
		d.netLog.Flush(now, logrus.InfoLevel)
		d.flushLogs()
	})
}

// peerLog is the entry for a line about a packet from a peer, or nil when
// the rate limit suppresses it: anyone can send packets at any rate, and
// a line per packet would let them fill the disk. One line per message
// and source a minute; the count suppressed comes with the next one or the
// minute's flush.
func (d *Daemon) peerLog(msg string, from netip.AddrPort) *logrus.Entry {
	e := d.refusedLog.Entry(limit.Key{Msg: msg, Source: from.Addr()}, time.Now())
	if e == nil {
		return nil
	}
	return e.WithField("from", from.String())
}

package timed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

func TestLoggerFormats(t *testing.T) {
	var buf bytes.Buffer
	l, err := NewLogger(&buf, logrus.InfoLevel, "json")
	if err != nil {
		t.Fatal(err)
	}
	l.WithField("state", "master").Info("state change")
	l.Debug("hidden at info")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["state"] != "master" || line["msg"] != "state change" {
		t.Fatalf("json line %q: %v", buf.String(), err)
	}
	if strings.Contains(buf.String(), "hidden") {
		t.Fatal("debug line logged at info level")
	}
	if _, err := NewLogger(&buf, logrus.InfoLevel, "xml"); err == nil {
		t.Fatal("bad format accepted")
	}
}

func TestJournalDetection(t *testing.T) {
	t.Setenv("JOURNAL_STREAM", "")
	if stderrIsJournal() {
		t.Fatal("journal without JOURNAL_STREAM")
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(os.Stderr.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino))
	if !stderrIsJournal() {
		t.Fatal("stderr matches JOURNAL_STREAM but was not taken for the journal")
	}
	var buf bytes.Buffer
	l, _ := NewLogger(&buf, logrus.InfoLevel, "text")
	l.Info("x")
	if strings.Contains(buf.String(), "time=") {
		t.Fatalf("timestamp written to the journal: %q", buf.String())
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino+1))
	if stderrIsJournal() {
		t.Fatal("a stale JOURNAL_STREAM (stderr redirected) was believed")
	}
}

package tests

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSighupReload: SIGHUP re-reads the file, applies what can change
// while running (log level, trusted hosts, tracing) and names what needs a
// restart (here the log format) without stopping.
func TestSighupReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "timed.yaml")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("log-level: info\ntrace: false\n")
	c := newCluster(t, make([]time.Duration, 1), func(int) []string { return []string{"-M", "--config", file} })
	n := c.nodes[0]
	c.await("daemon up", 10*time.Second, func() (bool, string) {
		_, err := c.status(n)
		return err == nil, "no status yet"
	})
	// Flags win over the file (newCluster sets --port and --log-level), so
	// the file changes what only it sets: trace and trusted, which reload,
	// and log-format, which needs a restart.
	write("trace: true\ntrusted: [127.0.0.1, localhost]\nlog-format: json\n")
	if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	c.await("tracing on after SIGHUP", 10*time.Second, func() (bool, string) {
		s, err := c.status(n)
		if err != nil {
			return false, err.Error()
		}
		return s.Trace, "trace still off"
	})
	c.await("the reload logged", 5*time.Second, func() (bool, string) {
		n.mu.Lock()
		log := n.log.String()
		n.mu.Unlock()
		return strings.Contains(log, "configuration reloaded") && strings.Contains(log, "not reloaded, restart timed to change: log-format"),
			"no reload lines in the log yet"
	})
	if _, err := c.status(n); err != nil {
		t.Fatalf("daemon gone after SIGHUP: %v", err)
	}
}

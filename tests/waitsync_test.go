package tests

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWaitsync: `timedc waitsync` returns once each daemon of a pair says
// it is synchronised (the slave's offset within --max-offset too), and
// the binary's exit codes tell the ways of failing apart: 3 where no
// daemon answers, 1 where the socket refuses the user (with the hint).
// Their clocks are simulated: the kernel's sync state is never told.
func TestWaitsync(t *testing.T) {
	t.Parallel()
	c := newCluster(t, fiveOffsets[:2], func(int) []string { return []string{"-M"} })
	for _, n := range c.nodes {
		// From the daemons' start: an election, then a round.
		out, err := timedc(t, "--json", "--control-socket", n.socket(), "--timeout", electionBound.String(),
			"waitsync", "--interval", "100ms", "--max-offset", "100ms")
		var res []map[string]any
		if err != nil || json.Unmarshal([]byte(out), &res) != nil || len(res) != 1 {
			t.Fatalf("%s: %v: %s", n.name, err, out)
		}
		if res[0]["synchronised"] != true || res[0]["state"] != "synchronised" {
			t.Errorf("%s: %s", n.name, out)
		}
		st, err := c.status(n)
		if err != nil || st.Sync == nil || st.Sync.State != "synchronised" {
			t.Errorf("%s: waitsync returned, status says %+v (%v)", n.name, st, err)
		} else if st.KernelSync != nil {
			t.Errorf("%s: a simulated clock, yet the kernel was told %+v", n.name, st.KernelSync)
		}
	}

	exit := func(err error) int {
		var e *exec.ExitError
		if errors.As(err, &e) {
			return e.ExitCode()
		}
		return -1
	}
	_, err := timedc(t, "--control-socket", filepath.Join(t.TempDir(), "none.sock"), "--timeout", "300ms", "waitsync", "--interval", "100ms")
	if exit(err) != 3 || !strings.Contains(err.Error(), "no answer from timed after ") {
		t.Errorf("no daemon: exit %d: %v", exit(err), err)
	}
	if os.Geteuid() == 0 {
		cmd := exec.Command(timedcBin, "--control-socket", c.nodes[0].socket(), "--timeout", "5s", "waitsync")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if exit(err) != 1 || !strings.Contains(string(out), "permission denied: ") || !strings.Contains(string(out), "run timedc as root") {
			t.Errorf("as nobody: exit %d: %s", exit(err), out)
		}
	}
}

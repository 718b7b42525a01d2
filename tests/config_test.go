package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/timed-project/timed/timed/control"
)

// oneAnswer reads timedc's --json output for a command that speaks to
// one host (or the local daemon): an array of one object
// (docs/operating.md, "timedc's JSON"), decoded into v.
func oneAnswer(out string, v any) error {
	var answers []json.RawMessage
	if err := json.Unmarshal([]byte(out), &answers); err != nil {
		return err
	}
	if len(answers) != 1 {
		return fmt.Errorf("%d answers, want 1", len(answers))
	}
	return json.Unmarshal(answers[0], v)
}

// TestConfigProblemsStopTheDaemon: the daemon with a typo in its file, an
// unknown variable and bad values exits at once, non-zero, naming every
// one of them.
func TestConfigProblemsStopTheDaemon(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "timed.yaml")
	if err := os.WriteFile(file, []byte("master: true\nsync-intervall: 10s\nfoo: bar\nport: many\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(timedBin, "--config", file, "--clock", "dry-run", "--log-format", "xml", "--control-socket", "")
	cmd.Env = append(os.Environ(), "TIMED_SYNC_INTERVALL=10s", "TIMED_E2E_RUN=ignored", "TIMED_VECTORS=/nowhere")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("started with a bad configuration:\n%s", out)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v to refuse", took)
	}
	for _, want := range []string{
		"timed: 5 problems:",
		`timed: unknown key "sync-intervall" in ` + file + `:2 (did you mean "sync-interval"?)`,
		`timed: unknown key "foo" in ` + file + ":3\n",
		"timed: unknown environment variable TIMED_SYNC_INTERVALL (did you mean TIMED_SYNC_INTERVAL?)",
		`timed: invalid port "many": accepted: an integer from 1 to 65535`,
		`timed: invalid log-format "xml": accepted: text or json`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// The user's election timers alone: the timers that follow them do.
	out, err = exec.Command(timedBin, "--config", "", "--election-timeout-min", "4s", "--election-timeout-max", "8s", "config").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "# derived from election-timeout-min") {
		t.Errorf("timed --election-timeout-min 4s --election-timeout-max 8s config: %v\n%s", err, out)
	}
}

// TestTimedcDeadPortFailsAtOnce: the binary, against a loopback port
// where nothing listens, says so well before any of its timeouts.
func TestTimedcDeadPortFailsAtOnce(t *testing.T) {
	t.Parallel()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	dead := c.LocalAddr().String()
	c.Close()
	for _, args := range [][]string{{"msite", dead}, {"ring", "elect", dead}, {"election", dead}} {
		start := time.Now()
		out, err := timedc(t, args...)
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "no timed at "+dead+" (port unreachable)") {
			t.Errorf("%v: %q %v, want port unreachable", args, out, err)
		}
		if took > 2*time.Second {
			t.Errorf("%v: %v to fail", args, took)
		}
	}
}

// TestControlSocketPermissionHint: timedc run by a user the control
// socket refuses says who may use it, not "is timed running?".
func TestControlSocketPermissionHint(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("needs root, to run timedc as nobody: the tests run as root (make test, CI)")
	}
	dir, err := os.MkdirTemp("", "timedc-perm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "timed.sock")
	srv, err := control.Listen(sock, func(context.Context, control.Request) control.Response {
		return control.Response{OK: true, Status: &control.Status{Hostname: "h", State: "slave"}}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	group := "1"
	if g, err := user.LookupGroupId("1"); err == nil {
		group = g.Name
	}
	asNobody := func(args ...string) (string, error) {
		cmd := exec.Command(timedcBin, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	for _, c := range []struct {
		setup func() error
		want  []string
	}{
		{func() error { return os.Chmod(sock, 0o600) },
			[]string{"connect to timed at " + sock + ": permission denied: the socket is root:root, mode 0600; only root may use it: run timedc as root"}},
		{func() error {
			if err := os.Chown(sock, 0, 1); err != nil {
				return err
			}
			return os.Chmod(sock, 0o660)
		}, []string{"the socket is root:" + group + ", mode 0660; add yourself to group " + group + " (then log in again) or run timedc as root"}},
		{func() error { return os.Chmod(dir, 0o700) },
			[]string{"the directory " + dir + " is root:root, mode 0700; only root may use it"}},
	} {
		if err := c.setup(); err != nil {
			t.Fatal(err)
		}
		out, err := asNobody("--control-socket", sock, "status")
		if err == nil {
			t.Errorf("nobody read the status: %q", out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("output %q lacks %q", out, w)
			}
		}
		if strings.Contains(out, "is timed running") {
			t.Errorf("a refusal blamed on a daemon not running: %q", out)
		}
	}
	// No socket at all: the old hint stays.
	if out, err := asNobody("--control-socket", filepath.Join(os.TempDir(), "timedc-perm-none.sock"), "status"); err == nil || !strings.Contains(out, "is timed running?") {
		t.Errorf("missing socket: %q %v", out, err)
	}
}

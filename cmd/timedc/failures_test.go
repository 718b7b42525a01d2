package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// deadPort is a loopback UDP port where nothing listens: the kernel
// answers it with ICMP port unreachable.
func deadPort(t *testing.T) string {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	addr := c.LocalAddr().String()
	c.Close()
	return addr
}

// fastFailure is how long a refused port may take to be reported: the
// ICMP error comes back from loopback in microseconds; the commands'
// own waits are 5 s (trace), 15 s (msite) and 90 s (ring elect), and
// election's 500 ms would pass for success.
const fastFailure = 2 * time.Second

// TestDeadPortFailsAtOnce: a port where nothing listens is an error, said
// as such, long before the command's timeout, and never a success.
func TestDeadPortFailsAtOnce(t *testing.T) {
	dead := deadPort(t)
	want := "no timed at " + dead + " (port unreachable)"
	cmds := [][]string{{"msite", dead}, {"ring", "elect", dead}, {"msite", "127.0.0.1", "--port", dead[strings.LastIndex(dead, ":")+1:]}}
	if os.Geteuid() == 0 { // trace and election come from a reserved port
		cmds = append(cmds, []string{"trace", "on", dead}, []string{"trace", "off", dead}, []string{"election", dead})
	}
	for _, args := range cmds {
		for _, asJSON := range []bool{false, true} {
			a := args
			if asJSON {
				a = append([]string{"--json"}, args...)
			}
			start := time.Now()
			out, err := run(t, a...)
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%v: err = %v, want %q", a, err, want)
			}
			if took > fastFailure {
				t.Errorf("%v: failed after %v, want under %v", a, took, fastFailure)
			}
			if strings.Contains(out, `"sent": true`) || strings.Contains(out, "election requested") {
				t.Errorf("%v: a dead port reported as sent: %q", a, out)
			}
			if !asJSON {
				continue
			}
			var res []map[string]any
			if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 1 || !strings.Contains(fmt.Sprint(res[0]["error"]), want) {
				t.Errorf("%v: JSON %q (%v), want one object with error %q", a, out, err, want)
			}
		}
	}
}

// TestElectionSentIsNotAnswered: TEST has no reply; where no error comes
// back, election says it was sent and nothing more.
func TestElectionSentIsNotAnswered(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("election sends from a reserved port, which needs root: the tests run as root (make test, CI)")
	}
	addr, _ := fakeDaemon(t)
	out, err := run(t, "--json", "election", addr)
	if err != nil {
		t.Fatal(err)
	}
	var res []map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 1 ||
		res[0]["sent"] != true || res[0]["answered"] != false || res[0]["host"] != addr {
		t.Fatalf("election --json: %q %v, want sent true, answered false", out, err)
	}
	out, err = run(t, "election", addr)
	if err != nil || !strings.Contains(out, "election requested at "+addr+" (sent; TEST has no reply") {
		t.Fatalf("election: %q %v", out, err)
	}
}

// TestPermissionHint: the message says who owns the socket (or the
// directory on the way to it) and what to do, for the access refused.
func TestPermissionHint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to give files to other owners: the tests run as root (make test, CI)")
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "timed.sock")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	group := groupName(1)
	for _, c := range []struct {
		uid, gid int
		mode     os.FileMode
		want     string
	}{
		{0, 0, 0o600, "the socket is root:root, mode 0600; only root may use it: run timedc as root"},
		{0, 1, 0o660, fmt.Sprintf("the socket is root:%s, mode 0660; add yourself to group %s (then log in again) or run timedc as root", group, group)},
		{0, 1, 0o600, fmt.Sprintf("the socket is root:%s, mode 0600; only root may use it", group)},
		{1, 1, 0o600, fmt.Sprintf("the socket is %s:%s, mode 0600; only %s may use it: run timedc as %s or root", userName(1), group, userName(1), userName(1))},
	} {
		if err := os.Chown(f, c.uid, c.gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, c.mode); err != nil {
			t.Fatal(err)
		}
		if got := refusal("the socket", f, 0o2); !strings.HasPrefix(got, c.want) {
			t.Errorf("%d:%d %04o: %q, want %q", c.uid, c.gid, c.mode, got, c.want)
		}
	}
	if got, want := refusal("the directory "+dir, dir, 0o1), "the directory "+dir+" is root:root"; !strings.HasPrefix(got, want) {
		t.Errorf("directory: %q, want it to start with %q", got, want)
	}
}

// TestOneJSONShape: with --json every command prints an array of
// objects, each with schema_version, and each answer from a host (or the
// local daemon) names it in "host"; failures too.
func TestOneJSONShape(t *testing.T) {
	addr, _ := fakeDaemon(t)
	sock, _ := fakeControl(t)
	dead := deadPort(t)
	type cmd struct {
		args   []string
		hosts  []string // the "host" of each object; nil: not answers from hosts
		fail   bool
		fields []string // present in the first object
	}
	cmds := []cmd{
		{[]string{"msite", addr, dead}, []string{addr, dead}, true, []string{"master"}},
		{[]string{"msite", addr}, []string{addr}, false, []string{"master"}},
		{[]string{"--timeout", "300ms", "clockdiff", addr}, []string{addr}, false, nil},
		{[]string{"ring", "elect", addr}, []string{addr}, false, []string{"leader", "algorithm", "messages"}},
		{[]string{"ring", "elect", dead}, []string{dead}, true, nil},
		{[]string{"ring", "algorithms"}, nil, false, []string{"name", "topology", "live"}},
		{[]string{"--control-socket", sock, "status"}, []string{"localhost"}, false, []string{"state", "hostname", "control_socket"}},
		{[]string{"--control-socket", sock, "step", "--to-network"}, []string{"localhost"}, false, []string{"correction", "control_socket"}},
		{[]string{"--control-socket", sock, "sources"}, []string{"localhost"}, false, []string{"sources", "hostname", "control_socket"}},
		{[]string{"--control-socket", filepath.Join(t.TempDir(), "none.sock"), "sources"}, []string{"localhost"}, true, nil},
		{[]string{"--control-socket", filepath.Join(t.TempDir(), "none.sock"), "status"}, []string{"localhost"}, true, nil},
		{[]string{"--control-socket", sock, "waitsync"}, []string{"localhost"}, true, []string{"synchronised", "reason", "control_socket"}},
	}
	if os.Geteuid() == 0 {
		cmds = append(cmds,
			cmd{[]string{"trace", "on", addr}, []string{addr}, false, []string{"trace"}},
			cmd{[]string{"trace", "off", addr}, []string{addr}, false, []string{"trace"}},
			cmd{[]string{"election", addr, dead}, []string{addr, dead}, true, []string{"sent", "answered"}})
	}
	for _, c := range cmds {
		out, err := run(t, append([]string{"--json"}, c.args...)...)
		if (err != nil) != c.fail {
			t.Errorf("%v: err = %v, want failure %v", c.args, err, c.fail)
		}
		var res []map[string]any
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Errorf("%v: not an array of objects: %v: %q", c.args, err, out)
			continue
		}
		if len(res) == 0 {
			t.Errorf("%v: empty array", c.args)
			continue
		}
		for i, o := range res {
			if o["schema_version"] != float64(1) {
				t.Errorf("%v: object %d without schema_version 1: %v", c.args, i, o)
			}
			if c.hosts != nil && (i >= len(c.hosts) || o["host"] != c.hosts[i]) {
				t.Errorf("%v: object %d host %v, want %v", c.args, i, o["host"], c.hosts)
			}
			if _, failed := o["error"]; failed {
				if _, sent := o["sent"]; sent {
					t.Errorf("%v: a failed object says sent: %v", c.args, o)
				}
			}
		}
		for _, f := range c.fields {
			if _, ok := res[0][f]; !ok {
				t.Errorf("%v: no %q in %v", c.args, f, res[0])
			}
		}
	}
}

// TestClockdiffDeadPortGoesToICMP: where no timed listens, clockdiff does
// not wait out the probe: it goes to ICMP timestamps at once (which the
// kernel answers, as for a BSD host without timed), or, without the raw
// socket ICMP needs, fails at once saying that no timed listens there.
func TestClockdiffDeadPortGoesToICMP(t *testing.T) {
	dead := deadPort(t)
	start := time.Now()
	out, err := run(t, "--json", "clockdiff", dead)
	took := time.Since(start)
	switch {
	case err == nil && strings.Contains(out, `"method": "icmp"`):
	case err != nil && strings.Contains(err.Error(), "port unreachable"):
	default:
		t.Fatalf("clockdiff to a dead port: %v: %s", err, out)
	}
	if took > fastFailure {
		t.Errorf("clockdiff to a dead port took %v, want under %v", took, fastFailure)
	}
}

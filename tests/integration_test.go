package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/timed-project/timed/timed/control"
)

var fiveOffsets = []time.Duration{-2 * time.Second, -700 * time.Millisecond, 0, 900 * time.Millisecond, 2 * time.Second}

// TestOneMasterElected: five daemons that may all be master settle on
// exactly one, and every other daemon follows it.
func TestOneMasterElected(t *testing.T) {
	t.Parallel()
	c := newCluster(t, fiveOffsets, func(int) []string { return []string{"-M"} })
	m := c.awaitOneMaster()
	st, err := c.status(m)
	if err != nil {
		t.Fatal(err)
	}
	c.await("master lists its four slaves", 3*syncInterval+5*time.Second, func() (bool, string) {
		st, err = c.status(m)
		if err != nil {
			return false, err.Error()
		}
		return len(st.Slaves) == 4, fmt.Sprintf("%d slaves", len(st.Slaves))
	})
}

// TestClocksConverge: simulated clocks up to ±2 s apart end within a
// bound of each other. The bound: probe measurements on loopback err by
// RTT/2 (tens of µs, milliseconds on a loaded machine), drifts of at most
// 20 ppm add 20 µs per 1 s round, and each host steps whatever it could
// not slew in a round. 20 ms (the TEMPO paper's figure) leaves a wide
// margin; the e2e suite and `make bench` report the real figures.
func TestClocksConverge(t *testing.T) {
	t.Parallel()
	c := newCluster(t, fiveOffsets, func(int) []string { return []string{"-M"} })
	c.awaitOneMaster()
	c.await("clocks within 20 ms", 10*syncInterval+10*time.Second, func() (bool, string) {
		return spreadBelow(c, 20*time.Millisecond)
	})
}

// TestMasterCrashAndReturn: kill -9 of the master leaves the others to
// elect a new one; the old master, restarted, comes back as a slave and
// never as a second master.
func TestMasterCrashAndReturn(t *testing.T) {
	t.Parallel()
	c := newCluster(t, fiveOffsets[:4], func(int) []string { return []string{"-M"} })
	old := c.awaitOneMaster()
	c.kill(old, syscall.SIGKILL)
	next := c.awaitOneMaster(old)
	if next == old {
		t.Fatal("the killed master is still master")
	}
	c.start(old)
	c.await(old.name+" rejoins as a slave of "+next.name, electionBound, func() (bool, string) {
		m, why := c.oneMaster()
		return m == next, why
	})
	// Never a second master while it settles in: watch three sync rounds.
	watchUntil := time.Now().Add(3 * syncInterval)
	for time.Now().Before(watchUntil) {
		if m, why := c.oneMaster(); m != next {
			t.Fatalf("after the old master returned: %s", why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNonMasterNeverMaster: daemons without -M stay slaves (or keep
// polling) and follow the one that may be master.
func TestNonMasterNeverMaster(t *testing.T) {
	t.Parallel()
	c := newCluster(t, fiveOffsets[:3], func(i int) []string {
		if i == 1 {
			return []string{"-M"}
		}
		return nil
	})
	if m := c.awaitOneMaster(); m != c.nodes[1] {
		t.Fatalf("master is %s, but only %s may be master", m.name, c.nodes[1].name)
	}
}

// TestTimedcCommands runs every timedc command against live daemons.
func TestTimedcCommands(t *testing.T) {
	t.Parallel()
	c := newCluster(t, fiveOffsets[:3], func(int) []string { return []string{"-M"} })
	m := c.awaitOneMaster()
	var slave *node
	for _, n := range c.nodes {
		if n != m {
			slave = n
		}
	}
	addr := func(n *node) string { return "127.0.0.1:" + strconv.Itoa(n.port) }

	out, err := timedc(t, "msite", addr(slave), addr(m))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []*node{slave, m} {
		if want := fmt.Sprintf("master timedaemon at %s is %s", addr(n), m.name); !strings.Contains(out, want) {
			t.Errorf("msite output %q lacks %q", out, want)
		}
	}

	out, err = timedc(t, "--json", "status", "--control-socket", slave.socket())
	if err != nil {
		t.Fatal(err)
	}
	var st control.Status
	if err := oneAnswer(out, &st); err != nil || st.State != "slave" || st.Master == nil || st.Master.Name != m.name {
		t.Fatalf("status --json: %v %+v", err, st)
	}
	if out, err = timedc(t, "status", "--control-socket", m.socket()); err != nil || !strings.Contains(out, m.name+" is master") {
		t.Fatalf("status table: %q %v", out, err)
	}

	if out, err = timedc(t, "trace", "on", addr(slave)); err != nil || strings.TrimSpace(out) != "timed tracing enabled" {
		t.Fatalf("trace on: %q %v", out, err)
	}
	if s, _ := c.status(slave); !s.Trace {
		t.Fatal("trace on did not turn tracing on")
	}
	if out, err = timedc(t, "trace", "off", addr(slave)); err != nil || strings.TrimSpace(out) != "timed tracing disabled" {
		t.Fatalf("trace off: %q %v", out, err)
	}

	// election on the master: BSD's TEST makes a master run a sync round
	// now; on a slave it starts an election, after which one master
	// remains.
	before, _ := c.status(slave)
	if _, err = timedc(t, "election", addr(slave)); err != nil {
		t.Fatal(err)
	}
	c.await("an election after timedc election", electionBound, func() (bool, string) {
		s, err := c.status(slave)
		if err != nil {
			return false, err.Error()
		}
		return s.Elections > before.Elections, fmt.Sprintf("elections seen %d", s.Elections)
	})
	c.awaitOneMaster()

	// clockdiff measures the daemon's simulated clock against this host's
	// kernel clock, so it must agree with the offset the daemon reports
	// (both move by at most 20 ppm × the second between the two reads).
	out, err = timedc(t, "--json", "clockdiff", addr(slave))
	if err != nil {
		t.Fatal(err)
	}
	var diff []struct {
		Offset float64 `json:"offset_seconds"`
		Bound  float64 `json:"error_bound_seconds"`
		Method string  `json:"method"`
	}
	if err := json.Unmarshal([]byte(out), &diff); err != nil || len(diff) != 1 || diff[0].Method != "probe" {
		t.Fatalf("clockdiff --json: %q %v", out, err)
	}
	if s, err := c.status(slave); err != nil {
		t.Fatal(err)
	} else if d := time.Duration((diff[0].Offset - s.OffsetSecs) * 1e9); d.Abs() > time.Millisecond {
		t.Fatalf("clockdiff says %.6f s, the daemon's clock is %.6f s off: %v apart", diff[0].Offset, s.OffsetSecs, d)
	}

	// Nothing listens there: loopback says port unreachable at once.
	if _, err := timedc(t, "msite", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "no timed at 127.0.0.1:1 (port unreachable)") {
		t.Fatalf("msite to nobody: %v", err)
	}
}

// TestSigtermStopsQuickly: SIGTERM stops a daemon within a second and
// removes its control socket.
func TestSigtermStopsQuickly(t *testing.T) {
	t.Parallel()
	c := newCluster(t, fiveOffsets[:1], func(int) []string { return []string{"-M"} })
	n := c.nodes[0]
	c.await("control socket up", 10*time.Second, func() (bool, string) {
		_, err := c.status(n)
		return err == nil, fmt.Sprint(err)
	})
	start := time.Now()
	c.kill(n, syscall.SIGTERM)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("SIGTERM took %v", took)
	}
	if code := n.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if _, err := c.status(n); err == nil {
		t.Fatal("control socket still answers after exit")
	}
}

// TestBadConfiguration: start-up fails with one clear line naming the key.
func TestBadConfiguration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--port", "70000"}, `invalid port "70000"`},
		{[]string{"--sync-interval", "often"}, `invalid sync-interval "often"`},
		{[]string{"-n", "192.0.2.0/24", "-i", "198.51.100.0/24"}, "not both"},
		{[]string{"--clock", "sim:offset=lots"}, "offset"},
		{[]string{"--peers", "127.0.0.1:1", "--interfaces", `GetAllInterfaces | include "name" "^lo$"`}, "peers"},
		{[]string{"stray"}, `unexpected argument "stray"`},
	} {
		cmd := exec.Command(timedBin, append(tc.args, "--control-socket", t.TempDir()+"/s.sock")...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%v: started", tc.args)
			continue
		}
		if !strings.Contains(string(out), tc.want) || !strings.HasPrefix(string(out), "timed: ") {
			t.Errorf("%v: output %q, want a timed: line containing %q", tc.args, out, tc.want)
		}
	}
}

// TestPrivilegeErrors: without CAP_SYS_TIME (for --clock system) or the
// right to bind port 525, start-up stops with a message naming the
// capability and the option that avoids it. Run as nobody when we are
// root, so the test means the same on every machine.
func TestPrivilegeErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--clock", "system", "--port", "15999"}, []string{"CAP_SYS_TIME", "--clock=dry-run"}},
		{[]string{"--clock", "sim", "--port", "525"}, []string{"CAP_NET_BIND_SERVICE", "--port"}},
	} {
		cmd := exec.Command(timedBin, append(tc.args, "--peers", "127.0.0.1:9", "--control-socket", "")...)
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%v: started without the privilege", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%v: %q does not name %s", tc.args, out, w)
			}
		}
	}
}

// TestMetrics: with --metrics-listen the daemon serves Prometheus metrics
// named by Prometheus conventions, a network's with a network label (in
// peers mode "peers"); without it, nothing listens.
func TestMetrics(t *testing.T) {
	t.Parallel()
	addr := freeTCPAddr(t)
	c := newCluster(t, fiveOffsets[:2], func(i int) []string {
		if i == 0 {
			return []string{"-M", "--metrics-listen", addr}
		}
		return []string{"-M"}
	})
	c.awaitOneMaster()
	body := ""
	c.await("metrics served", 10*time.Second, func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		body = string(b)
		return err == nil && resp.StatusCode == http.StatusOK, fmt.Sprint(resp.Status, err)
	})
	for _, want := range []string{
		`timed_state{network="peers",state="`, `timed_elections_total{network="peers"}`, `timed_loops_detected_total{network="peers"} 0`,
		`timed_sync_rounds_total{network="peers"}`,
		// which types a daemon sent and heard depends on which started
		// first (a MASTERREQ, or a MASTERUP at once), not its metrics
		`timed_packets_total{direction="rx",type="`, `timed_packets_total{direction="tx",type="`, "timed_dropped_packets_total", "timed_offset_seconds",
		"\ntimed_alarm 0\n", "\ntimed_corrections_refused_total 0\n", "go_goroutines", "process_cpu_seconds_total",
		"\ntimed_synchronised ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

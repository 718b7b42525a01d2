package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// checkedUnit reads a shipped unit and writes the copy systemd-analyze
// checks into dir: verify insists that ExecStart names an existing
// executable, so the copy points at this test binary instead of the
// installed one (from, which the unit must still start); every other
// line is the shipped one. It returns the shipped text and the copy's
// path.
func checkedUnit(t *testing.T, dir, name, from string) (string, string) {
	t.Helper()
	unit, err := os.ReadFile(filepath.Join("..", "systemd", name))
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart="+from+" ") {
		t.Fatalf("%s no longer starts %s: update this test with it", name, from)
	}
	checked := strings.Replace(string(unit), "ExecStart="+from+" ", "ExecStart="+self+" ", 1)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(checked), 0o644); err != nil {
		t.Fatal(err)
	}
	return string(unit), path
}

// TestSystemdUnitVerifies runs systemd-analyze verify on the shipped
// units, timed.service, timed-wait.service and timed-reference.service. `make test` installs
// systemd-analyze where it is missing.
func TestSystemdUnitVerifies(t *testing.T) {
	t.Parallel()
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze not found (make tools installs it): %v", err)
	}
	dir := t.TempDir()
	unit, path := checkedUnit(t, dir, "timed.service", "/usr/local/sbin/timed")
	wait, waitPath := checkedUnit(t, dir, "timed-wait.service", "/usr/local/bin/timedc")
	ref, refPath := checkedUnit(t, dir, "timed-reference.service", "/usr/local/sbin/timed")
	out, err := exec.Command(tool, "verify", path, waitPath, refPath).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, want := range []string{"Type=notify", "WatchdogSec=", "NoNewPrivileges=yes", "ProtectSystem=strict",
		"CapabilityBoundingSet=CAP_SYS_TIME CAP_NET_BIND_SERVICE CAP_NET_RAW", "SystemCallFilter=@system-service @clock",
		"RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK", "RuntimeDirectory=timed",
		"StateDirectory=timed", "Environment=TIMED_DRIFT_FILE=/var/lib/timed/drift"} {
		if !strings.Contains(unit, want) {
			t.Errorf("timed.service lacks %q", want)
		}
	}
	// timed-wait: after timed, before time-sync.target, once; the wait
	// bounded by timedc before systemd's backstop; only the control
	// socket's group.
	for _, want := range []string{"\nType=oneshot\n", "\nRemainAfterExit=yes\n", "\nRequires=timed.service\n", "\nAfter=timed.service\n",
		"\nBefore=time-sync.target\n", "\nWants=time-sync.target\n", "\nExecStart=/usr/local/bin/timedc waitsync --timeout 3m\n",
		"\nTimeoutStartSec=200s\n", "\nDynamicUser=yes\n", "\nSupplementaryGroups=timed\n", "\nCapabilityBoundingSet=\n",
		"\nRestrictAddressFamilies=AF_UNIX\n", "\nPrivateNetwork=yes\n", "\nWantedBy=multi-user.target\n"} {
		if !strings.Contains(wait, want) {
			t.Errorf("timed-wait.service lacks %q", strings.TrimSpace(want))
		}
	}
	// timed-reference: beside chrony and ntpd (no Conflicts= on them,
	// started after them), never able to change the clock (no
	// CAP_SYS_TIME), as a reference.
	for _, want := range []string{"\nConflicts=timed.service systemd-timesyncd.service\n",
		"\nExecStart=/usr/local/sbin/timed --config /etc/timed/timed.yaml --reference kernel\n",
		"\nCapabilityBoundingSet=CAP_NET_BIND_SERVICE CAP_NET_RAW\n", "\nAmbientCapabilities=CAP_NET_BIND_SERVICE CAP_NET_RAW\n",
		"\nSystemCallFilter=@system-service @clock\n", "\nWantedBy=multi-user.target\n"} {
		if !strings.Contains(ref, want) {
			t.Errorf("timed-reference.service lacks %q", strings.TrimSpace(want))
		}
	}
	for _, bad := range []string{"chrony.service\n", "ntp.service\n", "CAP_SYS_TIME\n", "TIMED_DRIFT_FILE"} {
		for _, line := range strings.Split(ref, "\n") {
			if !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "After=") && strings.Contains(line+"\n", bad) {
				t.Errorf("timed-reference.service: %q", line)
			}
		}
	}
	// The sandboxes, as systemd rates them (offline: no running systemd
	// needed; README, "Installing").
	for _, u := range []struct {
		path string
		most float64
	}{{path, 2.5}, {waitPath, 1.0}, {refPath, 2.5}} {
		out, err = exec.Command(tool, "security", "--offline=true", u.path).CombinedOutput()
		m := regexp.MustCompile(`Overall exposure level for ` + regexp.QuoteMeta(filepath.Base(u.path)) + `: ([0-9.]+)`).FindSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("systemd-analyze security: %v\n%s", err, out)
		}
		if level, _ := strconv.ParseFloat(string(m[1]), 64); level > u.most {
			t.Errorf("%s: exposure %.1f, want at most %.1f\n%s", filepath.Base(u.path), level, u.most, out)
		}
	}
}

// TestNTPUnit: the ntp-units.d entry names the unit, as chrony's and
// systemd-timesyncd's do: timedatectl's "NTP service" and set-ntp.
func TestNTPUnit(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "systemd", "50-timed.list"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "timed.service\n" {
		t.Errorf("50-timed.list is %q, want the unit's name alone", b)
	}
}

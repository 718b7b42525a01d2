package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnitVerifies runs systemd-analyze verify on the shipped unit.
// verify insists that ExecStart names an existing executable, so the copy
// it checks points at this test binary instead of /usr/local/sbin/timed;
// every other line is the shipped one. `make test` installs
// systemd-analyze where it is missing.
func TestSystemdUnitVerifies(t *testing.T) {
	t.Parallel()
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze not found (make tools installs it): %v", err)
	}
	unit, err := os.ReadFile(filepath.Join("..", "systemd", "timed.service"))
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/sbin/timed ") {
		t.Fatal("unit no longer starts /usr/local/sbin/timed: update this test with it")
	}
	checked := strings.Replace(string(unit), "ExecStart=/usr/local/sbin/timed ", "ExecStart="+self+" ", 1)
	path := filepath.Join(t.TempDir(), "timed.service")
	if err := os.WriteFile(path, []byte(checked), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tool, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, want := range []string{"Type=notify", "WatchdogSec=", "NoNewPrivileges=yes", "ProtectSystem=strict",
		"CapabilityBoundingSet=CAP_SYS_TIME CAP_NET_BIND_SERVICE CAP_NET_RAW", "SystemCallFilter=@system-service @clock",
		"RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK", "RuntimeDirectory=timed",
		"StateDirectory=timed", "Environment=TIMED_DRIFT_FILE=/var/lib/timed/drift"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %q", want)
		}
	}
}

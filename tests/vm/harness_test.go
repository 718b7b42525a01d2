//go:build vm

package vm

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "embed"

	"github.com/timed-project/timed/tests/internal/figures"
	"github.com/timed-project/timed/tests/internal/vmguest"
)

// The suite's settings, from the environment (make e2e-vm sets them):
//
//	TIMED_E2E_VM_RUN     the run's id, in every name it makes (default: random)
//	TIMED_E2E_VM_BIN     the folder of the static timed and timedc (default ../../bin)
//	TIMED_E2E_VM_ASSETS  a file of assets.sh's output (default: run assets.sh)
//	TIMED_E2E_VM_ACCEL   tcg (default) or kvm: kvm is tried with a short boot
//	                     bound and each guest falls back to tcg where it stalls
//	TIMED_E2E_VM_LOGS    a folder to keep every guest's console and daemon log in
//	TIMED_E2E_FIGURES    where the figures table goes (default: stdout)
var (
	run    = os.Getenv("TIMED_E2E_VM_RUN")
	binDir = envOr("TIMED_E2E_VM_BIN", "../../bin")
	accel  = envOr("TIMED_E2E_VM_ACCEL", "tcg")

	// assets are the kernel, its modules and busybox (assets.sh's
	// kernel=, modules=, busybox=, kver= lines).
	assets map[string]string
	// initrd is the guests' initramfs, built once by TestMain.
	initrd string
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// figs is the table of measured figures printed at the end.
var figs figures.Table

// report records a measured figure (reported, not asserted).
func report(t *testing.T, name, format string, args ...any) {
	t.Helper()
	figs.Report(t, name, format, args...)
}

func TestMain(m *testing.M) {
	if run == "" {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		run = hex.EncodeToString(b)
	}
	// make e2e-vm checks these first and records a skip where one is
	// missing; here a missing one is a failure with its reason.
	if err := prerequisites(); err != nil {
		fmt.Fprintln(os.Stderr, "vm:", err)
		os.Exit(1)
	}
	tmp, err := os.MkdirTemp("", "timed-vm-"+run+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "vm:", err)
		os.Exit(1)
	}
	code := 1
	if assets, err = loadAssets(); err != nil {
		fmt.Fprintln(os.Stderr, "vm: assets:", err)
	} else if initrd, err = buildInitrd(tmp); err != nil {
		fmt.Fprintln(os.Stderr, "vm: initramfs:", err)
	} else {
		code = m.Run()
		if err := figs.Write(); err != nil {
			fmt.Fprintln(os.Stderr, "vm: figures:", err)
		}
	}
	os.RemoveAll(tmp)
	os.Exit(code)
}

// prerequisites says what of the host the suite needs is missing.
func prerequisites() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, tap devices)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("no /dev/net/tun: %w", err)
	}
	for _, tool := range []string{"qemu-system-x86_64", "cpio", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is missing (make vm-tools installs it)", tool)
		}
	}
	for _, b := range []string{"timed", "timedc"} {
		if err := checkStatic(filepath.Join(binDir, b)); err != nil {
			return err
		}
	}
	return nil
}

// checkStatic: the guests have no libc, so a binary must not ask for an
// ELF interpreter.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s (make build makes it): %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked: build it with CGO_ENABLED=0 (make build)", path)
		}
	}
	return nil
}

// loadAssets reads assets.sh's KEY=VALUE lines from $TIMED_E2E_VM_ASSETS,
// or runs it.
func loadAssets() (map[string]string, error) {
	var out []byte
	var err error
	if p := os.Getenv("TIMED_E2E_VM_ASSETS"); p != "" {
		out, err = os.ReadFile(p)
	} else {
		cmd := exec.Command("bash", "assets.sh")
		cmd.Stderr = os.Stderr
		out, err = cmd.Output()
	}
	if err != nil {
		return nil, err
	}
	a := vmguest.ParseKV(out)
	for _, k := range []string{"kernel", "modules", "busybox", "kver", "chronyd"} {
		if a[k] == "" {
			return nil, fmt.Errorf("no %s= line in %q", k, out)
		}
	}
	return a, nil
}

// ---- the initramfs ----

//go:embed init.sh
var initScript []byte

// guestModules are what a guest loads (with what they depend on, found by
// vmguest.LoadOrder): the PCI transport of virtio, the NIC, the ports of the
// command channel and the daemon's log, and the 9p share that holds
// /var/lib/timed.
var guestModules = []string{"virtio_pci", "virtio_net", "virtio_console", "9pnet_virtio", "9p"}

// Guest host names and addresses: guest i (from 0) is g<i+1> at
// 10.77.0.<i+1>; the observer is 10.77.0.254 on the bridge.
const (
	subnet       = "10.77.0.0/24"
	observerAddr = "10.77.0.254"
)

func guestName(i int) string { return fmt.Sprintf("g%d", i+1) }
func guestAddr(i int) string { return fmt.Sprintf("10.77.0.%d", i+1) }

// maxGuests bounds the names in the initramfs's /etc/hosts.
const maxGuests = 8

// buildInitrd writes the guests' initramfs (an uncompressed cpio: the
// kernel unpacks it faster than a compressed one under TCG) into dir.
func buildInitrd(dir string) (string, error) {
	root := filepath.Join(dir, "root")
	for _, d := range []string{"bin", "lib/modules", "etc", "proc", "sys", "dev", "run", "tmp", "var/lib/timed"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return "", err
		}
	}
	copies := map[string]string{
		assets["busybox"]:               "bin/busybox",
		filepath.Join(binDir, "timed"):  "bin/timed",
		filepath.Join(binDir, "timedc"): "bin/timedc",
		assets["chronyd"]:               "bin/chronyd",
	}
	// chronyd is Debian's, dynamically linked: its libraries and the
	// loader go where ldd found them on the host.
	libs, err := sharedLibs(assets["chronyd"])
	if err != nil {
		return "", err
	}
	for _, l := range libs {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(l)), 0o755); err != nil {
			return "", err
		}
		copies[l] = strings.TrimPrefix(l, "/")
	}
	order, err := vmguest.LoadOrder(assets["modules"], guestModules)
	if err != nil {
		return "", err
	}
	var names []string
	for _, m := range order {
		copies[m.Path] = "lib/modules/" + m.Name + ".ko"
		names = append(names, m.Name)
	}
	for src, dst := range copies {
		if err := copyFile(src, filepath.Join(root, dst), 0o755); err != nil {
			return "", err
		}
	}
	hosts := "127.0.0.1 localhost\n" + observerAddr + " observer\n"
	for i := range maxGuests {
		hosts += guestAddr(i) + " " + guestName(i) + "\n"
	}
	files := map[string]string{
		"lib/modules/order": strings.Join(names, "\n") + "\n",
		"etc/hosts":         hosts,
		"etc/nsswitch.conf": "hosts: files\npasswd: files\ngroup: files\n",
		// chronyd -u root looks root up.
		"etc/passwd":      "root:x:0:0:root:/:/bin/sh\n",
		"etc/group":       "root:x:0:\n",
		"etc/chrony.conf": guestChronyConf,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(root, "init"), initScript, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "initrd.cpio")
	return out, vmguest.WriteCPIO(root, out)
}

// sharedLibs lists what ldd says bin needs (the vDSO aside), the loader
// included: absolute paths on the host.
func sharedLibs(bin string) ([]string, error) {
	out, err := command(30*time.Second, "ldd", bin)
	if err != nil {
		return nil, err
	}
	var libs []string
	for line := range strings.Lines(out) {
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("%s: a library is missing on the host (make vm-tools installs chrony's): %s", bin, strings.TrimSpace(line))
		}
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0])
		}
	}
	if len(libs) == 0 {
		return nil, fmt.Errorf("ldd %s: no libraries in %q", bin, out)
	}
	return libs, nil
}

func copyFile(src, dst string, mode fs.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}

// ---- commands on the host ----

// command runs name with args, bounded by timeout, and returns stdout;
// the error carries stderr.
var command = vmguest.Command

// tail is the last n lines of a file, for failure dumps.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

//go:build vm

package vm

import (
	"bufio"
	"bytes"
	"context"
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
	a := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			a[k] = v
		}
	}
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
// moduleOrder): the PCI transport of virtio, the NIC, the ports of the
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
	order, err := moduleOrder(assets["modules"], guestModules)
	if err != nil {
		return "", err
	}
	var names []string
	for _, m := range order {
		copies[m.path] = "lib/modules/" + m.name + ".ko"
		names = append(names, m.name)
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
	var list bytes.Buffer
	if err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		list.WriteString(rel + "\n")
		return nil
	}); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "initrd.cpio")
	f, err := os.Create(out)
	if err != nil {
		return "", err
	}
	defer f.Close()
	cmd := exec.Command("cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0")
	cmd.Dir, cmd.Stdin, cmd.Stdout = root, &list, f
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("cpio: %w: %s", err, stderr.String())
	}
	return out, f.Close()
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

type module struct{ name, path string }

// moduleOrder lists the modules wanted and everything they depend on, each
// after its dependencies, as insmod needs them. The dependencies are each
// module's own `depends=` (its .modinfo section): the kernel package has
// no modules.dep, which depmod writes at install.
func moduleOrder(dir string, wanted []string) ([]module, error) {
	paths := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".ko") {
			paths[modName(strings.TrimSuffix(d.Name(), ".ko"))] = p
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var order []module
	state := map[string]int{} // 1: visiting, 2: done
	var visit func(name string) error
	visit = func(name string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("module %s depends on itself", name)
		case 2:
			return nil
		}
		state[name] = 1
		p, ok := paths[name]
		if !ok {
			return fmt.Errorf("module %s: not in %s (built into the kernel? then leave it out)", name, dir)
		}
		deps, err := moduleDepends(p)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		state[name] = 2
		order = append(order, module{name, p})
		return nil
	}
	for _, w := range wanted {
		if err := visit(modName(w)); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func modName(s string) string { return strings.ReplaceAll(s, "-", "_") }

// moduleDepends reads a module's depends= from its .modinfo section (NUL-
// separated key=value strings).
func moduleDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module %s: no .modinfo section", path)
	}
	b, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			var deps []string
			for d := range strings.SplitSeq(string(v), ",") {
				if d != "" {
					deps = append(deps, modName(d))
				}
			}
			return deps, nil
		}
	}
	return nil, nil
}

// ---- commands on the host ----

// command runs name with args, bounded by timeout, and returns stdout;
// the error carries stderr.
func command(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = hostEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// hostEnv is the environment without the suite's TIMED_* variables, which
// are not timedc's configuration.
func hostEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TIMED_") {
			env = append(env, kv)
		}
	}
	return env
}

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

package vmguest

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cavaliergopher/cpio"
)

// ---- assets ----

// ParseKV is the KEY=VALUE lines of a script's output (assets.sh,
// rootfs.sh); other lines are ignored.
func ParseKV(out []byte) map[string]string {
	kv := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			kv[k] = v
		}
	}
	return kv
}

// ---- kernel modules ----

// Module is a kernel module to load: its name (with _, as the kernel
// names it) and its .ko file.
type Module struct{ Name, Path string }

// LoadOrder lists the modules wanted and everything they depend on, each
// after its dependencies and each once, as insmod needs them. The
// dependencies are each module's own depends= (its .modinfo section):
// Debian's kernel package has no modules.dep, which depmod writes at
// install.
func LoadOrder(dir string, wanted []string) ([]Module, error) {
	paths := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name, ok := strings.CutSuffix(d.Name(), ".ko"); ok && !d.IsDir() {
			paths[modName(name)] = p
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("modules: %w", err)
	}
	var order []Module
	state := map[string]int{} // 1: visiting, 2: done
	var visit func(name string, chain []string) error
	visit = func(name string, chain []string) error {
		chain = append(chain, name)
		switch state[name] {
		case 1:
			return fmt.Errorf("module %s depends on itself (%s)", name, strings.Join(chain, " ← "))
		case 2:
			return nil
		}
		state[name] = 1
		p, ok := paths[name]
		if !ok {
			return fmt.Errorf("module %s (%s) not in %s (built into the kernel? then leave it out)", name, strings.Join(chain, " ← "), dir)
		}
		deps, err := Depends(p)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d, chain); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, Module{name, p})
		return nil
	}
	for _, w := range wanted {
		if err := visit(modName(w), nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func modName(s string) string { return strings.ReplaceAll(s, "-", "_") }

// Depends reads a module's depends= from its .modinfo section (NUL-
// separated key=value strings).
func Depends(path string) ([]string, error) {
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

// ---- the initramfs ----

// WriteCPIO writes the tree under root to out as an uncompressed newc
// cpio archive, the format the kernel unpacks an initramfs from (and
// faster than a compressed one under TCG): paths relative to root in
// lexical order, every entry owned by root (0:0).
func WriteCPIO(root, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	w := cpio.NewWriter(f)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		h := &cpio.Header{Name: filepath.ToSlash(rel), Mode: cpio.FileMode(info.Mode().Perm()), ModTime: info.ModTime()}
		var body []byte
		switch m := info.Mode(); {
		case m.IsRegular():
			h.Mode |= cpio.TypeReg
			if body, err = os.ReadFile(p); err != nil {
				return err
			}
		case m.IsDir():
			h.Mode |= cpio.TypeDir
			h.Links = 2
		case m&fs.ModeSymlink != 0:
			h.Mode |= cpio.TypeSymlink
			h.Links = 1
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			body = []byte(target)
		default:
			return fmt.Errorf("%s: a %v has no place in an initramfs", p, m.Type())
		}
		h.Size = int64(len(body))
		if err := w.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if _, err := w.Write(body); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cpio %s: %w", out, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("cpio %s: %w", out, err)
	}
	return f.Close()
}

// ---- QEMU ----

// Machine is what every guest's QEMU command line says: the accelerator
// (tcg or kvm), memory in MiB and CPUs, and the kernel, initramfs and
// kernel command line to boot, with no default devices and no display.
type Machine struct {
	Accel          string
	MemMiB, CPUs   int
	Kernel, Initrd string
	Append         string
}

// Args is m as qemu-system-x86_64's arguments; the caller appends its
// devices (TapNIC, serial ports, disks).
func (m Machine) Args() []string {
	return []string{
		"-accel", m.Accel, "-m", fmt.Sprint(m.MemMiB), "-smp", fmt.Sprint(m.CPUs),
		"-nodefaults", "-no-user-config", "-display", "none",
		"-kernel", m.Kernel, "-initrd", m.Initrd, "-append", m.Append,
	}
}

// TapNIC is a virtio NIC on the tap device tap (made beforehand, e.g. by
// AddTap), with the MAC address mac and no option ROM.
func TapNIC(tap, mac string) []string {
	return []string{
		"-netdev", "tap,id=n0,ifname=" + tap + ",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac=" + mac + ",romfile=",
	}
}

// ---- host commands and the namespace ----

// Command runs name with args, bounded by timeout, and returns stdout;
// the error carries stderr. Its environment is the test's without the
// TIMED_* variables (see WithoutTimedEnv).
func Command(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = WithoutTimedEnv(os.Environ())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// WithoutTimedEnv is env without the TIMED_* variables: the suites'
// settings, which timed and timedc would take as configuration keys.
func WithoutTimedEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "TIMED_") {
			out = append(out, kv)
		}
	}
	return out
}

// IP runs ip(8) in the namespace ns.
func IP(ns string, args ...string) error {
	_, err := Command(10*time.Second, "ip", append([]string{"-n", ns}, args...)...)
	return err
}

// AddNamespace makes the network namespace ns, its loopback up (or
// nothing, on error). DelNamespace deletes it.
func AddNamespace(ns string) error {
	if _, err := Command(10*time.Second, "ip", "netns", "add", ns); err != nil {
		return err
	}
	if err := IP(ns, "link", "set", "lo", "up"); err != nil {
		_ = DelNamespace(ns)
		return err
	}
	return nil
}

// DelNamespace deletes the namespace ns and what is in it (bridge, taps).
func DelNamespace(ns string) error {
	_, err := Command(30*time.Second, "ip", "netns", "del", ns)
	return err
}

// AddBridge makes the bridge br in ns with the address addr (CIDR),
// without STP and forwarding delay, and sets it up.
func AddBridge(ns, br, addr string) error {
	for _, args := range [][]string{
		{"link", "add", br, "type", "bridge", "stp_state", "0", "forward_delay", "0"},
		{"addr", "add", addr, "dev", br},
		{"link", "set", br, "up"},
	} {
		if err := IP(ns, args...); err != nil {
			return err
		}
	}
	return nil
}

// AddTap makes the tap device tap in ns, on the bridge br, and sets it up.
func AddTap(ns, tap, br string) error {
	if err := IP(ns, "tuntap", "add", tap, "mode", "tap"); err != nil {
		return err
	}
	return IP(ns, "link", "set", tap, "master", br, "up")
}

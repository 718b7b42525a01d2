package vmguest

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cavaliergopher/cpio"
)

// fakeModule writes a relocatable ELF64 file whose only content is a
// .modinfo section of the NUL-separated key=value strings kv: what
// Depends reads of a real .ko.
func fakeModule(t *testing.T, path string, kv ...string) {
	t.Helper()
	modinfo := []byte(strings.Join(kv, "\x00") + "\x00")
	shstrtab := []byte("\x00.modinfo\x00.shstrtab\x00")
	const ehsize, shentsize = 64, 64
	modOff := uint64(ehsize)
	strOff := modOff + uint64(len(modinfo))
	shOff := (strOff + uint64(len(shstrtab)) + 7) &^ 7
	var b bytes.Buffer
	le := binary.LittleEndian
	hdr := elf.Header64{
		Type: uint16(elf.ET_REL), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Shoff: shOff, Ehsize: ehsize, Shentsize: shentsize, Shnum: 3, Shstrndx: 2,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	_ = binary.Write(&b, le, hdr)
	b.Write(modinfo)
	b.Write(shstrtab)
	b.Write(make([]byte, int(shOff)-b.Len()))
	for _, s := range []elf.Section64{
		{},
		{Name: 1, Type: uint32(elf.SHT_PROGBITS), Flags: uint64(elf.SHF_ALLOC), Off: modOff, Size: uint64(len(modinfo)), Addralign: 1},
		{Name: 10, Type: uint32(elf.SHT_STRTAB), Off: strOff, Size: uint64(len(shstrtab)), Addralign: 1},
	} {
		_ = binary.Write(&b, le, s)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func names(order []Module) []string {
	var n []string
	for _, m := range order {
		n = append(n, m.Name)
	}
	return n
}

// TestLoadOrder: each module after what its depends= names, each once,
// dashes read as underscores, whatever folder of the tree holds it.
func TestLoadOrder(t *testing.T) {
	dir := t.TempDir()
	fakeModule(t, filepath.Join(dir, "kernel/drivers/virtio/virtio_pci.ko"), "license=GPL", "depends=virtio_pci_legacy_dev,virtio_pci_modern_dev", "name=virtio_pci")
	fakeModule(t, filepath.Join(dir, "kernel/drivers/virtio/virtio_pci_legacy_dev.ko"), "depends=")
	fakeModule(t, filepath.Join(dir, "kernel/drivers/virtio/virtio_pci_modern_dev.ko"), "depends=")
	fakeModule(t, filepath.Join(dir, "kernel/net/9p/9pnet-virtio.ko"), "depends=9pnet,virtio_ring")
	fakeModule(t, filepath.Join(dir, "kernel/net/9p/9pnet.ko"), "depends=netfs")
	fakeModule(t, filepath.Join(dir, "kernel/fs/netfs/netfs.ko")) // no depends= at all
	fakeModule(t, filepath.Join(dir, "kernel/drivers/virtio/virtio_ring.ko"), "depends=")
	fakeModule(t, filepath.Join(dir, "kernel/fs/9p/9p.ko"), "depends=9pnet,netfs")

	order, err := LoadOrder(dir, []string{"virtio_pci", "9pnet_virtio", "9p"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_pci", "netfs", "9pnet", "virtio_ring", "9pnet_virtio", "9p"}
	if got := names(order); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if p := order[6].Path; filepath.Base(p) != "9pnet-virtio.ko" {
		t.Errorf("9pnet_virtio's file is %s", p)
	}
}

func TestLoadOrderErrors(t *testing.T) {
	dir := t.TempDir()
	fakeModule(t, filepath.Join(dir, "a.ko"), "depends=b")
	fakeModule(t, filepath.Join(dir, "b.ko"), "depends=a")
	fakeModule(t, filepath.Join(dir, "c.ko"), "depends=gone")
	if err := os.WriteFile(filepath.Join(dir, "d.ko"), []byte("not ELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ wanted, says string }{
		{"a", "depends on itself"},
		{"c", "module gone (c ← gone) not in"},
		{"d", "d.ko"},
		{"e", "module e (e) not in"},
	} {
		_, err := LoadOrder(dir, []string{c.wanted})
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("LoadOrder(%s): %v, want an error saying %q", c.wanted, err, c.says)
		}
	}
}

// TestLoadOrderRealKernel resolves both suites' modules against the
// kernel assets.sh keeps (TIMED_VM_CACHE, /var/cache/timed-vm), when a
// VM suite has fetched one on this machine; it checks only what holds
// whatever the kernel's version.
func TestLoadOrderRealKernel(t *testing.T) {
	cache := os.Getenv("TIMED_VM_CACHE")
	if cache == "" {
		cache = "/var/cache/timed-vm"
	}
	dirs, _ := filepath.Glob(filepath.Join(cache, "*", "lib", "modules", "*"))
	if len(dirs) == 0 {
		t.Logf("no kernel modules under %s (make e2e-vm fetches them): only the fake modules are tested", cache)
		return
	}
	for _, dir := range dirs {
		order, err := LoadOrder(dir, []string{"virtio_pci", "virtio_net", "virtio_blk", "9pnet_virtio", "9p"})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		at := map[string]int{}
		for i, m := range order {
			if _, dup := at[m.Name]; dup {
				t.Errorf("%s: %s twice", dir, m.Name)
			}
			at[m.Name] = i
		}
		for _, m := range order {
			deps, err := Depends(m.Path)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range deps {
				if j, ok := at[d]; !ok || j > at[m.Name] {
					t.Errorf("%s: %s comes before its dependency %s", dir, m.Name, d)
				}
			}
		}
		t.Logf("%s: %v", dir, names(order))
	}
}

func TestParseKV(t *testing.T) {
	got := ParseKV([]byte("fetching…\nkernel=/c/vmlinuz\n  kver=6.1.0=x  \nno line\n"))
	if len(got) != 2 || got["kernel"] != "/c/vmlinuz" || got["kver"] != "6.1.0=x" {
		t.Fatalf("ParseKV: %v", got)
	}
}

// TestWriteCPIO: the archive holds the tree, relative names, owned by
// root, each file's mode and bytes, symlinks as their target, in the newc
// format (read back by Go's reader and, where installed, by cpio -t).
func TestWriteCPIO(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	for name, body := range map[string]string{"init": "#!/bin/sh\n", "lib/modules/order": "a\nb\n", "etc/hosts": "127.0.0.1 localhost\n"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "init"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hosts", filepath.Join(root, "lib/hosts")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "initrd.cpio")
	if err := WriteCPIO(root, out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := cpio.NewReader(f)
	var got []string
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r)
		if h.Uid != 0 || h.Guid != 0 {
			t.Errorf("%s: owner %d:%d", h.Name, h.Uid, h.Guid)
		}
		e := fmt.Sprintf("%s %o", h.Name, h.Mode)
		switch {
		case h.Mode.IsRegular():
			e += " " + string(body)
		case h.Linkname != "":
			e += " -> " + h.Linkname
		}
		got = append(got, e)
	}
	want := []string{
		"etc 40755",
		"etc/hosts 100644 127.0.0.1 localhost\n",
		"init 100755 #!/bin/sh\n",
		"lib 40755",
		"lib/hosts 120777 -> /etc/hosts",
		"lib/modules 40755",
		"lib/modules/order 100644 a\nb\n",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("archive:\n%q\nwant\n%q", got, want)
	}
	if _, err := exec.LookPath("cpio"); err == nil {
		cmd := exec.Command("cpio", "--quiet", "-t", "-F", out)
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("cpio -t: %v", err)
		}
		if l := strings.Fields(string(b)); len(l) != len(want) || l[0] != "etc" {
			t.Errorf("cpio -t lists %q", l)
		}
	}
}

//go:build vm

package vmsystemd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/timed-project/timed/tests/internal/vmguest"
)

// wanted are the modules the initramfs loads, each after what it depends
// on: the virtio PCI transport, the disk and the NIC, ext4, and crc32c
// (ext4's metadata checksums ask the crypto API for it, which in Debian's
// kernel is a module nobody would load in an initramfs without modprobe).
var wanted = []string{"virtio_pci", "virtio_blk", "virtio_net", "crc32c_generic", "ext4"}

// buildInitramfs writes the guest's initramfs to out, assembled in
// dir/initramfs: busybox and init.sh, the modules in load order, and the
// payload init.sh copies into the root disk (the .deb, check.sh, its unit
// and environment, the network's configuration).
func buildInitramfs(dir, out string, assets map[string]string, deb, exposure, exposureWait string) error {
	root := filepath.Join(dir, "initramfs")
	order, err := vmguest.LoadOrder(assets["modules"], wanted)
	if err != nil {
		return err
	}
	var names []string
	files := map[string]file{
		"bin/busybox": {from: assets["busybox"], mode: 0o755},
		"init":        {data: initScript, mode: 0o755},
	}
	for _, m := range order {
		files["lib/modules/"+m.Name+".ko"] = file{from: m.Path, mode: 0o644}
		names = append(names, m.Name)
	}
	files["modules"] = file{data: []byte(strings.Join(names, "\n") + "\n"), mode: 0o644}

	p := "payload/"
	files[p+"root/"+filepath.Base(deb)] = file{from: deb, mode: 0o644}
	files[p+"usr/local/sbin/timed-vmcheck"] = file{data: checkScript, mode: 0o755}
	files[p+"etc/timed-vmcheck.env"] = file{mode: 0o644, data: fmt.Appendf(nil,
		"EXPOSURE=%s\nEXPOSURE_WAIT=%s\nSYNC_BOUND=%d\nKERNEL_BOUND=%d\n", exposure, exposureWait, int(syncBound/time.Second), int(kernelBound/time.Second))}
	files[p+"etc/systemd/system/timed-vmcheck.service"] = file{mode: 0o644, data: []byte(`[Unit]
Description=timed's checks under systemd (tests/vmsystemd)
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/timed-vmcheck
StandardOutput=journal+console
`)}
	files[p+"etc/systemd/network/10-tvm.network"] = file{mode: 0o644, data: []byte(`[Match]
Type=ether

[Network]
Address=` + guestAddr + `
`)}
	for name, f := range files {
		if err := f.write(filepath.Join(root, name)); err != nil {
			return err
		}
	}
	for _, d := range []string{"proc", "sys", "dev", "newroot"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	wants := filepath.Join(root, p, "etc/systemd/system/multi-user.target.wants")
	if err := os.MkdirAll(wants, 0o755); err != nil {
		return err
	}
	if err := os.Symlink("/etc/systemd/system/timed-vmcheck.service", filepath.Join(wants, "timed-vmcheck.service")); err != nil {
		return err
	}

	return vmguest.WriteCPIO(root, out)
}

// file is one file of the initramfs: a copy of from, or data.
type file struct {
	from string
	data []byte
	mode os.FileMode
}

func (f file) write(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data := f.data
	if f.from != "" {
		b, err := os.ReadFile(f.from)
		if err != nil {
			return err
		}
		data = b
	}
	return os.WriteFile(path, data, f.mode)
}

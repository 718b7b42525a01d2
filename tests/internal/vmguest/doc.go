// Package vmguest is what the two real-kernel QEMU suites (tests/vm, busybox
// guests on a bridge, and tests/vmsystemd, a Debian guest under systemd)
// share to boot a guest: reading the KEY=VALUE lines of their asset scripts
// (tests/vm/assets.sh), resolving the order in which an initramfs loads
// kernel modules from the modules' own .modinfo depends=, writing a newc
// cpio initramfs, the common part of QEMU's command line (kernel, initrd,
// accelerator, a tap NIC), and a network namespace with a bridge and taps,
// through ip(8).
//
// It has no build tag: the pure parts are unit-tested by `go test
// ./tests/internal/...`; the namespace helpers need root and are exercised
// by the suites (make e2e-vm, make e2e-systemd).
package vmguest

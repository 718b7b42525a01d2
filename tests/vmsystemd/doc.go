//go:build vm

// Package vmsystemd boots the Debian package under a real systemd: a
// minimal Debian (debootstrap, cached outside the repository by
// rootfs.sh) on Debian's kernel (tests/vm/assets.sh) in a QEMU guest
// with a clock of its own, where the package's unit runs `timed --clock
// system` as it would on a server. A busybox initramfs loads the virtio
// and ext4 modules, copies the run's files into the root disk (the .deb
// of `make deb`, guest/check.sh and the unit that runs it) and hands over
// to systemd; the disk is QEMU's snapshot of the cached image, so a run
// never changes it. The guest's NIC is a tap on a bridge inside a network
// namespace of the test's own, where bin/timed runs as master with
// `--clock dry-run` (it reads the host's clock and never sets it). What
// it shares with tests/vm is tests/internal/vmguest.
//
// check.sh installs the package as an admin would and checks the running
// system (systemctl, timedatectl, timed-wait, the timed group, reload and
// stop against the unit's timeouts, systemd-analyze security, apt purge);
// its results come back on the guest's second serial port, one line each,
// and each is a subtest here. The figures (boot, install, time to
// synchronised, reload, stop, exposure) are printed as a table at the
// end. The tests are behind the vm build tag and need root, /dev/net/tun
// and qemu-system-x86_64: `make e2e-systemd` installs what is missing
// and runs them; where something cannot be had the test skips, saying
// why, and the summary of `make test` shows it.
package vmsystemd

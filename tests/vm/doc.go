// Package vm is the suite of real kernels (issue 19, `make e2e-vm`): QEMU
// guests booting Debian's kernel (assets.sh fetches it, and busybox-static,
// from Debian's packages into a cache, never installing them on the host)
// from an initramfs the test builds with busybox, the virtio modules and
// the static bin/timed and bin/timedc. Each guest's clock is stepped off
// and its kernel frequency set off at boot, and it runs `timed --clock
// system --profile fast`: the production path, adjtimex(2) on a kernel
// clock of its own. The guests' tap devices are on one bridge inside a
// network namespace of the test's own, where an observer outside the
// election (timedc clockdiff, reading the host clock only) measures each
// guest's clock against the host's. The last scenario (reference_test.go,
// issue 22) runs Debian's chronyd, unpacked by assets.sh, twice: with -x
// on the namespace's side of the bridge, serving the host's clock and
// never adjusting it, and in one guest, whose timed is a reference
// (--reference kernel); its libraries come from the host (ldd), which
// make vm-tools provides. What the suite shares with tests/vmsystemd (the
// modules' load order, the initramfs archive, QEMU's common arguments, the
// namespace's bridge and taps) is tests/internal/vmguest.
//
// The tests are behind the vm build tag and need root, /dev/net/tun,
// qemu-system-x86_64 and cpio; `make test` runs them through `make e2e-vm`,
// which installs what is missing from Debian's packages and, where a
// prerequisite cannot be had, says so and records the skip and its reason
// in the test summary.
package vm

#!/usr/bin/env bash
# rootfs.sh: the minimal Debian with systemd that the systemd VM suite boots,
# made by debootstrap from the mirror apt uses on this machine and kept as
# an ext4 image in a cache outside the repository. The image's name carries
# a hash of its inputs (suite, variant, packages, mirror, and this script),
# so a later run reuses it and a change of any input makes a new one. The
# suite boots it read-only underneath (QEMU's snapshot=on): a run never
# changes the cached image. Prints rootfs=PATH.
#
#   TIMED_VM_CACHE  the cache (default /var/cache/timed-vm)
set -euo pipefail

cache=${TIMED_VM_CACHE:-/var/cache/timed-vm}
suite=bookworm
variant=minbase
# udev beside systemd: without it no device unit ever appears (the
# serial getty waits 90 s for dev-ttyS0.device) and systemd-networkd leaves
# every link "pending udev initialization".
include=systemd,systemd-sysv,udev,dbus,iproute2,procps,adduser
size=1G

# The mirror apt uses here (deb822 or one-line sources), else Debian's.
mirror=$(
	{
		awk 'tolower($1)=="uris:" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null
		awk '$1=="deb" && $2 !~ /^\[/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null
	} | head -n1
) || true
mirror=${mirror:-http://deb.debian.org/debian}

key=$({ echo "$suite $variant $include $size $mirror"; cat "$0"; } | sha256sum | cut -c1-16)
img="$cache/rootfs-$suite-$key.img"

mkdir -p "$cache"
exec 9>"$cache/.rootfs.lock"
flock 9
if [ ! -e "$img" ]; then
	tmp=$(mktemp -d "$cache/.rootfs.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	echo "rootfs: debootstrap --variant=$variant --include=$include $suite from $mirror (once; cached as $img)" >&2
	start=$(date +%s)
	debootstrap --variant="$variant" --include="$include" "$suite" "$tmp/root" "$mirror" >"$tmp/log" 2>&1 ||
		{ tail -n 30 "$tmp/log" >&2; echo "rootfs: debootstrap failed" >&2; exit 1; }
	# What every boot of it needs and no run changes: a name, root on
	# /dev/vda, no password on the serial console (the guest is the
	# test's own, on a network of the test's own), and systemd-networkd
	# (a run adds its .network file), so that network-online.target,
	# which timed.service waits for, means an address.
	echo timed-vm >"$tmp/root/etc/hostname"
	echo '/dev/vda / ext4 defaults 0 1' >"$tmp/root/etc/fstab"
	chroot "$tmp/root" passwd -d root >/dev/null
	chroot "$tmp/root" systemctl enable -q systemd-networkd.service systemd-networkd-wait-online.service
	rm -rf "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/lib/apt/lists/"*_Packages
	mkfs.ext4 -q -L timed-root -d "$tmp/root" "$tmp/img" "$size" >/dev/null
	mv "$tmp/img" "$img"
	# Images of other inputs are stale: a cache does not grow by 250 MB
	# with every change of this script.
	find "$cache" -maxdepth 1 -name "rootfs-$suite-*.img" ! -name "${img##*/}" -delete
	echo "rootfs: made in $(($(date +%s) - start)) s" >&2
fi
echo "rootfs=$img"

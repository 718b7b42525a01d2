#!/usr/bin/env bash
# assets.sh: what the VM suite boots, from Debian's packages, unpacked into
# a cache outside the repository and never installed on the host:
#   - Debian's kernel (linux-image-amd64's dependency) and its modules;
#   - busybox-static, the guests' userland;
#   - chrony, whose chronyd serves the host's clock on the bridge and
#     keeps one guest's (never installed: installing the package would
#     start a service that disciplines the host's clock; its libraries are
#     the host's, which make vm-tools installs).
# The cache is keyed by each package's version, so a later run reuses it and
# a new Debian kernel lands in a directory of its own. Prints, one per line,
# KEY=VALUE for the suite (kernel=…, modules=…, kver=…, busybox=…,
# chronyd=…).
#
#   TIMED_VM_CACHE  the cache (default /var/cache/timed-vm)
set -euo pipefail

cache=${TIMED_VM_CACHE:-/var/cache/timed-vm}
mkdir -p "$cache"
# One fetch at a time: two suites started together share the cache.
exec 9>"$cache/.lock"
flock 9

# apt-get download needs package lists; an `apt-get update` is cheap next to
# a failed look-up, and CI's machine may never have run one.
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
if [ -z "$kpkg" ]; then
	apt-get update -qq >&2
	kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
fi
[ -n "$kpkg" ] || { echo "assets: no linux-image-amd64 dependency in Debian's package lists" >&2; exit 1; }

# unpack PKG: download PKG's .deb and unpack it into $cache/PKG_VERSION,
# once; prints that directory.
unpack() {
	local pkg=$1 ver dir tmp
	ver=$(apt-cache policy "$pkg" | awk '/Candidate:/{print $2}')
	[ -n "$ver" ] && [ "$ver" != "(none)" ] || { echo "assets: $pkg: no candidate version" >&2; return 1; }
	dir="$cache/${pkg}_${ver//:/%}"
	if [ ! -e "$dir/.done" ]; then
		tmp=$(mktemp -d "$cache/.dl.XXXXXX")
		# apt-get download as root warns that it runs unsandboxed: expected.
		(cd "$tmp" && apt-get download -qq "$pkg=$ver" 2>/dev/null) >&2 ||
			{ rm -rf "$tmp"; echo "assets: apt-get download $pkg=$ver failed" >&2; return 1; }
		rm -rf "$dir" && mkdir -p "$dir"
		dpkg-deb -x "$tmp"/*.deb "$dir"
		rm -rf "$tmp"
		touch "$dir/.done"
	fi
	echo "$dir"
}

kdir=$(unpack "$kpkg")
bdir=$(unpack busybox-static)
cdir=$(unpack chrony)
kver=${kpkg#linux-image-}
echo "kver=$kver"
echo "kernel=$kdir/boot/vmlinuz-$kver"
echo "modules=$kdir/lib/modules/$kver"
echo "busybox=$bdir/bin/busybox"
echo "chronyd=$cdir/usr/sbin/chronyd"

#!/usr/bin/env bash
# install-missing.sh WHO CMD:PKG...: installs from Debian's packages each
# PKG whose CMD is not on the PATH, saying for whom (make e2e-vm, make
# e2e-systemd); exits non-zero when an install fails, so the caller decides
# whether that skips its suite.
set -euo pipefail
who=$1
shift
need=()
for t in "$@"; do
	command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
[ ${#need[@]} -eq 0 ] && exit 0
echo "installing ${need[*]} (for $who)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null

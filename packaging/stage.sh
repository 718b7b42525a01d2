#!/bin/sh
# Prepares what packaging/nfpm.yaml takes from $DEB_STAGE besides the
# repository's own files: the generated man pages gzipped (as Debian
# wants), the completions, the unit with the package's binary path, the
# copyright file (generated from the binaries' modules) and a
# changelog.Debian.gz. Run by `make deb` with DEB_STAGE, DOCS, BIN,
# DEB_VERSION, DEB_MAINTAINER, SOURCE_DATE_EPOCH and GO set.
set -eu
: "${DEB_STAGE:?}" "${DOCS:?}" "${BIN:?}" "${DEB_VERSION:?}" "${DEB_MAINTAINER:?}" "${SOURCE_DATE_EPOCH:?}"
GO=${GO:-go}

rm -rf "$DEB_STAGE"
mkdir -p "$DEB_STAGE"
cp -R "$DOCS/." "$DEB_STAGE/"
# -n: no name or time stamp in the gzip header, so the same pages give the
# same bytes.
gzip -9n "$DEB_STAGE"/man/man*/*

sed 's#/usr/local/sbin/timed#/usr/sbin/timed#' systemd/timed.service > "$DEB_STAGE/timed.service"
grep -q '^ExecStart=/usr/sbin/timed ' "$DEB_STAGE/timed.service" || {
	echo "stage.sh: the unit's ExecStart is not /usr/local/sbin/timed any more: fix the sed" >&2
	exit 1
}

sed 's#/usr/local/bin/timedc#/usr/bin/timedc#' systemd/timed-wait.service > "$DEB_STAGE/timed-wait.service"
grep -q '^ExecStart=/usr/bin/timedc ' "$DEB_STAGE/timed-wait.service" || {
	echo "stage.sh: timed-wait's ExecStart is not /usr/local/bin/timedc any more: fix the sed" >&2
	exit 1
}

"$GO" run ./packaging/gencopyright -contact "$DEB_MAINTAINER" "$BIN/timed" "$BIN/timedc" > "$DEB_STAGE/copyright"

{
	printf 'timed (%s) unstable; urgency=medium\n\n' "$DEB_VERSION"
	# Lines of at most 80 characters, as Debian's changelog wants.
	printf '  * Built by make deb from commit %s.\n' "$(git describe --always --dirty 2>/dev/null || echo unknown)"
	git log -1 --format=%s 2>/dev/null | fold -s -w 72 | sed 's/^/    /; s/ *$//' || true
	printf '\n' 
	printf ' -- %s  %s\n' "$DEB_MAINTAINER" "$(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n > "$DEB_STAGE/changelog.Debian.gz"

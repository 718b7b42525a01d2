#!/bin/sh
# The Debian version of this checkout, from `git describe`:
#   v1.2.3                    -> 1.2.3-1
#   v1.2.3-rc1                -> 1.2.3~rc1-1            (a pre-release sorts before 1.2.3)
#   v1.2.3-4-gabc1234         -> 1.2.3+git4.gabc1234-1  (commits after a release sort after it)
#   no v* tag yet             -> 0.0~git20260102.abc1234-1
# and +dirty when tracked files differ from HEAD. The -1 is the Debian
# revision: the packaging is ours, not a distribution's.
set -eu
dirty=
git diff --quiet HEAD -- 2>/dev/null || dirty=+dirty
if d=$(git describe --tags --match 'v[0-9]*' 2>/dev/null); then
	d=${d#v}
	# The count and hash git describe appends, if any.
	case $d in
	*-[0-9]*-g[0-9a-f]*)
		hash=${d##*-}; rest=${d%-*}; count=${rest##*-}; d=${rest%-*}
		after=+git$count.$hash ;;
	*) after= ;;
	esac
	# What is left is the tag: 1.2.3 or 1.2.3-rc1.
	case $d in
	*-*) d=$(printf '%s' "$d" | sed 's/-/~/') ;;
	esac
	v=$d$after
else
	v=0.0~git$(git log -1 --format=%cd --date=format:%Y%m%d).$(git rev-parse --short=7 HEAD)
fi
echo "$v$dirty-1"

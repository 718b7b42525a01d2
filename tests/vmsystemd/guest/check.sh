#!/bin/bash
# timed-vmcheck: the systemd suite's checks, run once inside the guest by
# timed-vmcheck.service after multi-user.target. It installs the package
# as an admin would, then checks the running system; each result is one
# line on the second serial port, which the Go test reads:
#
#   TVM begin
#   TVM check NAME pass|fail DETAIL     one per check, in order
#   TVM figure NAME VALUE               measured, reported, not asserted
#   TVM ask start-master|stop-master    the host does it and answers
#                                       "done start-master" on the port
#   TVM journal LINE                    journalctl -b, when a check failed
#   TVM done failed=0|1
#
# Durations are taken on the guest's monotonic clock (/proc/timer_list's
# "now at", read by bash builtins: a subshell's fork, no program started),
# never on its realtime clock, which timed steps. /etc/timed-vmcheck.env
# (written by the test) sets EXPOSURE and EXPOSURE_WAIT (the README's
# systemd-analyze security figures) and the bounds.
set -u
. /etc/timed-vmcheck.env

exec 3<>/dev/ttyS1
stty raw -echo <&3
failed=0
say() { printf 'TVM %s\n' "$*" >&3; }
# oneline: at most 400 printable bytes of stdin on one line.
oneline() { tr '\n' '|' | tr -cd '[:print:]' | cut -c1-400; }
pass() { say "check $1 pass $(printf '%s' "${*:2}" | oneline)"; }
fail() { failed=1; say "check $1 fail $(printf '%s' "${*:2}" | oneline)"; }
figure() { say "figure $1 ${*:2}"; }
# ask WHAT: have the host do WHAT (start-master, stop-master); fails when
# it does not answer within a minute.
ask() {
	local reply
	say "ask $1"
	read -r -t 60 reply <&3 && [ "$reply" = "done $1" ]
}

# mono: the monotonic clock in nanoseconds.
mono() {
	local a b c r
	while read -r a b c r; do
		if [ "$a $b" = "now at" ]; then
			echo "$c"
			return
		fi
	done </proc/timer_list
}
# ms T0 T1: the milliseconds from T0 to T1 (nanoseconds), to 0.1 ms.
ms() {
	local d=$((($2 - $1) / 100000))
	printf '%d.%d' $((d / 10)) $((d % 10))
}
# usec_ms USEC: microseconds as milliseconds.
usec_ms() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }
# within SECONDS CMD...: run CMD every 200 ms until it succeeds; fails
# when SECONDS have passed without.
within() {
	local end=$(($(mono) + $1 * 1000000000))
	shift
	until "$@"; do
		[ "$(mono)" -lt "$end" ] || return 1
		sleep 0.2
	done
}
synced_timedc() { timedc status 2>/dev/null | head -n1 | grep -q '^synchronised:'; }
synced_kernel() { [ "$(timedatectl show -p NTPSynchronized --value 2>/dev/null)" = yes ]; }
# service_usec PROP: timed.service's property PROP in microseconds (systemctl
# show prints timeouts for people: "1min 30s").
service_usec() {
	busctl get-property org.freedesktop.systemd1 /org/freedesktop/systemd1/unit/timed_2eservice \
		org.freedesktop.systemd1.Service "$1" | cut -d' ' -f2
}
active() { [ "$(systemctl is-active timed)" = active ]; }
inactive() { [ "$(systemctl is-active timed)" != active ]; }

say begin
figure boot-kernel+initramfs "$(usec_ms "$(systemctl show -P UserspaceTimestampMonotonic)") ms"
figure boot-to-multi-user "$(usec_ms "$(systemctl show -P ActiveEnterTimestampMonotonic multi-user.target)") ms"

# Everything named after timed (not timedated, systemd's), before the
# package comes: the purge check compares with it.
timed_paths() { find / /run -xdev -name '*timed*' -not -name '*timedate*' 2>/dev/null | sort -u; }
timed_paths >/run/tvm-before

# --- install, as the README says to when configuring first: mask, install,
# edit, unmask, enable --now.
systemctl mask -q timed.service
t0=$(mono)
out=$(cd /root && DEBIAN_FRONTEND=noninteractive timeout 300 apt install -y ./timed_*.deb 2>&1)
rc=$?
t1=$(mono)
status=$(dpkg-query -W -f '${Status}' timed 2>&1)
if [ $rc -eq 0 ] && [ "$status" = "install ok installed" ]; then
	pass install "$status; apt: $(printf '%s' "$out" | grep -v -e '^WARNING: apt does not' -e '^$' | tail -n 4)"
else
	fail install "apt install rc=$rc, status $status: $(printf '%s' "$out" | tail -n 8)"
fi
figure apt-install "$(ms "$t0" "$t1") ms"
dpkg -L timed >/run/tvm-files 2>/dev/null
if inactive; then pass masked-not-started; else fail masked-not-started "timed started though masked"; fi

cat >/etc/timed/timed.yaml <<EOF
# written by tests/vmsystemd: a slave of the host's master
master: false
profile: fast
clock: system
port: 525
log-level: info
state-dir: /var/lib/timed
EOF
systemctl unmask -q timed.service
t0=$(mono)
out=$(timeout 120 systemctl enable --now timed 2>&1)
rc=$?
t1=$(mono)
figure start "$(ms "$t0" "$t1") ms"
if [ $rc -eq 0 ] && active; then
	pass is-active "$(systemctl is-active timed), $(systemctl show -P StatusText timed)"
else
	fail is-active "enable --now rc=$rc: $out; is-active $(systemctl is-active timed)"
fi

# exposure ARGS...: the overall exposure level systemd-analyze security rates.
exposure() { systemd-analyze security "$@" 2>&1 | grep -o 'exposure level for [^:]*: [0-9.]*' | grep -o '[0-9.]*$'; }
online=$(exposure timed.service)
offline=$(exposure --offline=true /usr/lib/systemd/system/timed.service)
wait_offline=$(exposure --offline=true /usr/lib/systemd/system/timed-wait.service)
figure security-exposure "timed.service ${online:-none} running, ${offline:-none} offline; timed-wait.service ${wait_offline:-none} offline"
# The README states the offline figures; the running unit must rate no worse.
if [ "$offline" = "$EXPOSURE" ] && [ "$wait_offline" = "$EXPOSURE_WAIT" ] && [ -n "$online" ] &&
	[ "$(echo "$online $offline" | awk '{print ($1 <= $2)}')" = 1 ]; then
	pass security "timed.service $online running, $offline offline; timed-wait.service $wait_offline offline: as the README states"
else
	fail security "timed.service ${online:-?} running, ${offline:-?} offline (README: $EXPOSURE); timed-wait.service ${wait_offline:-?} offline (README: $EXPOSURE_WAIT)"
fi

# --- synchronisation, from the moment the host's master starts.
ask start-master || fail master "the host did not start its master"
t0=$(mono)
if within "$SYNC_BOUND" synced_timedc; then
	t1=$(mono)
	pass timedc-synchronised "$(timedc status | head -n1)"
	figure synchronised-timedc "$(ms "$t0" "$t1") ms after the master started"
else
	fail timedc-synchronised "not within ${SYNC_BOUND}s: $(timedc status 2>&1 | head -n 3)"
fi
if within "$KERNEL_BOUND" synced_kernel; then
	t1=$(mono)
	pass ntp-synchronized "NTPSynchronized=yes"
	figure ntp-synchronized "$(ms "$t0" "$t1") ms after the master started"
else
	fail ntp-synchronized "NTPSynchronized=$(timedatectl show -p NTPSynchronized --value 2>&1) ${KERNEL_BOUND}s after timedc's synchronised; $(timedatectl show 2>&1)"
fi

ntp=$(timedatectl show -p NTP --value 2>&1)
can=$(timedatectl show -p CanNTP --value 2>&1)
service=$(timedatectl status 2>&1 | grep 'NTP service:' | sed 's/^ *//')
if [ "$ntp" = yes ] && [ "$can" = yes ] && [ "$service" = "NTP service: active" ]; then
	pass timedatectl-ntp-service "NTP=$ntp CanNTP=$can, $service"
else
	fail timedatectl-ntp-service "NTP=$ntp CanNTP=$can, '${service:-no NTP service line}'"
fi

# --- set-ntp false stops timed, true starts it. timed-wait then waits: the
# host's master is stopped while timed restarts, so that the restarted
# daemon cannot synchronise until the master is back.
# set_ntp VALUE STATE ENABLED FALLBACK: timedatectl set-ntp VALUE must leave
# timed STATE (the test active or inactive) and is-enabled ENABLED; where it
# does not, systemctl FALLBACK timed, so that the checks after still run.
set_ntp() {
	local out rc
	out=$(timeout 60 timedatectl set-ntp "$1" 2>&1)
	rc=$?
	if [ $rc -eq 0 ] && within 60 "$2" && [ "$(systemctl is-enabled timed 2>&1)" = "$3" ]; then
		pass "set-ntp-$1" "is-active $(systemctl is-active timed), is-enabled $3"
	else
		fail "set-ntp-$1" "rc=$rc $out; is-active $(systemctl is-active timed), is-enabled $(systemctl is-enabled timed 2>&1)"
		systemctl "$4" timed
	fi
}
systemctl stop timed-wait.service 2>/dev/null
set_ntp false inactive disabled stop
ask stop-master || fail master "the host did not stop its master"
set_ntp true active enabled start
timeout 300 systemctl start timed-wait.service >/run/tvm-wait 2>&1 &
waiter=$!
# Waiting while there is no master: timed-wait is still starting.
waiting() { [ "$(systemctl is-active timed-wait.service)" = activating ]; }
within 30 waiting
before="timed-wait $(systemctl is-active timed-wait.service), timedc $(timedc status 2>&1 | head -n1 | cut -d: -f1)"
ask start-master || fail master "the host did not start its master again"
t0=$(mono)
wait $waiter
rc=$?
t1=$(mono)
after=$(timedc status 2>&1 | head -n1)
if [ "$before" = "timed-wait activating, timedc unsynchronised" ] && [ $rc -eq 0 ] && [ "${after%%:*}" = synchronised ]; then
	pass timed-wait "waited while the master was away ($before); returned $(ms "$t0" "$t1") ms after it came back; timedc: $after"
	figure timed-wait "$(ms "$t0" "$t1") ms after the master came back"
else
	fail timed-wait "before the master came back: $before; systemctl start timed-wait rc=$rc $(cat /run/tvm-wait); timedc status after: $after"
fi

# --- the group: a member runs timedc status, anyone else is told to join.
useradd -M -N -G timed alice && useradd -M -N bob
out=$(runuser -u alice -- timedc status 2>&1)
rc=$?
if [ $rc -eq 0 ]; then pass group-member "$(printf '%s' "$out" | head -n1)"; else fail group-member "rc=$rc $out"; fi
out=$(runuser -u bob -- timedc status 2>&1)
rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q 'add yourself to group timed'; then
	pass group-outsider "rc=$rc: $out"
else
	fail group-outsider "rc=$rc: $out"
fi

# --- reload and stop, against the unit's own timeouts.
pid0=$(systemctl show -P MainPID timed)
since=$(date '+%Y-%m-%d %H:%M:%S')
limit=$(service_usec TimeoutStartUSec) # ExecReload= runs under the start timeout
t0=$(mono)
out=$(timeout 120 systemctl reload timed 2>&1)
rc=$?
t1=$(mono)
figure reload "$(ms "$t0" "$t1") ms (systemctl reload; timeout $(usec_ms "$limit") ms)"
reloaded() { journalctl -u timed --since "$since" -o cat 2>/dev/null | grep -q 'configuration reloaded'; }
if [ $rc -eq 0 ] && [ $(((t1 - t0) / 1000)) -lt "$limit" ] && active &&
	[ "$(systemctl show -P MainPID timed)" = "$pid0" ] && within 10 reloaded; then
	pass reload "$(ms "$t0" "$t1") ms, same PID $pid0, 'configuration reloaded' logged"
else
	fail reload "rc=$rc $out; $(ms "$t0" "$t1") ms; is-active $(systemctl is-active timed), PID $pid0 -> $(systemctl show -P MainPID timed)"
fi

limit=$(service_usec TimeoutStopUSec)
t0=$(mono)
out=$(timeout 120 systemctl stop timed 2>&1)
rc=$?
t1=$(mono)
result=$(systemctl show -P Result timed)
code=$(systemctl show -P ExecMainCode timed)/$(systemctl show -P ExecMainStatus timed)
deactivating=$(($(systemctl show -P InactiveEnterTimestampMonotonic timed) - $(systemctl show -P ActiveExitTimestampMonotonic timed)))
figure stop "$(ms "$t0" "$t1") ms (systemctl stop; systemd: $(usec_ms "$deactivating") ms deactivating; timeout $(usec_ms "$limit") ms)"
if [ $rc -eq 0 ] && [ "$result" = success ] && inactive && [ "$deactivating" -lt "$limit" ]; then
	pass stop "$(ms "$t0" "$t1") ms, Result=$result, main process code/status $code"
else
	fail stop "rc=$rc $out; Result=$result, main process code/status $code, deactivating $(usec_ms "$deactivating") ms, limit $(usec_ms "$limit") ms"
fi

# purge NAME: apt purge timed leaves nothing of the package: no file it
# shipped, none of its directories, no new path named after it, no
# process; the timed user stays (Debian leaves system users: files it owns
# may remain elsewhere).
purge() {
	local out rc t0 t1 left="" new known f d
	t0=$(mono)
	out=$(DEBIAN_FRONTEND=noninteractive timeout 300 apt purge -y timed 2>&1)
	rc=$?
	t1=$(mono)
	figure "$1" "$(ms "$t0" "$t1") ms (apt purge)"
	while read -r f; do
		[ -d "$f" ] && [ ! -L "$f" ] && continue # shared directories (/usr/share/man/man8, …)
		if [ -e "$f" ] || [ -L "$f" ]; then left="$left $f"; fi
	done </run/tvm-files
	for d in /etc/timed /var/lib/timed /run/timed /usr/share/doc/timed; do
		[ -e "$d" ] && left="$left $d"
	done
	new=$(timed_paths | comm -13 /run/tvm-before -)
	known=$(dpkg-query -W timed 2>&1)
	if [ $rc -eq 0 ] && [ -z "$left" ] && [ -z "$new" ] && ! dpkg-query -W timed >/dev/null 2>&1 && ! pgrep -x timed >/dev/null; then
		pass "$1" "nothing left; dpkg: $known"
	else
		fail "$1" "rc=$rc; left:${left:- none}; new paths named *timed*: ${new:-none}; dpkg: $known; $(printf '%s' "$out" | tail -n 3)"
	fi
}
purge purge
if getent passwd timed >/dev/null; then
	pass purge-keeps-user "user timed kept (Debian policy: system users stay)"
else
	fail purge-keeps-user "user timed removed, which the postrm says it keeps"
fi

# --- the default way: installed unmasked, the package enables and starts
# timed itself (with its example configuration), and not timed-wait; a
# purge after that leaves nothing either.
out=$(cd /root && DEBIAN_FRONTEND=noninteractive timeout 300 apt install -y ./timed_*.deb 2>&1)
rc=$?
if [ $rc -eq 0 ] && active && [ "$(systemctl is-enabled timed 2>&1)" = enabled ] &&
	[ "$(systemctl is-enabled timed-wait 2>&1)" = disabled ]; then
	pass install-starts "timed $(systemctl is-active timed), $(systemctl is-enabled timed); timed-wait $(systemctl is-enabled timed-wait)"
else
	fail install-starts "apt install rc=$rc; timed $(systemctl is-active timed), $(systemctl is-enabled timed 2>&1); timed-wait $(systemctl is-enabled timed-wait 2>&1); $(printf '%s' "$out" | tail -n 4)"
fi
purge purge-after-start

if [ $failed -ne 0 ]; then
	journalctl -b --no-pager -o short-monotonic 2>&1 | sed 's/^/TVM journal /' >&3
fi
say "done failed=$failed"
systemctl poweroff --no-block

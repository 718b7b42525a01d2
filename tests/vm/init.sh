#!/bin/busybox sh
# /init of the VM suite's guests (tests/vm): busybox, the modules listed in
# /lib/modules/order, bin/timed and bin/timedc. The test names each guest
# on the kernel command line:
#   timed.name=g1              host name
#   timed.addr=10.77.0.1/24    address of eth0 (virtio-net, on the bridge)
#   timed.step=+3              seconds the clock is stepped off at boot
#   timed.freq=2949120         kernel frequency offset (adjtimex -f; 65536 = 1 ppm)
# Then it serves the test's commands: a shell on the virtio port "cmd" (a
# unix socket on the host). The kernel and this script write to the
# console (ttyS0), the daemon to fd 4, the virtio port "log": two files
# the test keeps on the host. (Not a second serial port: under TCG an
# 8250's output waited for the next byte in or out, seconds at times.)
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /run/timed /var/lib/timed /tmp

name=guest addr= step=0 freq=0
for arg in $(cat /proc/cmdline); do
	case $arg in
	timed.name=*) name=${arg#*=} ;;
	timed.addr=*) addr=${arg#*=} ;;
	timed.step=*) step=${arg#*=} ;;
	timed.freq=*) freq=${arg#*=} ;;
	esac
done

while read -r m; do
	insmod "/lib/modules/$m.ko" || echo "init: insmod $m failed"
done </lib/modules/order

hostname "$name"
ip link set lo up
ip addr add "$addr" dev eth0
ip link set eth0 up
# /var/lib/timed is the host's directory for this guest (9p): the drift
# file outlives a reboot.
mount -t 9p -o trans=virtio,version=9p2000.L state /var/lib/timed || echo "init: no 9p share for /var/lib/timed"

# The clock starts at the RTC's whole second, up to 1 s behind the host's;
# the step and the frequency come on top.
date -s "@$(($(date +%s) + step))" >/dev/null
adjtimex -f "$freq" >/dev/null
echo "init: $name $addr, clock stepped ${step}s, frequency $freq (65536 = 1 ppm)"

# The ports by name (no udev here): /sys/class/virtio-ports/vportNpM/name.
for p in /sys/class/virtio-ports/*; do
	case $(cat "$p/name") in
	cmd) cmd=/dev/${p##*/} ;;
	log) log=/dev/${p##*/} ;;
	esac
done
# A virtio port opens once: each is opened here, and everything started
# from the shell inherits the descriptors.
exec 3<>"$cmd" 4>"$log"

# The command shell reads a pipe, so it is not interactive (no prompt, no
# job control); it prints @@READY first, and is started again if it ever
# exits.
while :; do
	{
		echo 'echo @@READY'
		cat <&3
	} | sh >&3 2>&1
done

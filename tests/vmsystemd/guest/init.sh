#!/bin/busybox sh
# The initramfs's /init: load the modules the test listed in /modules (in
# order: each after those it depends on), mount the root disk, copy the
# run's files (/payload: the .deb, the checks and their unit, the network)
# into it and hand over to systemd. Writes to the guest's disk land in
# QEMU's snapshot, never in the cached image.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

fatal() {
	echo "TVM fatal initramfs: $*" >/dev/ttyS1
	echo "initramfs: $*"
	poweroff -f
}

for m in $(cat /modules); do
	insmod "/lib/modules/$m.ko" || fatal "insmod $m failed"
done
# The disk appears once virtio_blk has probed it: at most a few seconds.
i=0
while [ ! -b /dev/vda ]; do
	i=$((i + 1))
	[ $i -le 100 ] || fatal "no /dev/vda 10 s after virtio_blk"
	sleep 0.1
done
mkdir -p /newroot
mount -t ext4 /dev/vda /newroot || fatal "mount /dev/vda failed"
cp -a /payload/. /newroot/ || fatal "copying the run's files failed"
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init

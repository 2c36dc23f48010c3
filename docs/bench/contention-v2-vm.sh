#!/bin/sh
# `ddiskqos bench contention` on cgroup v2 inside the test VM: ext4 on the
# VM's test disk /dev/vda (qemu caps it at 100 MiB/s), the bench's volume
# and iocost's calibration twin on it. Run from the repository root; the
# report goes next to this script as contention-v2.{md,svg,json}:
#
#   CGO_ENABLED=0 go build -o bin/ddiskqos ./cmd/ddiskqos
#   make bin/vmexec
#   nice -n 19 ionice -c3 bin/vmexec -mem 2G -disk-size 6G -timeout 45m docs/bench/contention-v2-vm.sh --quick
#
# Arguments are passed to the bench (--quick, --neighbours, --configs ...).
#
# The deep-queue class (a device of known service time, NVMe-like): with
# DDISKQOS_VM_NULLBLK set to null_blk's parameters the volume is ext4 on a
# memory-backed /dev/nullb0 instead (give the VM the memory: -mem 4G), e.g.
#
#   DDISKQOS_VM_NULLBLK="hw_queue_depth=64 completion_nsec=100000" \
#     bin/vmexec -mem 4G -timeout 30m docs/bench/contention-v2-vm.sh \
#     --scenario host --no-loop --device-class vm-nullblk --quick ...
#
# (vmexec passes the variables named DDISKQOS_*.) One device, 3 GiB,
# completions by timer (irqmode=2).
set -eu
cd "$(dirname "$0")/../.."
disk=${DDISKQOS_VM_DISK:-/dev/vda}
if [ -n "${DDISKQOS_VM_NULLBLK:-}" ]; then
	[ -d /sys/module/configfs ] || insmod /modules/configfs.ko # null_blk's dependency
	# shellcheck disable=SC2086 # the parameters are words
	insmod /modules/null_blk.ko nr_devices=1 gb=3 memory_backed=1 irqmode=2 $DDISKQOS_VM_NULLBLK
	disk=/dev/nullb0
	echo "null_blk: $DDISKQOS_VM_NULLBLK; scheduler $(cat /sys/block/nullb0/queue/scheduler)" >&2
fi
mkfs.ext4 -q -F "$disk"
mkdir -p /run/vda
mount -t ext4 "$disk" /run/vda
trap 'umount /run/vda' EXIT
bin/ddiskqos bench contention --dir /run/vda --out docs/bench "$@" >/dev/null

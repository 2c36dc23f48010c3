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
set -eu
cd "$(dirname "$0")/../.."
mkfs.ext4 -q -F "${DDISKQOS_VM_DISK:-/dev/vda}"
mkdir -p /run/vda
mount -t ext4 "${DDISKQOS_VM_DISK:-/dev/vda}" /run/vda
trap 'umount /run/vda' EXIT
bin/ddiskqos bench contention --dir /run/vda --out docs/bench "$@" >/dev/null

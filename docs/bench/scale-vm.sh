#!/bin/sh
# `ddiskqos bench scale` on cgroup v2 and on cgroup v1 blkio, one after the
# other for each size, inside the same test VM (one boot, same kernel, same
# emulated CPU), so that v2 ÷ v1 cancels the emulation. Run from the
# repository root (the results go next to this script):
#
#   CGO_ENABLED=0 go build -o bin/ddiskqos ./cmd/ddiskqos
#   make bin/vmexec
#   nice -n 19 ionice -c3 bin/vmexec -mem 4G -timeout 40m docs/bench/scale-vm.sh 1000 5000 10000
#
# The VM boots with cgroup2 owning io (test/vm/init). For v1 the script
# takes io off the root's cgroup.subtree_control (no cgroup uses it once the
# v2 run has removed its own) and mounts a v1 blkio hierarchy at
# /run/blkio-v1, which the bench then finds as the I/O hierarchy (a mounted
# v1 blkio wins); afterwards it unmounts it and gives io back to cgroup2.
# Results: scale-vm-v2-N.json and scale-vm-v1-N.json, each written as soon
# as its run ends. DDISKQOS_SCALE_FLAGS replaces the bench flags.
set -u
cd "$(dirname "$0")/../.." || exit 1
out=docs/bench
flags=${DDISKQOS_SCALE_FLAGS:-"--duration 30s --warmup 10s --io-fraction 0.001 --scratch /tmp"}
v1=/run/blkio-v1
root=/sys/fs/cgroup

to_v1() {
	echo -io >"$root/cgroup.subtree_control" || return 1
	mkdir -p "$v1"
	i=0
	# The io controller leaves cgroup2 once no cgroup holds it (dying
	# ones are released asynchronously): retry for up to a minute.
	until mount -t cgroup -o blkio blkio "$v1" 2>/dev/null; do
		i=$((i + 1))
		if [ "$i" -ge 60 ]; then
			echo "scale-vm: mount -t cgroup -o blkio failed for 60 s; $root/cgroup.subtree_control: $(cat "$root/cgroup.subtree_control")" >&2
			mount -t cgroup -o blkio blkio "$v1"
			return 1
		fi
		sleep 1
	done
}

to_v2() {
	umount "$v1" || return 1
	# The v1 hierarchy goes once its last (dying) cgroup is released.
	i=0
	until echo +io >"$root/cgroup.subtree_control" 2>/dev/null; do
		i=$((i + 1))
		[ "$i" -ge 60 ] && return 1
		sleep 1
	done
}

run() { # version N
	echo "scale-vm: v$1 N=$2 start $(date -u +%T), load $(cat /proc/loadavg)" >&2
	# shellcheck disable=SC2086 # flags are words
	bin/ddiskqos bench scale --workloads "$2" $flags --out "$out/scale-vm-v$1-$2.json" >/dev/null
	rc=$?
	echo "scale-vm: v$1 N=$2 exit $rc end $(date -u +%T)" >&2
	return $rc
}

status=0
for n in "$@"; do
	run 2 "$n" || status=1
	if to_v1; then
		run 1 "$n" || status=1
		to_v2 || { echo "scale-vm: could not give io back to cgroup2" >&2; exit 1; }
	else
		status=1
	fi
done
exit $status

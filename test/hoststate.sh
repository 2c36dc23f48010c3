#!/usr/bin/env bash
# hoststate.sh — the host state the test suite must leave as it found it.
#
#   hoststate.sh save FILE    record it
#   hoststate.sh check FILE   compare with FILE; print every difference, exit 1 if any
#
# Recorded: the docker0 bridge (a dockerd told --bridge none in the host's
# network namespace deletes it), the shared engine's containers and images,
# attached loop devices, every block device's I/O scheduler, the cgroup
# directories of every hierarchy, and the mount points. The cgroups of the
# workplace's own process supervisor (process_api) come and go with its jobs
# and are left out, and so is the one cgroup the Docker engine makes for
# itself: the `docker` directory right under each hierarchy's root
# (/sys/fs/cgroup/<controller>/docker, /sys/fs/cgroup/unified/docker, or
# /sys/fs/cgroup/docker on a pure v2 host), which the engine creates when a
# machine's first container starts and keeps for its life. What is below
# it (a container's cgroup a test left behind) is still checked.
set -euo pipefail

snapshot() {
	echo "## docker0"
	if ip -o link show docker0 >/dev/null 2>&1; then echo "docker0 present"; else echo "docker0 ABSENT"; fi
	echo "## containers"
	docker ps -a --no-trunc --format '{{.ID}} {{.Names}}' | sort
	echo "## images"
	docker images --no-trunc --format '{{.ID}} {{.Repository}}:{{.Tag}}' | sort
	echo "## loop devices"
	losetup -a --noheadings -O NAME,BACK-FILE 2>/dev/null | sort || true
	echo "## schedulers"
	for f in /sys/block/*/queue/scheduler; do
		[ -e "$f" ] || continue
		d=${f#/sys/block/}
		echo "${d%%/*} $(cat "$f")"
	done | sort
	echo "## cgroups"
	find /sys/fs/cgroup -mindepth 1 -type d 2>/dev/null | grep -v '/process_api' |
		grep -Ev '^/sys/fs/cgroup/([^/]+/)?docker$' | sort
	echo "## mounts"
	awk '{print $5}' /proc/self/mountinfo | grep -v '^/proc/' | sort
}

case "${1:-}" in
save)
	snapshot >"$2"
	;;
check)
	now=$(mktemp)
	trap 'rm -f "$now"' EXIT
	snapshot >"$now"
	if ! diff -u --label before --label after "$2" "$now"; then
		echo "hoststate: the tests changed the host (lines: - was there before, + is there after)" >&2
		exit 1
	fi
	echo "hoststate: the host is as the tests found it"
	;;
*)
	echo "usage: $0 save|check FILE" >&2
	exit 2
	;;
esac

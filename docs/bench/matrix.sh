#!/bin/sh
# The host scenario on each device class this machine kind gives, each with
# a greedy and a moderate neighbour: the device matrix of the protection
# and its cost (README "Protection per device class"; the summary across
# classes in OUT/matrix.md). Needs root and a
# quiet machine; about 90 minutes. Each run's JSON goes to OUT (default
# docs/bench; its Markdown to stdout); OUT/matrix.md holds every report.
#
#   vda-loop    a loop device over a file on the machine's own disk (virtio,
#               mq-deadline, read_expire 500 ms): a stacked device whose
#               disk below is the whole contention
#   tmpfs-loop  a loop device over a file in tmpfs: a fast, CPU-bound device
#   vda         the machine's own disk, no loop device (--no-loop): the
#               files in /var/tmp, shared with the rest of the host; its
#               scheduler untouched, only the bench's own cgroups capped
#
# The vda-loop greedy cell also runs with BFQ as the loop device's scheduler
# (matrix.md#contention-host-vda-loop-bfq): its group weights beside the caps.
#
# Each run: idle, no QoS, ddiskqos, static caps (2 to 25 % for the greedy
# neighbour, 50 % for a moderate one) and caps written again every 10 ms
# (rearm-5 and rearm-10 for the greedy neighbour, rearm-50 for a moderate
# one: the throttle's own frontier, each write a new slice); beside a
# moderate neighbour also ddiskqos with work_conserving false
# (ddiskqos-capping), what work conservation saves. 2 trials, 20 s of
# victims.
#
# Usage: docs/bench/matrix.sh [OUT] [BIN]
set -eu
out=${1:-docs/bench}
bin=${2:-bin/ddiskqos}
# quiet waits (up to 10 minutes) for the 1-minute load average to fall
# below 0.8: the bench refuses to start above 1, and a run's own streamer
# leaves the load high for a few minutes after it.
quiet() {
	i=0
	while awk '{exit !($1 >= 0.8)}' /proc/loadavg && [ $i -lt 120 ]; do
		sleep 5
		i=$((i + 1))
	done
}
run() {
	class=$1 dir=$2 streamer=$3 configs=$4
	shift 4
	quiet
	"$bin" bench contention --scenario host --quick --trials 2 --victims 20s \
		--device-class "$class" --dir "$dir" --streamer "$streamer" --configs "$configs" --out "$out" "$@"
}
all=ddiskqos,static-2,static-5,static-10,static-25,rearm-5,rearm-10
moderate=ddiskqos,ddiskqos-capping,static-50,rearm-50
run vda-loop /var/tmp greedy "$all"
run vda-loop /var/tmp paced-50-qd1 "$moderate"
run vda-loop /var/tmp paced-200-qd4 "$moderate"
run tmpfs-loop /dev/shm greedy "$all"
run tmpfs-loop /dev/shm paced-200-qd4 "$moderate"
run vda-loop /var/tmp greedy "$all" --scheduler bfq
run vda /var/tmp greedy "$all" --no-loop
run vda /var/tmp paced-50-qd1 "$moderate" --no-loop
# The summary across classes, every report judged again by this binary.
"$bin" bench contention --summarize "$out" > "$out/matrix.md"

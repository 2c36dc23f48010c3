#!/bin/bash
# The Docker-sourced scale figure of docs/bench/scale.md: start FROM scratch
# sleeper containers (the static ddiskqos binary, imported) on the local
# engine until MAX containers, MAX_START seconds of starting, a failed start
# or less than MIN_AVAIL_MIB of available memory; then run the daemon on
# them (docker source, --dry-run: it writes nothing) and measure its CPU
# from /proc/PID/stat over WINDOW seconds, its RSS, its first full scan and
# /metrics. Every container and the image carry the label
# ddiskqos.scale-bench and are removed at the end, also on failure or
# Ctrl-C. Run as root from the repository root:
#
#	docs/bench/scale-docker.sh OUTDIR
#
# OUTDIR gets starts.tsv (n, seconds per start), daemon.log, result.json.
set -u
OUT=${1:?usage: scale-docker.sh OUTDIR}
MAX=${MAX:-1000}
MAX_START=${MAX_START:-720}
MIN_AVAIL_MIB=${MIN_AVAIL_MIB:-3072}
WINDOW=${WINDOW:-60}
LABEL=ddiskqos.scale-bench=$$
TAG=ddiskqos-scale-sleeper:$$
PORT=${PORT:-9393}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BIN=$OUT/bin
DPID=

cleanup() {
	[ -n "$DPID" ] && kill -TERM "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	local ids
	ids=$(docker ps -aq --filter "label=$LABEL")
	if [ -n "$ids" ]; then
		echo "removing $(echo "$ids" | wc -l) containers" >&2
		local t0=$SECONDS
		echo "$ids" | xargs -r -n 20 -P 4 docker rm -f >/dev/null
		echo "removed in $((SECONDS - t0)) s" >&2
	fi
	docker rmi -f "$TAG" >/dev/null 2>&1
	echo "left with label $LABEL: $(docker ps -aq --filter "label=$LABEL" | wc -l) containers, image: $(docker images -q "$TAG" | wc -l)" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$BIN"
CGO_ENABLED=0 go build -o "$BIN/ddiskqos" ./cmd/ddiskqos || exit 1
tar -C "$BIN" -c ddiskqos | docker import --change 'ENTRYPOINT ["/ddiskqos"]' --change "LABEL $LABEL" - "$TAG" >/dev/null || exit 1

avail() { awk '/MemAvailable/ {print int($2/1024)}' /proc/meminfo; }
before=$(docker ps -q | wc -l)
echo -e "n\tstart_s\tavail_mib" >"$OUT/starts.tsv"
t0=$(date +%s.%N)
n=0
why="reached MAX=$MAX"
while [ "$n" -lt "$MAX" ]; do
	el=$(echo "$(date +%s.%N) - $t0" | bc)
	if [ "$(echo "$el > $MAX_START" | bc)" = 1 ]; then why="MAX_START=${MAX_START}s of starting"; break; fi
	a=$(avail)
	if [ "$a" -lt "$MIN_AVAIL_MIB" ]; then why="MemAvailable $a MiB < $MIN_AVAIL_MIB"; break; fi
	s=$(date +%s.%N)
	# A sleeper: one 4 KiB read of its own binary, then the next one in
	# 4096 s (1 B/s); no network, no log driver.
	if ! err=$(docker run -d --label "$LABEL" --network none --log-driver none --name "ddq-scale-$$-$n" \
		"$TAG" workload --rate 1 --bs 4k --duration 2h read /ddiskqos 2>&1 >/dev/null); then
		why="start $((n + 1)) failed: $err"
		break
	fi
	n=$((n + 1))
	printf '%d\t%.3f\t%d\n' "$n" "$(echo "$(date +%s.%N) - $s" | bc)" "$a" >>"$OUT/starts.tsv"
done
start_s=$(printf '%.3f' "$(echo "$(date +%s.%N) - $t0" | bc)")
running=$(docker ps -q --filter "label=$LABEL" | wc -l)
echo "started $n containers in $start_s s ($running running; stopped: $why)" >&2

# The daemon, dry run, on every container of the engine.
"$BIN/ddiskqos" run --source docker --dry-run --listen "127.0.0.1:$PORT" --state-file "$OUT/state.json" \
	--log-level warn >"$OUT/daemon.log" 2>&1 &
DPID=$!
total=$((before + running))
d0=$(date +%s.%N)
scan=
for _ in $(seq 1 600); do
	got=$(curl -s "127.0.0.1:$PORT/v1/workloads" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["workloads"]))' 2>/dev/null)
	if [ "${got:-0}" -ge "$total" ]; then scan=$(printf '%.3f' "$(echo "$(date +%s.%N) - $d0" | bc)"); break; fi
	sleep 0.1
done
hz=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$DPID/stat"; }
sleep 5
c0=$(cpu)
sleep "$WINDOW"
c1=$(cpu)
rss=$(awk '/VmRSS/ {print $2}' "/proc/$DPID/status")
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$DPID/status")
mplain=$(curl -s -o /dev/null -w '%{time_total} %{size_download}' "127.0.0.1:$PORT/metrics")
mgzip=$(curl -s -o /dev/null -H 'Accept-Encoding: gzip' -w '%{time_total} %{size_download}' "127.0.0.1:$PORT/metrics")
tracked=$(curl -s "127.0.0.1:$PORT/v1/workloads" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["workloads"]))')
cat >"$OUT/result.json" <<EOF
{
  "containers_started": $n,
  "containers_running": $running,
  "containers_before": $before,
  "stopped_because": "$why",
  "start_seconds": $start_s,
  "daemon_workloads": $tracked,
  "daemon_first_full_scan_s": ${scan:-null},
  "daemon_cpu_ms_per_s": $(printf '%.3f' "$(echo "scale=3; ($c1 - $c0) * 1000 / $hz / $WINDOW" | bc)"),
  "daemon_window_s": $WINDOW,
  "daemon_rss_kib": $rss,
  "daemon_rss_peak_kib": $hwm,
  "metrics_plain": "$mplain",
  "metrics_gzip": "$mgzip"
}
EOF
cat "$OUT/result.json"

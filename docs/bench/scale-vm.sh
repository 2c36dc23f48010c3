#!/bin/bash
# `ddiskqos bench scale` on cgroup v2 and on cgroup v1 blkio, one after the
# other for each size, inside the same test VM (one boot, same kernel, same
# emulated CPU), so that v2 ÷ v1 cancels the emulation. Run from anywhere
# in the repository (the results go next to this script):
#
#   make bin/vmexec
#   nice -n 19 ionice -c3 docs/bench/scale-vm.sh 1000 5000 10000
#
# The runs, and the move of io from cgroup2 to a v1 blkio hierarchy and
# back, are TestRealV2ScaleVersusV1's (cmd/ddiskqos/bench_scale_test.go;
# `make test-v2` runs it at 1,000 with a 10 s window). This script runs
# that test at the given sizes with the bench's full window and writes each
# run's report as scale-vm-vV-N.json. DDISKQOS_SCALE_FLAGS replaces the
# bench flags.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
out=docs/bench
log=$(mktemp)
trap 'rm -f "$log"' EXIT
[ $# -gt 0 ] || { echo "usage: $0 N..." >&2; exit 2; }

DDISKQOS_SCALE_VM_SIZES="$*" \
	DDISKQOS_SCALE_FLAGS=${DDISKQOS_SCALE_FLAGS:-"--duration 30s --warmup 10s --io-fraction 0.001 --scratch /tmp"} \
	DDISKQOS_SCALE_VM_RESULTS=1 DDISKQOS_REQUIRE_REAL=1 CGO_ENABLED=0 \
	go test -count=1 -v -timeout 90m -exec "$PWD/bin/vmexec -mem 4G -timeout 91m" \
	-run '^TestRealV2ScaleVersusV1$' ./cmd/ddiskqos | tee "$log"
status=$?
# Each run's report is one line: "scale-vm-result NAME JSON".
grep '^scale-vm-result ' "$log" | while read -r _ name json; do
	printf '%s\n' "$json" >"$out/$name"
	echo "scale-vm: wrote $out/$name" >&2
done
exit $status

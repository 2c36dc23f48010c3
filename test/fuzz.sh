#!/usr/bin/env bash
# Runs every fuzz target of the module for a short while (FUZZTIME, default
# 5s each): a smoke run in CI on top of the seed corpora that plain `go test`
# already replays. A crasher is written under testdata/fuzz and fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
n=0
while IFS=: read -r file name; do
	pkg=./$(dirname "$file")
	echo "fuzz $pkg $name ($fuzztime)"
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/ddiskqos-fuzz.log 2>&1 || {
		cat /tmp/ddiskqos-fuzz.log
		exit 1
	}
	n=$((n + 1))
done < <(grep -rHoE --include='*_test.go' '^func (Fuzz[A-Za-z0-9_]+)' internal cmd | sed 's/func //' | sort)
echo "fuzzed $n targets"

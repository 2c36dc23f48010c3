#!/usr/bin/env bash
# failed.sh LOG: each failing test's block of a `go test` log (from its
# "--- FAIL:" line to the next line that is not indented), at most 40
# lines of 300 characters each, so that the reason stays readable where a
# CI log shows only its ends.
set -euo pipefail
log=${1:?usage: failed.sh LOG}
echo "== the failing tests, again (from $log) =="
awk '
	/^ *--- FAIL:/ { on = 1; n = 0; print ""; print substr($0, 1, 300); next }
	on && /^[ \t]/ { if (++n <= 40) print substr($0, 1, 300); else if (n == 41) print "    [... more in the log]"; next }
	{ on = 0 }
	/^(FAIL|panic:)/ { print substr($0, 1, 300) }
' "$log"

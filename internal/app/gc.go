package app

import (
	"runtime/debug"
	"strconv"
)

// DefaultGCPercent is the Go garbage collector's target (GOGC) the daemon
// runs with when the operator set none. Go's default, 100, lets the heap
// grow to twice what is live before a collection. The daemon's live heap
// is its per-workload state, and what a tick allocates is small beside it
// (under 1 MiB at 10,000 workloads, 28 MB live), so at 50 a collection
// comes about twice as often for a heap that peaks at 1.5 instead of 2
// times the live one. bench scale, 10,000 workloads, 10 % reading: heap
// goal 42-44 MB instead of 63-68 MB, RSS 59.5 instead of 68.9 MiB; a
// collection every ~12 ticks instead of every ~25, ~1.4 ms of CPU a tick
// instead of ~0.7 (gctrace). It is a ratio, not a limit: the daemon does
// not collect harder as its workloads grow, as a memory limit set near the
// live heap makes it (GOMEMLIMIT=40MiB tripled the CPU per tick,
// docs/bench/scale.md). GOGC=100 in the environment restores Go's default.
const DefaultGCPercent = 50

// SetGCPercent sets the collector's target to DefaultGCPercent unless the
// operator set GOGC (getenv("GOGC") not empty: the runtime applied it at
// start, and it is left alone). It returns the target in force, as GOGC
// says it, and whether it is the operator's.
func SetGCPercent(getenv func(string) string) (gogc string, operator bool) {
	if v := getenv("GOGC"); v != "" {
		return v, true
	}
	debug.SetGCPercent(DefaultGCPercent)
	return strconv.Itoa(DefaultGCPercent), false
}

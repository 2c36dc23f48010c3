// Package policy decides the disk-I/O priority level of every workload: the
// "calculation" stage of dDiskQoS, a four-level multi-level feedback queue.
//
// The package is pure. It reads no files, no clock and no network: the
// caller passes the time of each observation, the bytes a workload did since
// the previous observation, and its labels. Table tests drive it with a fake
// time; the daemon drives it with time.Now() once per tick.
//
// # The rules
//
// From the paper (Proposed Approach, Implementation, Table 1):
//
//   - A new workload starts at level 1, the highest priority.
//   - Each level has an I/O allowance (default 2, 8, 32, 128 MiB). The bytes
//     a workload does while at a level count against that level's allowance;
//     when the allowance is used up the workload drops one level.
//   - A workload that has sat at level 4 for BoostAfter goes back to level 1
//     with fresh counters, so that it is not starved for ever.
//   - Each level maps to a weight on Docker's blkio-weight scale, 10..1000
//     (default 1000, 500, 250, 100), which the actuator writes.
//
// # Semantics chosen where the paper is silent
//
// What counts: the bytes read plus written on all devices. The caller passes
// the increase since its previous call for the same workload as a uint64;
// the caller handles counter resets (a cgroup recreated, a counter that went
// backwards) and passes 0 or the new counter's value, whichever it decides.
// Sums saturate at the largest uint64 instead of wrapping.
//
// "Used up" means reached: with 2 MiB at level 1, a workload that has done
// exactly 2 MiB is at level 2, and one that has done exactly 2+8 = 10 MiB is
// at level 3.
//
// Several levels in one tick: bytes beyond the remaining allowance of a level
// spill into the next level's allowance, repeatedly, so one tick of 300 MiB
// takes a new workload from level 1 to level 4 with 258 MiB counted at level
// 4, and yields three transitions. The outcome is therefore independent of
// the tick interval: splitting the same bytes into more, smaller deltas ends
// at the same level with the same bytes counted.
//
// Level 4 is the floor. Its allowance never moves a workload: bytes done at
// level 4 keep counting (for the view and the logs) past the allowance, and
// the allowance is reported as the scale of that count. Leaving level 4 is
// by time alone (the boost), as the paper says "after some time".
//
// The boost clock starts when a workload enters level 4 (several levels in
// one tick enter at the time of that tick), not when it was first seen. The
// bytes of the tick that is being observed are charged before the boost is
// checked, because they were done while the workload was still at level 4;
// the next tick's bytes count against level 1.
//
// Time: an observation whose time is before the time the workload entered
// its level (a clock stepped back, or a restored state written by a clock
// that was ahead) moves the entry time to now. The boost is thus delayed by
// at most BoostAfter, never indefinitely. Restored state without an entry
// time is given the time of its first observation.
//
// # Labels
//
// ddiskqos.level=N (exactly "1", "2", "3" or "4") pins a workload at level
// N: it stays there whatever it does and is never boosted; its bytes keep
// counting for the view. Changing N moves it (reason pinned). Removing the
// label hands the workload back to the policy at level 1 with fresh counters
// (reason unpinned): the history from before or during the pin says nothing
// about what the workload will do next, and level 1 is where the paper lets
// every workload in.
//
// ddiskqos.exempt=true (any value strconv.ParseBool accepts) takes the
// workload out of the policy: its level is LevelNone and the actuator must
// not touch it, and must restore what it changed. Exempt wins over a level
// label, which is then reported as a conflict. Removing the exemption starts
// the workload afresh at level 1 (reason unexempt), or at its pinned level.
//
// A label with a bad value (including an empty one, as a bare
// "--label ddiskqos.exempt" gives) is not applied: the workload is treated as
// if the label were absent, and the decision carries a *LabelError in
// LabelErr. LabelErrNew is true only on the observation where that error
// first appears, so the daemon can log it once rather than every tick.
// Labels are parsed again only when their values change.
//
// Order within one observation: the delta is charged under the state the
// workload was in during the interval (so bytes done while pinned do not
// drop it after an unpin), then the labels as they are now are applied, then
// the boost is checked.
//
// Transitions: every level change yields a Transition. A workload's first
// observation yields one too (reason new, pinned or exempt, From LevelNone),
// as do pin, unpin, exempt and unexempt even when the level number stays the
// same, so that the log says why the policy stopped or started moving a
// workload. One observation yields at most four transitions.
//
// Reconfigure (SIGHUP): levels, pins and exemptions are kept. Bytes counted
// at levels 1-3 are clamped to the new allowance of their level; a workload
// whose allowance shrank below what it already did therefore drops at its
// next observation (reason allowance-used). A shorter BoostAfter boosts the
// workloads already past it at their next observation. Weights apply to the
// next decision of every workload.
//
// # Cost
//
// An Engine keeps one small record per workload in a map keyed by its id.
// In the steady state Observe does not allocate; BenchmarkObserve10k
// measures a tick of 10,000 workloads. An Engine is owned by one goroutine
// (the daemon loop); others read the snapshot AppendViews builds.
package policy

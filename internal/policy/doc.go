// Package policy decides the disk-I/O priority level of every workload: the
// "calculation" stage of dDiskQoS, a four-level multi-level feedback queue.
//
// The package is pure. It reads no files, no clock and no network: the
// caller passes the time of each observation, the bytes a workload did since
// the previous observation, and its labels. Table tests drive it with a fake
// time; the daemon drives it with time.Now() once per tick.
//
// # Two rules: recent (the daemon's default) and paper
//
// Config.Mode chooses how usage is counted. ModePaper is dDiskQoS as
// published, described in the next sections; bench paper uses it. ModeRecent
// (config "policy: recent", the daemon's default) keeps the four levels,
// their allowances and weights, and counts recent usage instead of all
// time, because on a real host the paper's cumulative count demotes every
// long-lived service: at 400 KB/s a web service reaches level 4 in about
// 7 minutes and is from then on treated like a streamer. The
// paper itself asks for thresholds that move with the load.
//
// The recent rule, per workload:
//
//   - usage u is bytes decayed exponentially with the time constant Window
//     (default 10 s): at each observation u ← u·exp(−Δt/Window) + delta.
//     A steady rate r settles at u = r·Window.
//   - the thresholds are the allowances summed: T1 = 2 MiB, T2 = 10 MiB,
//     T3 = 42 MiB by default. The workload drops a level each time u
//     reaches the threshold of its level (reason allowance-used) and rises
//     one level each time u falls below half of the threshold of the
//     level above (reason usage-decayed). The half is hysteresis: a rate
//     near a threshold does not flap.
//   - u is capped at all four allowances summed (170 MiB), so a workload
//     that stops is back at level 1 within about 5 Windows.
//   - there is no boost. A stream held at level 4 stays there while it does
//     more than T3/2 per Window (2.1 MiB/s by default) — it never sits at
//     level 1 uncapped for a tick — and a workload really starved there (its
//     rate pressed below that) rises on its own, one level at a time.
//
// With the defaults a steady reader below ~210 KB/s stays at level 1, below
// ~1 MB/s at level 2 or better, below ~4.4 MB/s at level 3 or better, and
// anything faster is level 4; a new workload's first burst goes down through
// the same bytes as under the paper's rule (no time passes to decay it).
// Labels, exemptions, pins and the Transition rules below hold for both;
// under ModeRecent a workload's BytesInLevel is u minus the threshold below
// its level, and View.Usage is u. Reconfigure from paper to recent turns
// each workload's count into its usage (its level is kept until it decays);
// a state file written by a paper run is read the same way.
//
// # The paper's rule
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

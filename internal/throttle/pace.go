package throttle

import (
	"errors"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Pacing. blk-throttle lets a backlogged group through a whole slice's
// worth of its cap at the start of each slice (100 ms on this kernel for
// every device: throttleSlice), and a better level's request that arrives
// then waits behind all of it. Writing a limit file restarts the group's
// slices, even with the same value, and carries its debt over: a cap
// re-armed every Period (10 ms) lets cap × Period through per write at the
// same long-run rate. Measured by hand on a loop device (a QD32
// 1 MiB reader, 4 KiB victim at 100/s, idle p99 0.54 ms): 5 % static gave
// the victim p99 3.0 ms, 5 % re-armed every 10 ms 1.0 ms; 10 % re-armed
// 4.8 ms, 50 % re-armed 455 ms (the cap stopped limiting: the group's
// queue drained between writes and the kernel dropped its debt). So the
// cap's size stays bounded by MaxBurst / slice (5 %) and the re-arm makes
// its burst ten times shorter; it is not a licence for a larger cap.
//
// A re-arm only paces a group that its cap holds back, its requests
// queued in blk-throttle: the kernel carries a queued group's debt over a
// restarted slice, and drops it when nothing is queued, granting a fresh
// slice's worth (rounded up to the whole slice on 6.1). A group whose
// requests wait at the device instead — after a lift let its queue go, it
// resubmits as they complete — takes a new slice's worth after every
// write: in the cgroup-v2 VM (6.1), a streamer capped at 8 MiB/s that had
// been uncapped for one 10 ms period moved 21–36 MiB/s under its re-armed
// cap for the rest of the run, its requests in the device's queue in front
// of the victim's (p99 161 ms against 28 ms). So a workload moving more
// than overCapFrac of its cap is not re-armed: the slice runs, the group's
// requests queue in blk-throttle again, and the re-arm resumes once it
// moves at its cap.
//
// A re-arm must also leave a request cap its requests. The kernel counts
// what a restarted slice owes in whole requests: calculate_io_allowed()
// truncates iops × elapsed jiffies / HZ, so every write drops the fraction
// of a request the time since the last one allowed. On 6.1 (the v2 VM)
// the group's debt grows by every request it issued and its credit by
// nothing, until the cap stops it: in TestRealV2BurstHold a writer capped
// at 50 IOPS, re-armed every 10 ms, did 14 IOPS, and 4.5 under the burst
// hold's 20; the disk never ran out of credit. 6.16+ forgives the debt
// instead when the allowance truncates to 0, and the cap does not limit
// requests at all. So a cap with a request limit is re-armed only once
// rearmMinIOs of its requests have been allowed since its last write
// (rearmDue): every 40 ms at 50 IOPS, every period from 200 IOPS; a write
// then drops less than one of the two or more requests allowed, about a
// sixth of the cap on average.
//
// That stretches the re-arm of a streamer's bytes cap too, and with it
// the burst each write lets through: its request cap comes from a
// capacity measured with its own 1 MiB requests (81–132 IOPS on the
// host's loop device: a re-arm every 20 ms). Where the kernel forgives
// the debt (Config.DebtForgiven, 6.16+) a workload that runs at its
// bytes cap is re-armed every period all the same: its bytes cap is what
// holds it, a request debt dropped costs nothing, and one carried costs
// it a fraction of a request per write. On 6.1 the debt carried would
// starve it, and the request rule holds for everyone.
//
// applyCaps re-arms each active workload's cap in force every period it
// does not change it (a change is a write that restarts the slice too).
// The writes count in the period's read budget (Config.Reads), so many
// capped workloads lengthen the period instead of multiplying the cost.

// rearm writes m's limits in force again, unchanged (see Config): no
// read-back, the values are those verified when they were set. A failed
// write leaves m.err set, so the next period writes and verifies the
// limits in full.
func (t *Throttle) rearm(m *tmember, now time.Time) {
	err := t.h.RearmLimits(m.cgroup, t.dev, m.limits)
	if err == nil {
		t.rearms++
		m.wrote = now
		return
	}
	if errors.Is(err, cgroupfs.ErrCgroupGone) {
		t.log.Debug("throttle: cap not re-armed, the cgroup is gone", "device", t.name, "cgroup", m.cgroup)
		t.dropLocked(m)
		return
	}
	// Debug: the full write of the next period warns if the knob is
	// really broken; a warning here would repeat every period.
	t.log.Debug("throttle: cap not re-armed", "device", t.name, "cgroup", m.cgroup, "err", err)
	m.err = err
}

// overCapFrac: a capped workload whose smoothed rate exceeds this multiple
// of its bytes cap is not re-armed (see above). One 1 MiB request
// completing under an 8 MiB/s cap lifts the rate smoothed over 100 ms to
// ~1.2× the cap for a moment; a cap that leaks runs 2.5–4.5×.
const overCapFrac = 1.5

// overCap reports whether a workload moving rate bytes/s runs above its
// limits l by more than overCapFrac (never when l caps no bytes).
func overCap(rate float64, l cgroupfs.Limits) bool {
	return l.RBps > 0 && rate > overCapFrac*float64(l.RBps)
}

// rearmMinIOs: a cap that limits requests is re-armed only after it has
// allowed this many since its last write (see above).
const rearmMinIOs = 2

// rearmDue reports whether limits l, last written since ago, may be
// re-armed: always when l limits no requests or bytesBound (its workload
// runs at its bytes cap on a kernel that forgives request debt), else
// once the smaller of its request limits allowed rearmMinIOs over since.
func rearmDue(l cgroupfs.Limits, since time.Duration, bytesBound bool) bool {
	if bytesBound {
		return true
	}
	io := l.RIOps
	if io == 0 || (l.WIOps != 0 && l.WIOps < io) {
		io = l.WIOps
	}
	return io == 0 || float64(io)*since.Seconds() >= rearmMinIOs
}

// Raising a cap. A write restarts the group's slice with its debt carried
// at the old cap and the allowance at the new one, so raising a
// backlogged group's cap by d lets about d × slice through at once
// (kernel-io-control.md §1a): the slow start's doubling from 68 to
// 136 MiB/s on a 500 MiB/s loop device let ~7 MiB go at the moment of the
// write, and the victim's read then took 18 ms against 0.3 ms (one at
// every doubling and at every return from a probe, measured in
// TestRealV1LatencyEffect); lifting a cap lets go the whole queue the
// throttle held. So the throttle raises a cap in force by at most
// rampFrac of the device's capacity a write (each write's extra burst is
// then rampFrac × slice of the device's time: 2 ms), split among the
// workloads it raises, and lifts one by raising it until the lifted caps
// together reach the capacity, where removing them lets nothing queued
// go; from 30 % to 60 % takes 15 periods (150 ms), from 60 % to lifted
// 20. A new cap or a lower one is written at once: that is the protection.
const rampFrac = 0.02

// rampStep is the most one write raises a cap in force: rampFrac of the
// capacity (bps, iops) split among n raised caps; the zero Limits where
// the capacity is not known (no ramp).
func rampStep(bps, iops float64, n int) cgroupfs.Limits {
	if bps <= 0 || n <= 0 {
		return cgroupfs.Limits{}
	}
	b := uint64(rampFrac * bps / float64(n))
	io := uint64(rampFrac * iops / float64(n))
	return cgroupfs.Limits{RBps: b, WBps: b, RIOps: io, WIOps: io}
}

// One file a write on v1. Each v1 limit file is a write of its own, and
// every write carries the group's debt over to a restarted slice —
// computed over the jiffies since the slice started, and only where that
// allowance is positive (6.16+, __tg_update_carryover): a second write in
// the same jiffy, as the four files of one change are written, finds none
// elapsed and sets the debt to nothing, so the group gets a whole slice
// of the new cap at once. Measured in TestRealV1LatencyEffect (6.18, HZ
// 250) before this rule: every raise of the ramp let cap × slice through
// within 10 ms (7–15 MB: 600–1,300 MiB/s moved under caps of 75–150), the
// victim's reads then 10–60 ms against 0.7 idle, its p99 6–9 ms (8–12×
// idle) where a re-arm (one file) moved the cap's rate. So on v1 a cap
// in force changes one file a period, the reads' first (RBps, RIOps,
// WBps, WIOps): the debt is kept and a raise lets d × slice through as
// meant. A new cap (no debt to keep) and a lift are written at once; on
// v2 io.max is one write.
func oneFile(cur, want cgroupfs.Limits) cgroupfs.Limits {
	if cur.IsZero() || want.IsZero() {
		return want
	}
	out := cur
	switch {
	case want.RBps != cur.RBps:
		out.RBps = want.RBps
	case want.RIOps != cur.RIOps:
		out.RIOps = want.RIOps
	case want.WBps != cur.WBps:
		out.WBps = want.WBps
	default:
		out.WIOps = want.WIOps
	}
	return out
}

// raising reports whether want raises or lifts a field of the cap in
// force cur (both set, want higher; or cur set and want unlimited).
func raising(cur, want cgroupfs.Limits) bool {
	up := func(c, w uint64) bool { return c > 0 && (w == 0 || w > c) }
	return up(cur.RBps, want.RBps) || up(cur.WBps, want.WBps) || up(cur.RIOps, want.RIOps) || up(cur.WIOps, want.WIOps)
}

// ramp is what to write towards want from the cap in force cur: each
// field raised by at most step's (a field lifted is raised by it until
// lifted is true: the lifted caps reach the capacity); a field that is
// new, lowered, or without a step is want's at once.
func ramp(cur, want, step cgroupfs.Limits, lifted bool) cgroupfs.Limits {
	f := func(c, w, s uint64) uint64 {
		switch {
		case c == 0 || s == 0:
			return w
		case w == 0:
			if lifted {
				return 0
			}
			return c + s
		case w > c:
			return min(w, c+s)
		}
		return w
	}
	return cgroupfs.Limits{RBps: f(cur.RBps, want.RBps, step.RBps), WBps: f(cur.WBps, want.WBps, step.WBps),
		RIOps: f(cur.RIOps, want.RIOps, step.RIOps), WIOps: f(cur.WIOps, want.WIOps, step.WIOps)}
}

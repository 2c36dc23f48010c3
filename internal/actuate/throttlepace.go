package actuate

import (
	"errors"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Pacing. blk-throttle lets a backlogged group through a whole slice's
// worth of its cap at the start of each slice (100 ms on this kernel for
// every device: throttleSlice), and a better level's request that arrives
// then waits behind all of it. Writing a limit file restarts the group's
// slices, even with the same value, and carries its debt over: a cap
// re-armed every Period (10 ms) lets cap × Period through per write at the
// same long-run rate. Measured by hand on a loop device (issue 20, QD32
// 1 MiB reader, 4 KiB victim at 100/s, idle p99 0.54 ms): 5 % static gave
// the victim p99 3.0 ms, 5 % re-armed every 10 ms 1.0 ms; 10 % re-armed
// 4.8 ms, 50 % re-armed 455 ms (the cap stopped limiting: the group's
// queue drained between writes and the kernel dropped its debt). So the
// cap's size stays bounded by MaxBurst / slice (5 %) and the re-arm makes
// its burst ten times shorter; it is not a licence for a larger cap.
//
// applyCaps re-arms each active workload's cap in force every period it
// does not change it (a change is a write that restarts the slice too).
// The writes count in the period's read budget (Throttle.Reads), so many
// capped workloads lengthen the period instead of multiplying the cost.

// rearm writes m's limits in force again, unchanged (see Throttle): no
// read-back, the values are those verified when they were set. A failed
// write leaves m.err set, so the next period writes and verifies the
// limits in full.
func (t *throttle) rearm(m *tmember) {
	err := t.h.RearmLimits(m.cgroup, t.dev, m.limits)
	if err == nil {
		t.rearms++
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

package mech

import (
	"fmt"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// IOCostWeight is cgroup v2 io.weight with iocost enabled for the device
// (io.cost.qos enable=1): honoured under any scheduler. The host prefers
// it where it is on.
const IOCostWeight Name = "iocost-weight"

var iocost = Mech{Name: IOCostWeight, Knob: "iocost", Role: Weight,
	Files: func(v int) []string { return nonEmpty(iocostFile(v)) },
	Open: func(h cgroupfs.Hierarchy, dev cgroupfs.Dev, _ Params) (Knob, error) {
		return openWeight(h, dev, IOCostWeight, iocostFile(h.Version), "default", iocostScale)
	},
	Probe: probeIOCost,
	Needs: &Needs{V1: Need{Absent: "iocost exists only on cgroup v2; this host controls I/O through v1 blkio"},
		V2: Need{File: "io.cost.qos", RootOnly: true, Absent: "kernel built without CONFIG_BLK_CGROUP_IOCOST"}},
	Range:       WeightRange{Min: 1, Max: 10000, Default: 100},
	Scale:       iocostScale,
	WeightFiles: func(v int) (string, string) { return iocostFile(v), iocostFile(v) },
}

// probeIOCost: v2 with io.cost.qos enable=1 for the device. Off, it is a
// command away where the kernel has iocost (its fix).
func probeIOCost(e Env) Verdict {
	o := e.Offered[IOCostWeight]
	switch {
	case e.H.Version != 2:
		return Verdict{Rank: RankOff, Verified: o.How, Reason: "iocost needs cgroup v2 as the I/O hierarchy",
			Note: "iocost would need cgroup v2 as the I/O hierarchy"}
	case !e.IOCostOn && !o.Present:
		return Verdict{Rank: RankOff, Verified: o.How, Reason: fmt.Sprintf("the kernel has no iocost (%s)", o.How)}
	case !e.IOCostOn:
		return Verdict{Rank: RankOff, Verified: o.How,
			Reason: fmt.Sprintf("iocost is not enabled for %s (io.cost.qos)", e.Dev),
			Fix:    fmt.Sprintf("echo '%s enable=1' > %s/io.cost.qos", e.Dev, e.H.Mount), FixAs: "enable iocost"}
	}
	return Verdict{OK: true, Verified: o.How,
		Reason: fmt.Sprintf("iocost is enabled for %s (io.cost.qos enable=1): io.weight is honoured under any scheduler (active: %s); preferred over bfq: work-conserving, cheap per request, models the device's cost", e.Dev, orNone(e.Scheduler))}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func iocostFile(v int) string {
	if v == 2 {
		return "io.weight"
	}
	return ""
}

// iocostScale: io.weight is 1..10000 with a default of 100; a weight is
// divided by 10, so 1000 (level 1) is the default a new cgroup already has
// before the daemon has seen it, and every level keeps its ratio to the
// others (500 → 50, 250 → 25, 100 → 10, 10 → 1). runc's mapping of Docker's
// blkio-weight (1 + (w-10)*9999/990, 100 → 910) would put a demoted stream
// at nine times a new container's weight until the first tick.
func iocostScale(w cgroupfs.Weight) uint64 { return max(1, (uint64(w)+5)/10) }

package mech

import "github.com/ddiskqos/ddiskqos/internal/cgroupfs"

// IOCostWeight is cgroup v2 io.weight with iocost enabled for the device
// (io.cost.qos enable=1): honoured under any scheduler. The host prefers
// it where it is on.
const IOCostWeight Name = "iocost-weight"

var iocost = Mech{Name: IOCostWeight, Knob: "iocost", Role: Weight,
	Files: func(v int) []string { return nonEmpty(iocostFile(v)) },
	Open: func(h cgroupfs.Hierarchy, dev cgroupfs.Dev, _ Params) (Knob, error) {
		return openWeight(h, dev, IOCostWeight, iocostFile(h.Version), "default", iocostScale)
	},
}

func iocostFile(v int) string {
	if v == 2 {
		return "io.weight"
	}
	return ""
}

// iocostScale: io.weight is 1..10000 with a default of 100; a weight is
// divided by 10 (see cgroupfs.NativeWeight, whose formula the weight
// helpers of cgroupfs share).
func iocostScale(w cgroupfs.Weight) uint64 { return cgroupfs.NativeWeight(cgroupfs.WeightIOCost, w) }

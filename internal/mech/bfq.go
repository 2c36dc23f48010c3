package mech

import (
	"fmt"
	"slices"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// BFQWeight is the bfq scheduler's group weight, 1..1000 (10..1000 used as
// it is): v1 blkio.bfq.weight_device, v2 io.bfq.weight. The host chooses
// it where the device's scheduler is bfq and the kernel offers the file
// (CONFIG_BFQ_GROUP_IOSCHED).
const BFQWeight Name = "bfq-weight"

var bfq = Mech{Name: BFQWeight, Knob: "bfq", Role: Weight,
	Files: func(v int) []string { return []string{bfqFile(v)} },
	Open: func(h cgroupfs.Hierarchy, dev cgroupfs.Dev, _ Params) (Knob, error) {
		return openWeight(h, dev, BFQWeight, bfqFile(h.Version), "default", sameScale)
	},
	Probe: probeBFQ,
	// The weight files are in child cgroups only (CFTYPE_NOT_ON_ROOT);
	// BFQ's statistics at the root show its policy registered.
	Needs: &Needs{V1: Need{File: "blkio.bfq.weight", Markers: []string{"blkio.bfq.io_service_bytes", "blkio.bfq.io_serviced"}},
		V2: Need{File: "io.bfq.weight"}},
	Range:       WeightRange{Min: 1, Max: 1000, Default: 100},
	Scale:       sameScale,
	WeightFiles: bfqWeightFiles,
}

// probeBFQ: the device's scheduler is bfq and the kernel offers its weight
// file (or nothing could tell). Under another scheduler the fix is to
// switch to bfq (loading it first when the device does not list it) —
// except on the legacy block layer (cfq listed), which has no bfq, and on
// a kernel built without bfq (Env.NoBFQ), which has nothing to load.
func probeBFQ(e Env) Verdict {
	o := e.Offered[BFQWeight]
	file, devFile := bfqWeightFiles(e.H.Version)
	if e.Scheduler != "bfq" {
		v := schedulerRefusal(e)
		if e.Scheduler != "" && len(e.Slaves) == 0 {
			switch {
			case slices.Contains(e.Schedulers, "bfq"):
				v.Fix = fmt.Sprintf("echo bfq > %s", schedulerPath(e))
			case e.NoBFQ:
				v.Reason += "; this kernel is built without bfq (CONFIG_IOSCHED_BFQ is not set), so no group weight works on its v1 devices or without iocost"
			case !slices.Contains(e.Schedulers, "cfq"):
				v.Fix = fmt.Sprintf("modprobe bfq && echo bfq > %s", schedulerPath(e))
			}
		}
		return v
	}
	if !o.usable() {
		return Verdict{Rank: RankSpecific, Verified: o.How,
			Reason: fmt.Sprintf("scheduler is bfq but %s is not offered (%s; kernel built without CONFIG_BFQ_GROUP_IOSCHED?)", file, o.How)}
	}
	v := Verdict{OK: true, Verified: o.How,
		Reason: fmt.Sprintf("scheduler is bfq: %s sets each cgroup's share of %s", devFile, e.Name)}
	if !o.Known {
		v.Reason += " (" + o.How + ")"
	}
	return v
}

func bfqFile(v int) string {
	if v == 1 {
		return "blkio.bfq.weight_device"
	}
	return "io.bfq.weight"
}

func bfqWeightFiles(v int) (file, devFile string) {
	if v == 1 {
		return "blkio.bfq.weight", "blkio.bfq.weight_device"
	}
	return "io.bfq.weight", "io.bfq.weight"
}

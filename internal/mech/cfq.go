package mech

import (
	"fmt"
	"slices"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// CFQWeight is the cfq scheduler's weight, 10..1000 (kernels before 5.0):
// v1 blkio.weight_device. "MAJ:MIN 0" removes a device's entry. On v2 the
// same idea is io.weight, which iocost has taken over (iocost.go).
const CFQWeight Name = "cfq-weight"

var cfq = Mech{Name: CFQWeight, Knob: "cfq", Role: Weight,
	Files: func(v int) []string { return nonEmpty(cfqFile(v)) },
	Open: func(h cgroupfs.Hierarchy, dev cgroupfs.Dev, _ Params) (Knob, error) {
		return openWeight(h, dev, CFQWeight, cfqFile(h.Version), "0", sameScale)
	},
	Probe: probeCFQ,
	// cfq (kernels < 5.0, before iocost existed) also offered io.weight
	// on v2.
	Needs: &Needs{V1: Need{File: "blkio.weight", Markers: []string{"blkio.leaf_weight", "blkio.time", "blkio.sectors"}},
		V2: Need{File: "io.weight"}},
	Range:       WeightRange{Min: 10, Max: 1000, Default: 500},
	Scale:       sameScale,
	WeightFiles: cfqWeightFiles,
}

// probeCFQ: the device's scheduler is cfq and the kernel offers its weight
// file (or nothing could tell). Its fix: switch to cfq where the device
// lists it.
func probeCFQ(e Env) Verdict {
	o := e.Offered[CFQWeight]
	file, devFile := cfqWeightFiles(e.H.Version)
	if e.Scheduler != "cfq" {
		v := schedulerRefusal(e)
		if e.Scheduler != "" && len(e.Slaves) == 0 && slices.Contains(e.Schedulers, "cfq") {
			v.Fix = fmt.Sprintf("echo cfq > %s", schedulerPath(e))
		}
		return v
	}
	if !o.usable() {
		return Verdict{Rank: RankSpecific, Verified: o.How,
			Reason: fmt.Sprintf("scheduler is cfq but %s is not offered (%s; kernel built without CONFIG_CFQ_GROUP_IOSCHED?)", file, o.How)}
	}
	return Verdict{OK: true, Verified: o.How,
		Reason: fmt.Sprintf("scheduler is cfq: %s sets each cgroup's share of %s", devFile, e.Name)}
}

func cfqFile(v int) string {
	if v == 1 {
		return "blkio.weight_device"
	}
	return ""
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func cfqWeightFiles(v int) (file, devFile string) {
	if v == 1 {
		return "blkio.weight", "blkio.weight_device"
	}
	return "io.weight", "io.weight"
}

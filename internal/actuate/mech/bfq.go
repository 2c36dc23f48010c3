package mech

import "github.com/ddiskqos/ddiskqos/internal/cgroupfs"

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
}

func bfqFile(v int) string {
	if v == 1 {
		return "blkio.bfq.weight_device"
	}
	return "io.bfq.weight"
}

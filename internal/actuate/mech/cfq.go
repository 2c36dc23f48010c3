package mech

import "github.com/ddiskqos/ddiskqos/internal/cgroupfs"

// CFQWeight is the cfq scheduler's weight, 10..1000 (kernels before 5.0):
// v1 blkio.weight_device. "MAJ:MIN 0" removes a device's entry. On v2 the
// same idea is io.weight, which iocost has taken over (iocost.go).
const CFQWeight Name = "cfq-weight"

var cfq = Mech{Name: CFQWeight, Knob: "cfq", Role: Weight,
	Files: func(v int) []string { return nonEmpty(cfqFile(v)) },
	Open: func(h cgroupfs.Hierarchy, dev cgroupfs.Dev, _ Params) (Knob, error) {
		return openWeight(h, dev, CFQWeight, cfqFile(h.Version), "0", sameScale)
	},
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

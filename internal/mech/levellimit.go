package mech

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// LevelLimit is a static cap per level through blk-throttle: a workload of
// level N may read and write at most level_limits[N-1] bytes per second
// each on the device, whatever its neighbours do (0: no cap). Not work-
// conserving, unlike the throttle: an operator's hard bound for the worse
// levels (a volume's burst budget kept for level 1), beside the device's
// weight. It writes the throttle's files (v1 blkio.throttle.{read,write}_
// bps_device, v2 io.max), so it runs only where the throttle does not.
const LevelLimit Name = "level-limit"

var levelLimit = Mech{Name: LevelLimit, Knob: "level-limit", Role: Target,
	Files: func(v int) []string { return throttle.Files(v) },
	Open: func(h cgroupfs.Hierarchy, dev cgroupfs.Dev, p Params) (Knob, error) {
		return &levelLimitKnob{LimitsKnob: LimitsKnob{H: h, Dev: dev}, caps: p.LevelLimits}, nil
	},
	Probe: probeLevelLimit,
	Beside: func(_ Name, p Params) bool {
		return slices.ContainsFunc(p.LevelLimits, func(c uint64) bool { return c > 0 })
	},
}

// probeLevelLimit: the kernel offers the throttle's files (v1: the root's
// read_bps_device; v2: io.max in a first-level cgroup, as the root has
// none), and the throttle itself does not run on the device.
func probeLevelLimit(e Env) Verdict {
	if slices.Contains(e.Mechs, Throttle) {
		return Verdict{Reason: fmt.Sprintf("the throttle runs on %s and owns its limits: static caps would overwrite its caps", e.Name)}
	}
	if !e.Offered[Throttle].Present {
		pattern := filepath.Join(e.H.Mount, "blkio.throttle.read_bps_device")
		if e.H.Version == 2 {
			pattern = filepath.Join(e.H.Mount, "*", "io.max")
		}
		return Verdict{Reason: fmt.Sprintf("no %s: kernel built without CONFIG_BLK_DEV_THROTTLING, or io not in the root's cgroup.subtree_control", pattern)}
	}
	return Verdict{OK: true, Reason: "the throttle's files are offered and the throttle does not run on " + e.Name}
}

// levelLimitKnob is the limits of one device (LimitsKnob's value) with the
// cap of each level.
type levelLimitKnob struct {
	LimitsKnob
	caps []uint64 // bytes/s by level-1; 0 or missing: none
}

func (k *levelLimitKnob) Want(level int, _ cgroupfs.Weight) string {
	if level < 1 || level > len(k.caps) || k.caps[level-1] == 0 {
		return ""
	}
	c := k.caps[level-1]
	return LimitsValue(cgroupfs.Limits{RBps: c, WBps: c})
}

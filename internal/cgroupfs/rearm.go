package cgroupfs

import (
	"fmt"
	"strconv"
)

// RearmLimits writes limits l of cgroup rel on dev again, unconditionally
// and without reading them back: one write(2) of one file, the first of
// v1's read_bps, write_bps, read_iops, write_iops files whose limit is
// set, or v2's io.max line. It is for limits already in force (SetLimits
// wrote them and they were read back); the zero Limits is refused, since
// rewriting "no limit" arms nothing.
//
// Why write a value that is already there: blk-throttle restarts both
// directions' slices on every write of a limit file, even of the same
// value (tg_set_conf / tg_set_limit → tg_conf_updated →
// throtl_start_new_slice), carrying the group's debt over
// (tg_update_carryover). A backlogged group rewritten every Δ shorter than
// the slice is released rate × Δ per write instead of rate × slice at
// each slice's start, at the same long-run rate: the burst a better
// level's request can land behind shrinks with Δ.
func (h Hierarchy) RearmLimits(rel string, dev Dev, l Limits) error {
	if l.IsZero() {
		return fmt.Errorf("rearm limits of %s on %s: no limit set", rel, dev)
	}
	if h.Version == 2 {
		return h.SetLimits(rel, dev, l) // one line, written unconditionally
	}
	vals := [4]uint64{l.RBps, l.WBps, l.RIOps, l.WIOps}
	for i, file := range v1LimitFiles {
		if vals[i] == 0 {
			continue
		}
		path, err := h.knobPath(rel, file)
		if err != nil {
			return err
		}
		return writeKnob(path, dev.String()+" "+strconv.FormatUint(vals[i], 10))
	}
	return nil
}

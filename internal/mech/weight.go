package mech

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// weightKnob is the per-device entry of a weight file, shared by the
// weight mechanisms (bfq.go, iocost.go, cfq.go), which each give its file
// and scale:
//
//	default 100
//	7:0 300
//
// Its value is the native weight ("300"), "" when the cgroup has no entry
// for the device (its default weight applies).
type weightKnob struct {
	h      cgroupfs.Hierarchy
	dev    cgroupfs.Dev
	file   string
	reset  string                         // what removes the entry: "default" or "0"
	native func(w cgroupfs.Weight) uint64 // 10..1000 to the file's scale
}

// openWeight returns the weight knob of file (""): the mechanism has no
// file on this hierarchy version, why says so.
func openWeight(h cgroupfs.Hierarchy, dev cgroupfs.Dev, name Name, file, reset string, native func(cgroupfs.Weight) uint64) (Knob, error) {
	if file == "" {
		return nil, fmt.Errorf("%s has no weight file on cgroup v%d", name, h.Version)
	}
	return &weightKnob{h: h, dev: dev, file: file, reset: reset, native: native}, nil
}

func (k *weightKnob) Want(_ int, w cgroupfs.Weight) string {
	return strconv.FormatUint(k.native(w), 10)
}

func (k *weightKnob) Read(cgroup string) (string, error) {
	b, err := k.h.ReadKnob(cgroup, k.file)
	if err != nil {
		return "", err
	}
	ws, err := cgroupfs.ParseWeights(b, k.file)
	if err != nil {
		return "", fmt.Errorf("%s of %s: %w", k.file, cgroup, err)
	}
	n, had := ws.Device(k.dev)
	if !had {
		return "", nil
	}
	return strconv.FormatUint(n, 10), nil
}

func (k *weightKnob) Write(cgroup, v string) error {
	if v == "" {
		return k.h.WriteKnob(cgroup, k.file, k.dev.String()+" "+k.reset)
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return fmt.Errorf("%s of %s: weight %q is not a number", k.file, cgroup, v)
	}
	return k.h.WriteKnob(cgroup, k.file, k.dev.String()+" "+strconv.FormatUint(n, 10))
}

// sameScale is BFQ's and CFQ's scale: 10..1000 as it is.
func sameScale(w cgroupfs.Weight) uint64 { return uint64(w) }

// schedulerRefusal is why a scheduler's weight (bfq.go, cfq.go) does not
// work on a device whose active scheduler is not its own: what the device
// is (stacked, bio-based) or which scheduler ignores weights.
func schedulerRefusal(e Env) Verdict {
	v := Verdict{Rank: RankDevice}
	switch {
	case len(e.Slaves) > 0:
		v.Reason = fmt.Sprintf("%s is a stacked %s device with no scheduler of its own: weights work on the disks under it (%s), not here", e.Name, e.Kind, strings.Join(e.Slaves, ", "))
	case e.Scheduler == "":
		v.Reason = fmt.Sprintf("%s has no I/O scheduler (bio-based): weights are ignored", e.Name)
	default:
		v.Reason = fmt.Sprintf("scheduler is %s: weights are ignored", e.Scheduler)
	}
	return v
}

func schedulerPath(e Env) string { return fmt.Sprintf("/sys/block/%s/queue/scheduler", e.Name) }

package mech

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// IOLatency is cgroup v2's io.latency (blk-iolatency): a cgroup given a
// latency target is protected — while its requests take longer than the
// target, the kernel cuts the queue depth of its siblings with a higher
// target or none. ddiskqos gives level-1 workloads the configured target
// (config key io_latency_target) and the worse levels none, beside the
// device's weight or throttle: the kernel then reacts to a level-1
// workload's latency per request, with no loop of ours.
//
//	8:16 target=10000
//
// (microseconds; "MAJ:MIN target=max" removes it). Kernels built with
// CONFIG_BLK_CGROUP_IOLATENCY (Debian's are); the file exists in every
// non-root cgroup with the io controller on.
const IOLatency Name = "io-latency"

var ioLatency = Mech{Name: IOLatency, Knob: "io.latency", Role: Target,
	Files: func(v int) []string {
		if v == 2 {
			return []string{"io.latency"}
		}
		return nil
	},
	Open: func(h cgroupfs.Hierarchy, dev cgroupfs.Dev, p Params) (Knob, error) {
		if h.Version != 2 {
			return nil, errors.New("io.latency is cgroup v2 only")
		}
		return &latencyKnob{h: h, dev: dev, target: p.LatencyTarget}, nil
	},
	Probe: probeLatency,
	On:    func(p Params) bool { return p.LatencyTarget > 0 },
}

// probeLatency: cgroup v2, a request-based device (blk-iolatency hooks
// the request queue: a bio-based device such as dm has none), and a
// kernel that has the file — looked for in the hierarchy's first-level
// cgroups, as the root has none.
func probeLatency(e Env) error {
	if e.H.Version != 2 {
		return fmt.Errorf("io.latency is cgroup v2 only; the I/O hierarchy at %s is v%d", e.H.Mount, e.H.Version)
	}
	if e.Scheduler == "" {
		return fmt.Errorf("%s has no request queue (bio-based): io.latency cannot throttle on it", e.Name)
	}
	found, _ := filepath.Glob(filepath.Join(e.H.Mount, "*", "io.latency"))
	if len(found) == 0 {
		return fmt.Errorf("no cgroup under %s has io.latency: kernel built without CONFIG_BLK_CGROUP_IOLATENCY, or io not in %s/cgroup.subtree_control",
			e.H.Mount, e.H.Mount)
	}
	return nil
}

// latencyKnob is io.latency's entry of one device. Its value is
// "target=N" (µs), "" for none.
type latencyKnob struct {
	h      cgroupfs.Hierarchy
	dev    cgroupfs.Dev
	target int64 // µs, for level 1
}

func (k *latencyKnob) Want(level int, _ cgroupfs.Weight) string {
	if level == 1 && k.target > 0 {
		return "target=" + strconv.FormatInt(k.target, 10)
	}
	return ""
}

func (k *latencyKnob) Read(cgroup string) (string, error) {
	b, err := k.h.ReadKnob(cgroup, "io.latency")
	if err != nil {
		return "", err
	}
	return parseLatency(b, k.dev)
}

// parseLatency finds dev's entry in io.latency: "MAJ:MIN target=N" lines.
func parseLatency(b []byte, dev cgroupfs.Dev) (string, error) {
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		d, err := cgroupfs.ParseDev(f[0])
		if err != nil || d != dev {
			continue // another device, or a removed one's line
		}
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "target="); ok {
				if _, err := strconv.ParseUint(v, 10, 64); err != nil {
					return "", fmt.Errorf("io.latency: %q: target is not a number", line)
				}
				return kv, nil
			}
		}
	}
	return "", nil
}

func (k *latencyKnob) Write(cgroup, v string) error {
	if v == "" {
		return k.h.WriteKnob(cgroup, "io.latency", k.dev.String()+" target=max")
	}
	n, ok := strings.CutPrefix(v, "target=")
	if _, err := strconv.ParseUint(n, 10, 64); !ok || err != nil {
		return fmt.Errorf("io.latency of %s: value %q is not target=N", cgroup, v)
	}
	return k.h.WriteKnob(cgroup, "io.latency", k.dev.String()+" "+v)
}

package host

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/actuate/mech"
)

// Mechanism is how the I/O of a cgroup on one device can be shaped: a name
// of the mechanism registry (internal/actuate/mech), which defines them.
type Mechanism = mech.Name

// The mechanisms the host chooses among for a device (chooseMechanism).
const (
	MechIOCostWeight = mech.IOCostWeight
	MechBFQWeight    = mech.BFQWeight
	MechCFQWeight    = mech.CFQWeight
	MechThrottle     = mech.Throttle
	MechNone         = mech.None
)

// WeightRange is the range the kernel accepts in a weight file.
type WeightRange struct {
	Min     int `json:"min"`
	Max     int `json:"max"`
	Default int `json:"default"`
}

// Choice is the mechanism chosen for one device, and what the actuator
// needs to use it.
type Choice struct {
	Mechanism        Mechanism
	WeightsEffective bool
	// WeightFile takes "N" (v1) or "default N" (v2); WeightDeviceFile takes
	// "MAJ:MIN N". They are the same file on v2.
	WeightFile       string
	WeightDeviceFile string
	Weight           *WeightRange
	// Verified says how the weight file was found to exist.
	Verified string
	Reason   string
	// Fix is the command that gets weights on the device ("" when they
	// work, or when nothing can be done on this device).
	Fix string
}

// mechanismInput is what chooseMechanism decides from: no file access.
type mechanismInput struct {
	Name, Dev  string
	Kind       string
	Scheduler  string
	Schedulers []string
	Slaves     []string
	Hier       IOHierarchy
	IOCostOn   bool
}

// chooseMechanism picks the mechanism for one device. Order and why:
//
//  1. iocost-weight, when the hierarchy is v2 and io.cost.qos has enable=1
//     for the device. It is preferred over bfq because it works under any
//     scheduler, is work-conserving, costs little per request and models the
//     device's cost (so it keeps up with fast SSDs, where BFQ's per-request
//     CPU cost caps throughput); with both on, a share would be weighted
//     twice, by iocost and then by bfq.
//  2. bfq-weight, when the active scheduler is bfq and its weight file is
//     offered (kernel built with CONFIG_BFQ_GROUP_IOSCHED).
//  3. cfq-weight, when the active scheduler is cfq (kernels before 5.0).
//  4. throttle, when blk-throttle files are offered: limits, no shares.
//  5. none.
func chooseMechanism(in mechanismInput) Choice {
	h := in.Hier
	v1 := h.Version == 1
	sched := in.Scheduler
	schedPath := fmt.Sprintf("/sys/block/%s/queue/scheduler", in.Name)
	if h.Version == 0 {
		return Choice{Mechanism: MechNone,
			Reason: "no I/O cgroup hierarchy: neither v1 blkio nor cgroup2 is mounted",
			Fix:    "mount -t cgroup -o blkio blkio /sys/fs/cgroup/blkio",
		}
	}
	if !h.Enabled {
		return Choice{Mechanism: MechNone,
			Reason: fmt.Sprintf("the cgroup v2 hierarchy at %s has no io controller (it is bound to a v1 hierarchy or not built): no cgroup can shape I/O on %s", h.Mount, in.Name),
			Fix:    "mount the blkio controller (cgroup v1) or boot with systemd.unified_cgroup_hierarchy=1 so io is on cgroup v2",
		}
	}

	if !v1 && in.IOCostOn {
		return Choice{Mechanism: MechIOCostWeight, WeightsEffective: true,
			WeightFile: "io.weight", WeightDeviceFile: "io.weight",
			Weight:   &WeightRange{Min: 1, Max: 10000, Default: 100},
			Verified: h.IOCost.How,
			Reason:   fmt.Sprintf("iocost is enabled for %s (io.cost.qos enable=1): io.weight is honoured under any scheduler (active: %s); preferred over bfq: work-conserving, cheap per request, models the device's cost", in.Dev, orNone(sched)),
		}
	}

	switch sched {
	case "bfq":
		file, devFile := "io.bfq.weight", "io.bfq.weight"
		if v1 {
			file, devFile = "blkio.bfq.weight", "blkio.bfq.weight_device"
		}
		if h.BFQ.Present || !h.BFQ.Known {
			c := Choice{Mechanism: MechBFQWeight, WeightsEffective: true,
				WeightFile: file, WeightDeviceFile: devFile,
				Weight:   &WeightRange{Min: 1, Max: 1000, Default: 100},
				Verified: h.BFQ.How,
				Reason:   fmt.Sprintf("scheduler is bfq: %s sets each cgroup's share of %s", devFile, in.Name),
			}
			if !h.BFQ.Known {
				c.Reason += " (" + h.BFQ.How + ")"
			}
			return c
		}
		c := throttleOrNone(in, fmt.Sprintf("scheduler is bfq but %s is not offered (%s; kernel built without CONFIG_BFQ_GROUP_IOSCHED?)", file, h.BFQ.How))
		if alt := iocostHint(in); alt != "" {
			c.Fix = alt
			c.Reason += "; to get weights, enable iocost: " + alt
		}
		return c
	case "cfq":
		file, devFile := "io.weight", "io.weight"
		if v1 {
			file, devFile = "blkio.weight", "blkio.weight_device"
		}
		if h.CFQ.Present || !h.CFQ.Known {
			return Choice{Mechanism: MechCFQWeight, WeightsEffective: true,
				WeightFile: file, WeightDeviceFile: devFile,
				Weight:   &WeightRange{Min: 10, Max: 1000, Default: 500},
				Verified: h.CFQ.How,
				Reason:   fmt.Sprintf("scheduler is cfq: %s sets each cgroup's share of %s", devFile, in.Name),
			}
		}
		c := throttleOrNone(in, fmt.Sprintf("scheduler is cfq but %s is not offered (%s; kernel built without CONFIG_CFQ_GROUP_IOSCHED?)", file, h.CFQ.How))
		return c
	}

	var why string
	switch {
	case len(in.Slaves) > 0:
		why = fmt.Sprintf("%s is a stacked %s device with no scheduler of its own: weights work on the disks under it (%s), not here", in.Name, in.Kind, strings.Join(in.Slaves, ", "))
	case sched == "":
		why = fmt.Sprintf("%s has no I/O scheduler (bio-based): weights are ignored", in.Name)
	default:
		why = fmt.Sprintf("scheduler is %s: weights are ignored", sched)
	}
	c := throttleOrNone(in, why)
	alt := iocostHint(in)
	if len(in.Slaves) > 0 || sched == "" {
		if alt != "" {
			c.Fix = alt
			c.Reason += "; to get weights, enable iocost: " + alt
		}
		return c
	}
	switch {
	case slices.Contains(in.Schedulers, "bfq"):
		c.Fix = fmt.Sprintf("echo bfq > %s", schedPath)
	case slices.Contains(in.Schedulers, "cfq"):
		c.Fix = fmt.Sprintf("echo cfq > %s", schedPath)
	default:
		c.Fix = fmt.Sprintf("modprobe bfq && echo bfq > %s", schedPath)
	}
	c.Reason += "; to get weights: " + c.Fix
	switch {
	case alt != "":
		c.Reason += ", or enable iocost: " + alt
	case h.Version == 1:
		c.Reason += " (iocost would need cgroup v2 as the I/O hierarchy)"
	}
	return c
}

// throttleOrNone is the fallback when no weight works on the device.
func throttleOrNone(in mechanismInput, why string) Choice {
	h := in.Hier
	if h.Throttle.Present || !h.Throttle.Known {
		files := "io.max"
		if h.Version == 1 {
			files = "blkio.throttle.*"
		}
		return Choice{Mechanism: MechThrottle, Verified: h.Throttle.How,
			Reason: fmt.Sprintf("%s; only %s limits work", why, files)}
	}
	return Choice{Mechanism: MechNone, Verified: h.Throttle.How,
		Reason: fmt.Sprintf("%s, and %s is not offered (%s)", why, h.Throttle.File, h.Throttle.How)}
}

// iocostHint is the command that enables iocost on the device, when the
// hierarchy is v2 and the kernel has iocost; "" otherwise.
func iocostHint(in mechanismInput) string {
	if in.Hier.Version == 2 && in.Hier.IOCost.Present {
		return fmt.Sprintf("echo '%s enable=1' > %s/io.cost.qos", in.Dev, in.Hier.Mount)
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

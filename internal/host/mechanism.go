package host

import (
	"fmt"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/mech"
)

// Mechanism is how the I/O of a cgroup on one device can be shaped: a name
// of the mechanism registry (internal/mech), which defines them.
type Mechanism = mech.Name

// The mechanisms the registry chooses among for a device (mech.Choose).
const (
	MechIOCostWeight = mech.IOCostWeight
	MechBFQWeight    = mech.BFQWeight
	MechCFQWeight    = mech.CFQWeight
	MechThrottle     = mech.Throttle
	MechNone         = mech.None
)

// WeightRange is the range the kernel accepts in a weight file.
type WeightRange = mech.WeightRange

// Choice is the mechanism chosen for one device, and what the actuator
// needs to use it.
type Choice = mech.Choice

// mechEnv is what the registry's probes look at for d in h;
// noBFQ: the kernel is built without bfq (BuiltWithoutBFQ).
func mechEnv(h IOHierarchy, d Device, noBFQ bool) mech.Env {
	return mech.Env{
		NoBFQ: noBFQ,
		H:     h.Hierarchy(), Enabled: h.Enabled,
		Offered: offers(h.Offered),
		Dev:     cgroupfs.Dev{Major: d.Major, Minor: d.Minor},
		Name:    d.Name, Kind: d.Kind,
		Scheduler: d.Scheduler, Schedulers: d.Schedulers, Slaves: d.Slaves,
		IOCostOn: d.IOCost,
	}
}

// offers are the host's probes as the registry's Env takes them.
func offers(ps map[mech.Name]Probe) map[mech.Name]mech.Offer {
	out := make(map[mech.Name]mech.Offer, len(ps))
	for n, p := range ps {
		out[n] = mech.Offer(p)
	}
	return out
}

func deviceValue(d Device) string {
	sched := d.Scheduler
	if sched == "" {
		sched = "no scheduler"
	} else {
		sched = "scheduler " + sched
	}
	v := fmt.Sprintf("%s (%s, %s", mech.Join(append([]Mechanism{d.Mechanism}, d.Also...)), d.Dev, sched)
	if d.IOCost {
		v += ", iocost on"
	}
	if d.WeightDeviceFile != "" {
		v += ", " + d.WeightDeviceFile
	}
	return v + ")"
}

package host

import (
	"github.com/ddiskqos/ddiskqos/internal/actuate/mech"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Mechanism is how the I/O of a cgroup on one device can be shaped: a name
// of the mechanism registry (internal/actuate/mech), which defines them.
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

// chooseMechanism picks d's mechanism in h: the host's facts handed to the
// registry, whose mechanisms each probe the device (mech.Choose).
func chooseMechanism(h IOHierarchy, d Device) Choice {
	return mech.Choose(mechEnv(h, d))
}

// mechEnv is what the registry's probes look at for d in h.
func mechEnv(h IOHierarchy, d Device) mech.Env {
	return mech.Env{
		H: h.Hierarchy(), Enabled: h.Enabled,
		Offered: map[mech.Name]mech.Offer{
			mech.IOCostWeight: mech.Offer(h.IOCost),
			mech.BFQWeight:    mech.Offer(h.BFQ),
			mech.CFQWeight:    mech.Offer(h.CFQ),
			mech.Throttle:     mech.Offer(h.Throttle),
		},
		Dev:  cgroupfs.Dev{Major: d.Major, Minor: d.Minor},
		Name: d.Name, Kind: d.Kind,
		Scheduler: d.Scheduler, Schedulers: d.Schedulers, Slaves: d.Slaves,
		IOCostOn: d.IOCost,
	}
}

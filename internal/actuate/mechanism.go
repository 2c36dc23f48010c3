package actuate

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/throttle"
)

// The actuator's side of the mechanisms (internal/mech): which are
// in force on each device, and their knobs. A mechanism of Role Weight or
// Target is written by Apply from each workload's level; the throttle (Role
// Caps) decides its caps itself, in its loop (internal/throttle).

// Device is a block device to actuate on, and its mechanisms.
type Device struct {
	Name      string
	Dev       cgroupfs.Dev
	Mech      mech.Name // the main one, chosen by the host
	Scheduler string    // for display
	// Also are mechanisms in force beside Mech: the throttle beside a
	// weight (weights split the device between queues that stay busy; a
	// reader that pauses between requests still waits behind a streamer's
	// budget, which the throttle's caps bound: docs/bench/contention.md),
	// io.latency's target for level 1.
	Also []mech.Name
}

// Mechanisms names what is in force on the device, e.g. "bfq-weight" or
// "bfq-weight+throttle".
func (d Device) Mechanisms() string {
	switch {
	case len(d.Also) == 0:
		return string(d.Mech)
	case len(d.Also) == 1 && d.Also[0] != d.Mech: // one allocation, as the snapshot asks per workload
		return string(d.Mech) + "+" + string(d.Also[0])
	}
	ns := []mech.Name{d.Mech}
	for _, n := range d.Also {
		if n != d.Mech {
			ns = append(ns, n)
		}
	}
	return mech.Join(ns)
}

// Has reports whether mechanism n is in force on the device.
func (d Device) Has(n mech.Name) bool {
	if d.Mech == n {
		return true
	}
	for _, a := range d.Also {
		if a == n {
			return true
		}
	}
	return false
}

// Weighted reports whether a weight is in force on the device (a workload's
// weight means something there).
func (d Device) Weighted() bool { return mech.IsWeight(d.Mech) }

// DeviceStatus is what is in force on one device after an Apply.
type DeviceStatus struct {
	Device Device
	// TopActive is the best level that did I/O on the device lately, 0
	// when idle.
	TopActive int
	// CapacityBps and CapacityIOPS are the device's capacity as its
	// throttle estimates it; 0 without a throttle or before it measured.
	CapacityBps, CapacityIOPS float64
	// Capping: a throttle runs on the device (Hold can bound its levels,
	// Steer its share).
	Capping bool
	// Share is the capped workloads' share as steered (Steer), 0 when
	// not steered; CappedAt the throttle's last period with a cap in
	// force, HeldAt its last with a workload held back by one (zero:
	// never).
	Share            float64
	CappedAt, HeldAt time.Time
	// ShareMost is the most a steered share gives the levels capped at
	// the throttle's last period (their shares' largest; 0: none capped).
	ShareMost float64
	// Guard is the throttle's lift guard's status (internal/throttle's
	// guard.go).
	Guard throttle.GuardStatus
	// ContendedAt is the throttle's last period whose level rule capped a
	// workload, in force or lifted by a share of 1 (the latency
	// controller's work conservation); Used what those workloads moved
	// then, together, as a part of the capacity (0: not known); InForce
	// their read caps then, together, as a part of the capacity (0: none
	// in force, lifted, or not known): the share in force, which the
	// throttle's least cap may put above the one steered.
	ContendedAt   time.Time
	Used, InForce float64
}

// devMech is one mechanism in force on a device, with its knob there.
type devMech struct {
	m    *mech.Mech
	knob mech.Leveled
}

// device is a Device with what the actuator runs on it.
type device struct {
	Device
	leveled []devMech          // written by Apply
	targets bool               // a leveled one is of Role Target
	thr     *throttle.Throttle // nil: no throttle on it
	thrKnob string             // the throttle's Knob
}

// newDevice opens d's mechanisms; sen is the device's sensor (nil: none
// given).
func newDevice(cfg Config, d Device, sen *devsensor.Device) (device, error) {
	out := device{Device: d}
	for _, n := range append([]mech.Name{d.Mech}, d.Also...) {
		m, err := mech.Lookup(n)
		if err != nil {
			return out, fmt.Errorf("device %s: %w", d.Name, err)
		}
		if m.Role == mech.Caps {
			if out.thr == nil {
				k, err := m.Open(cfg.Hierarchy, d.Dev, cfg.Params)
				if err != nil {
					return out, fmt.Errorf("device %s: %w", d.Name, err)
				}
				out.thr = throttle.New(cfg.Throttle, throttle.Options{Hierarchy: cfg.Hierarchy, Name: d.Name, Dev: d.Dev,
					Knob: k, Sensor: sen, SysRoot: cfg.SysRoot, DryRun: cfg.DryRun, Logger: cfg.Logger, OnPanic: cfg.OnPanic})
				out.thrKnob = m.Knob
			}
			continue
		}
		if m.Open == nil {
			return out, fmt.Errorf("device %s: %s writes no cgroup file: it is the Docker actuator's", d.Name, n)
		}
		k, err := m.Open(cfg.Hierarchy, d.Dev, cfg.Params)
		if err != nil {
			return out, fmt.Errorf("device %s: %w", d.Name, err)
		}
		lk, ok := k.(mech.Leveled)
		if !ok {
			return out, fmt.Errorf("device %s: %s takes no level", d.Name, n)
		}
		out.leveled = append(out.leveled, devMech{m: m, knob: lk})
		out.targets = out.targets || m.Role == mech.Target
	}
	return out, nil
}

// knobOf returns the knob an original belongs to, to restore it: the one
// in force on its device (a throttle then stops managing the cgroup, so
// its loop does not write it again), else a new one from the registry (an
// original adopted from a state file, restored before any workload of
// this run touched it).
func (a *Actuator) knobOf(o Original) (mech.Knob, error) {
	for i := range a.devs {
		d := &a.devs[i]
		if d.Dev != o.Dev {
			continue
		}
		for _, dm := range d.leveled {
			if dm.m.Knob == o.Knob {
				return dm.knob, nil
			}
		}
		if d.thr != nil && o.Knob == d.thrKnob {
			d.thr.Forget(o.Cgroup)
			return d.thr.Knob(), nil
		}
	}
	m, err := mech.ByKnob(o.Knob)
	if err != nil {
		return nil, err
	}
	if m.Open == nil {
		return nil, errors.New(string(m.Name) + " is restored by the Docker actuator")
	}
	return m.Open(a.cfg.Hierarchy, o.Dev, a.cfg.Params)
}

// Hold bounds the caps of dev's worse levels by c (see throttle.Ceiling); the zero
// Ceiling lifts the bound. It fails when dev has no throttle to do it with
// (its mechanism is a weight alone).
func (a *Actuator) Hold(dev cgroupfs.Dev, c throttle.Ceiling) error {
	for i := range a.devs {
		if a.devs[i].Dev == dev && a.devs[i].thr != nil {
			a.devs[i].thr.Hold(c)
			return nil
		}
	}
	return fmt.Errorf("device %s: no throttle to hold its levels with", dev)
}

// Steer sets the share of dev's capacity its capped workloads get, all
// together (the latency controller, internal/control); 0 goes back to the
// throttle's fixed rule. It fails when dev has no throttle.
func (a *Actuator) Steer(dev cgroupfs.Dev, share float64) error {
	for i := range a.devs {
		if a.devs[i].Dev == dev && a.devs[i].thr != nil {
			a.devs[i].thr.Steer(share)
			return nil
		}
	}
	return fmt.Errorf("device %s: no throttle to steer", dev)
}

// OpenFiles is how many descriptors the actuator keeps open now: the
// throttle's, one per demoted workload and parent on each of its devices,
// which the daemon's open-file budget must leave room for.
func (a *Actuator) OpenFiles() int {
	n := 0
	for i := range a.devs {
		if t := a.devs[i].thr; t != nil {
			n += t.OpenFiles()
		}
	}
	return n
}

// ObservePeak feeds a device's total bandwidth in the last tick (bytes/s);
// the throttle sizes its caps from it where it cannot read the device's own
// counters.
func (a *Actuator) ObservePeak(i int, bps float64) {
	if t := a.devs[i].thr; t != nil {
		t.ObservePeak(bps)
	}
}

// SetBios makes the throttles count their workloads' bytes with b (nil:
// with their counter files again).
func (a *Actuator) SetBios(b throttle.BioCounter) {
	for i := range a.devs {
		if t := a.devs[i].thr; t != nil {
			t.SetBios(b)
		}
	}
}

// knobsText is Applied.Knobs of a workload's knobs ks of the leveled
// mechanisms ms: was, when it says the same (no new string per tick).
func knobsText(ms []devMech, ks []knobSet, was string) string {
	var b strings.Builder
	for j, k := range ks {
		if ms[j].m.Role != mech.Target || !k.ok || k.v == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(string(ms[j].m.Name))
		b.WriteByte('=')
		b.WriteString(k.v)
	}
	if b.Len() == len(was) && b.String() == was {
		return was
	}
	return b.String()
}

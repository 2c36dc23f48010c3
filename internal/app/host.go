package app

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/daemon"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/mech"
)

// Devices is what the daemon needs to know of the host's block devices.
type Devices struct {
	// Actuated are the devices shaped, each with its mechanism.
	Actuated []actuate.Device
	// Sense are every target device, whose I/O is counted (and, on v1,
	// whose accounting the daemon enables).
	Sense []cgroupfs.Dev
	// Stacked maps stacked devices to the disks below them.
	Stacked map[cgroupfs.Dev][]cgroupfs.Dev
	// SysRoot is sysfs, where the throttle reads each device's counters.
	SysRoot string
}

// HostDevices reads the block devices under roots and picks those to
// shape: every target device with a mechanism, or those whose names match
// globs when any are given, each with the mechanisms p runs beside its
// own (a WARN says why one turned on cannot run). It fails when none is
// left, or a glob is bad.
func HostDevices(roots host.Roots, layout cgroupfs.Layout, globs []string, p mech.Params, log *slog.Logger) (Devices, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, g := range globs {
		if _, err := filepath.Match(g, ""); err != nil {
			return Devices{}, fmt.Errorf("devices pattern %q: %w", g, err)
		}
	}
	all, err := host.Devices(roots, layout, p)
	if err != nil {
		return Devices{}, err
	}
	out := Devices{SysRoot: roots.Sys}
	for _, d := range all {
		dev, err := cgroupfs.ParseDev(d.Dev)
		if err != nil {
			return Devices{}, fmt.Errorf("device %s: %w", d.Name, err)
		}
		if d.Target {
			out.Sense = append(out.Sense, dev)
		}
		if !host.Shaped(d, globs) {
			if host.Selected(d, globs) {
				log.Warn("device skipped: no cgroup mechanism reaches it", "device", d.Name, "reason", d.Reason)
			}
			continue
		}
		log.Info("device", "name", d.Name, "dev", d.Dev, "scheduler", d.Scheduler, "mechanism", d.Mechanism,
			"weights_effective", d.WeightsEffective)
		for _, r := range d.NotBeside {
			log.Warn("mechanism not in force on this device", "mechanism", r.Mechanism, "device", d.Name, "reason", r.Reason)
		}
		out.Actuated = append(out.Actuated, actuate.Device{Name: d.Name, Dev: dev, Mech: d.Mechanism, Scheduler: d.Scheduler, Also: d.Also})
	}
	if len(out.Actuated) == 0 {
		return Devices{}, fmt.Errorf("no block device to shape (devices %q): run `ddiskqos check` to see each device's mechanism", globs)
	}
	out.Stacked = map[cgroupfs.Dev][]cgroupfs.Dev{}
	for up, lows := range host.Lowers(roots, all) {
		u, err := cgroupfs.ParseDev(up)
		if err != nil {
			return Devices{}, err
		}
		for _, l := range lows {
			d, err := cgroupfs.ParseDev(l)
			if err != nil {
				return Devices{}, err
			}
			out.Stacked[u] = append(out.Stacked[u], d)
		}
	}
	return out, nil
}

// Apply puts the devices into daemon options.
func (d Devices) Apply(o *daemon.Options) {
	o.Actuator.Devices = d.Actuated
	o.SenseDevices = d.Sense
	o.Stacked = d.Stacked
	o.Actuator.SysRoot = d.SysRoot
}

// Host is what the daemon is built on: the kernel's filesystems, the cgroup
// layout, the hierarchy that holds the I/O controller, and the devices.
type Host struct {
	Roots     host.Roots
	Layout    cgroupfs.Layout
	Hierarchy cgroupfs.Hierarchy
	Devices   Devices
	// Kernel is the running kernel's release ("" when unreadable).
	Kernel string
}

// ReadHost reads the host's facts under roots; globs select the devices to
// shape, p their mechanisms, as in HostDevices.
func ReadHost(roots host.Roots, globs []string, p mech.Params, log *slog.Logger) (Host, error) {
	layout, err := host.Layout(roots)
	if err != nil {
		return Host{}, err
	}
	h, err := layout.IOHierarchy()
	if err != nil {
		return Host{}, err
	}
	devs, err := HostDevices(roots, layout, globs, p, log)
	if err != nil {
		return Host{}, err
	}
	release, err := host.KernelRelease(roots)
	if err != nil {
		log.Warn("kernel release unknown: request caps are re-armed as on older kernels", "err", err)
	}
	return Host{Roots: roots, Layout: layout, Hierarchy: h, Devices: devs, Kernel: release}, nil
}

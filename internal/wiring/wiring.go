// Package wiring is the composition root: it turns a configuration and the
// host's facts into the daemon's options the one way `ddiskqos run` and the
// benchmarks use — which block devices are shaped and with which
// mechanism, which are counted, which stack on which, and every default.
// Keeping it in one place means a benchmark measures exactly what an
// operator runs.
package wiring

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/actuate/mech"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/daemon"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/source"
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
// globs when any are given. It fails when none is left, or a glob is bad.
func HostDevices(roots host.Roots, layout cgroupfs.Layout, globs []string, log *slog.Logger) (Devices, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, g := range globs {
		if _, err := filepath.Match(g, ""); err != nil {
			return Devices{}, fmt.Errorf("devices pattern %q: %w", g, err)
		}
	}
	all, err := host.Devices(roots, layout)
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
		if len(globs) > 0 {
			match := false
			for _, g := range globs {
				if ok, _ := filepath.Match(g, d.Name); ok {
					match = true
				}
			}
			if !match {
				continue
			}
		} else if !d.Target {
			continue
		}
		if d.Mechanism == host.MechNone || d.Mechanism == "" {
			log.Warn("device skipped: no cgroup mechanism reaches it", "device", d.Name, "reason", d.Reason)
			continue
		}
		log.Info("device", "name", d.Name, "dev", d.Dev, "scheduler", d.Scheduler, "mechanism", d.Mechanism,
			"weights_effective", d.WeightsEffective)
		out.Actuated = append(out.Actuated, actuate.Device{Name: d.Name, Dev: dev, Mech: d.Mechanism, Scheduler: d.Scheduler})
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
}

// ReadHost reads the host's facts under roots; globs select the devices to
// shape as in HostDevices.
func ReadHost(roots host.Roots, globs []string, log *slog.Logger) (Host, error) {
	layout, err := host.Layout(roots)
	if err != nil {
		return Host{}, err
	}
	h, err := layout.IOHierarchy()
	if err != nil {
		return Host{}, err
	}
	devs, err := HostDevices(roots, layout, globs, log)
	if err != nil {
		return Host{}, err
	}
	return Host{Roots: roots, Layout: layout, Hierarchy: h, Devices: devs}, nil
}

// Options builds the daemon's options from a configuration, the host and a
// workload source: the composition root of `ddiskqos run` and of every
// benchmark, so that each default lives in config.Default alone and a
// benchmark measures exactly what an operator runs. Callers add what is
// theirs (an Observer, NewActuator for the Docker actuator).
func Options(cfg config.Config, hst Host, src source.Source, log *slog.Logger) daemon.Options {
	var shares [4]float64
	copy(shares[:], cfg.ThrottleShares)
	o := daemon.Options{
		Hierarchy: hst.Hierarchy, CgroupMode: string(hst.Layout.Mode), Source: src, Policy: cfg.Policy(),
		Actuator: actuate.Config{Reassert: cfg.Reassert, DryRun: cfg.DryRun,
			Throttle: actuate.Throttle{Shares: shares, Min: uint64(cfg.ThrottleMin), MaxBurst: cfg.ThrottleBurst, Reads: cfg.ThrottleReads}},
		ActuatorName: string(cfg.Actuator), Interval: cfg.Interval, StateFile: cfg.StateFile,
		HostPressure: filepath.Join(hst.Roots.Proc, "pressure", "io"), Logger: log,
		Health: daemon.HealthOptions{SysRoot: hst.Roots.Sys, ProcRoot: hst.Roots.Proc, Models: cfg.HealthModels(),
			DStateWorkloads: cfg.Health.DStateWorkloads, ProbePath: cfg.Health.SyncProbe,
			ProbeInterval: cfg.Health.SyncProbeInterval, HoldBelow: cfg.Health.BurstHoldBelow,
			HoldFromLevel: cfg.Health.BurstHoldFromLevel},
		Latency: latencyOptions(hst.Roots),
	}
	hst.Devices.Apply(&o)
	for _, l := range cfg.LevelLimits {
		o.Actuator.Params.LevelLimits = append(o.Actuator.Params.LevelLimits, uint64(l))
	}
	o.Actuator.Devices = slices.Clone(o.Actuator.Devices)
	for i := range o.Actuator.Devices {
		d := &o.Actuator.Devices[i]
		d.Also = alsoOn(cfg, o.Actuator.Params, hst.Hierarchy, *d, log)
	}
	return o
}

// alsoOn chooses the mechanisms that run on d beside its own: the throttle
// beside a scheduler's weight (throttle_with_weights), and each mechanism
// the configuration turns on (level_limits) where its probe lets it (else
// a WARN says why not).
func alsoOn(cfg config.Config, p mech.Params, h cgroupfs.Hierarchy, d actuate.Device, log *slog.Logger) []mech.Name {
	var also []mech.Name
	if cfg.ThrottleWithWeights && (d.Mech == mech.BFQWeight || d.Mech == mech.CFQWeight) {
		also = append(also, mech.Throttle)
	}
	for _, m := range mech.All() {
		if m.Role != mech.Target || m.On == nil || !m.On(p) {
			continue
		}
		env := mech.Env{H: h, Dev: d.Dev, Name: d.Name, Scheduler: d.Scheduler, Mechs: append([]mech.Name{d.Mech}, also...)}
		if err := m.Probe(env); err != nil {
			if log != nil {
				log.Warn("mechanism not in force on this device", "mechanism", m.Name, "device", d.Name, "reason", err)
			}
			continue
		}
		also = append(also, m.Name)
	}
	return also
}

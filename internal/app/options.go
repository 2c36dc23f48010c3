package app

import (
	"log/slog"
	"path/filepath"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/daemon"
	"github.com/ddiskqos/ddiskqos/internal/health"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/throttle"
)

// daemonOptions builds the daemon's options from a configuration, the host
// and a workload source; Build adds the observer and the actuator.
func daemonOptions(cfg config.Config, hst Host, src source.Source, log *slog.Logger) daemon.Options {
	var shares [4]float64
	copy(shares[:], cfg.ThrottleShares)
	o := daemon.Options{
		Hierarchy: hst.Hierarchy, CgroupMode: string(hst.Layout.Mode), Source: src, Policy: cfg.Policy(),
		Actuator: actuate.Config{Reassert: cfg.Reassert, DryRun: cfg.DryRun,
			Throttle: throttle.Config{Shares: shares, Min: uint64(cfg.ThrottleMin), MaxBurst: cfg.ThrottleBurst, Reads: cfg.ThrottleReads,
				DebtForgiven: host.ThrottleForgivesRequestDebt(hst.Kernel)}},
		ActuatorName: string(cfg.Actuator), Interval: cfg.Interval, StateFile: cfg.StateFile,
		HostPressure: filepath.Join(hst.Roots.Proc, "pressure", "io"), Logger: log,
		Health: health.Options{SysRoot: hst.Roots.Sys, ProcRoot: hst.Roots.Proc, Models: cfg.HealthModels(),
			DStateWorkloads: cfg.Health.DStateWorkloads, ProbePath: cfg.Health.SyncProbe,
			ProbeInterval: cfg.Health.SyncProbeInterval, HoldBelow: cfg.Health.BurstHoldBelow,
			HoldFromLevel: cfg.Health.BurstHoldFromLevel},
		Latency:        latencyOptions(cfg.Latency, hst.Roots),
		ActiveQuietMax: activeQuietMax(hst.Roots.Sys, log),
	}
	o.Latency.NoControl, o.Latency.Target, o.Latency.Multiple = cfg.LatencyTarget.Spec()
	o.Latency.NoConserve = !cfg.WorkConserving
	hst.Devices.Apply(&o)
	o.Actuator.Params = cfg.MechParams()
	return o
}

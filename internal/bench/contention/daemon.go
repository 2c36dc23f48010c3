package contention

import (
	"context"

	"github.com/ddiskqos/ddiskqos/internal/bench/benchd"
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/host"
)

// DaemonStats is what the in-process daemon did in one cell.
type DaemonStats struct {
	Mechanism string `json:"mechanism"`
	benchd.Stats
}

// runningDaemon is ddiskqos started for one cell.
type runningDaemon struct{ bd *benchd.Daemon }

// startDaemon runs ddiskqos in-process as `ddiskqos run --source cgroup
// --cgroup-parent PARENT --devices DEV` builds it: config defaults, the
// cgroup-directory source over the run's parent, and the mechanism the host
// layer picks for the device's current scheduler.
// target, when not empty, is the config's latency_target (ddiskqos-<m>x).
// capping: work_conserving false (ddiskqos-capping).
func startDaemon(ctx context.Context, roots host.Roots, devName, parent string, target config.LatencyTarget, capping bool) (*runningDaemon, error) {
	bd, err := benchd.Start(ctx, benchd.Options{Roots: roots, Device: devName,
		Configure: func(c *config.Config) {
			c.Source, c.CgroupParent = config.SourceCgroup, parent
			if target != "" {
				c.LatencyTarget = target
			}
			if capping {
				c.WorkConserving = false
			}
		}})
	if err != nil {
		return nil, err
	}
	return &runningDaemon{bd: bd}, nil
}

// stop ends the daemon (it restores what it changed) and returns what it did.
func (rd *runningDaemon) stop() (DaemonStats, error) {
	st, err := rd.bd.Stop()
	return DaemonStats{Mechanism: rd.bd.Mechanism, Stats: st}, err
}

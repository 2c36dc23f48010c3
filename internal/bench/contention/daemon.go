package contention

import (
	"context"

	"github.com/ddiskqos/ddiskqos/internal/bench/benchd"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/source/cgroupdir"
	"github.com/ddiskqos/ddiskqos/internal/wiring"
)

// DaemonStats is what the in-process daemon did in one cell.
type DaemonStats struct {
	Mechanism string `json:"mechanism"`
	benchd.Stats
}

// runningDaemon is ddiskqos started for one cell.
type runningDaemon struct{ bd *benchd.Daemon }

// startDaemon runs ddiskqos in-process as `ddiskqos run --source cgroup
// --cgroup-parent PARENT --devices DEV` wires it: config defaults, the
// cgroup-directory source over the run's parent, and the mechanism the host
// layer picks for the device's current scheduler.
func startDaemon(ctx context.Context, roots host.Roots, h cgroupfs.Hierarchy, devName, parent string) (*runningDaemon, error) {
	bd, err := benchd.Start(ctx, benchd.Options{Roots: roots, Device: devName,
		Source: func(wiring.Host) (source.Source, error) {
			return cgroupdir.New(cgroupdir.Options{Hierarchy: h, Parent: parent})
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

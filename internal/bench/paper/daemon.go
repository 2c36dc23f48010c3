package paper

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/bench/benchd"
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/daemon"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

// LabelRun marks the containers of one bench run; the in-process daemon
// manages only those. The engine is shared: nobody else's container may be
// tracked or touched.
const LabelRun = "ddiskqos.bench.run"

// DaemonStats is what the in-process daemon cost and did in one phase.
type DaemonStats struct {
	Mechanism string        `json:"mechanism"`
	Scheduler string        `json:"scheduler"`
	Interval  time.Duration `json:"interval_ns"`
	benchd.Stats
	// What the daemon decided, watched in its snapshots every 20 ms:
	// how many of the run's containers it tracked, and the bulk
	// container's worst level and what was in force for it there.
	Tracked int      `json:"tracked"`
	Bulk    BulkSeen `json:"bulk"`
}

// BulkSeen is what the daemon did to the bulk container(s) of a phase.
type BulkSeen struct {
	MaxLevel int `json:"max_level"`
	// Weight is the weight in force at MaxLevel (0: none); Capped is
	// whether a throttle cap was ever seen in force.
	Weight int  `json:"weight,omitempty"`
	Capped bool `json:"capped,omitempty"`
}

// runningDaemon is a daemon started for one phase.
type runningDaemon struct {
	d       *daemon.Daemon
	bd      *benchd.Daemon
	wcancel context.CancelFunc

	wmu     sync.Mutex
	bulkIDs map[string]bool
	tracked map[string]bool
	bulk    BulkSeen
	wdone   chan struct{}
}

// markBulk tells the watcher which container is the phase's bulk one.
func (rd *runningDaemon) markBulk(id string) {
	if rd == nil {
		return
	}
	rd.wmu.Lock()
	rd.bulkIDs[id] = true
	rd.wmu.Unlock()
}

// watch records, every 20 ms until ctx ends, which workloads the daemon
// tracks and what it applied to the bulk container.
func (rd *runningDaemon) watch(ctx context.Context) {
	defer close(rd.wdone)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if s, release := rd.d.Acquire(); s != nil {
			rd.wmu.Lock()
			for _, w := range s.Workloads {
				rd.tracked[w.ID] = true
				if !rd.bulkIDs[w.ID] {
					continue
				}
				for _, a := range w.Applied {
					if a.Throttled {
						rd.bulk.Capped = true
					}
				}
				if w.Level > rd.bulk.MaxLevel {
					rd.bulk.MaxLevel, rd.bulk.Weight = w.Level, 0
					for _, a := range w.Applied {
						rd.bulk.Weight = max(rd.bulk.Weight, int(a.Weight))
					}
				}
			}
			rd.wmu.Unlock()
			release()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// startDaemon runs ddiskqos in-process the way `ddiskqos run --source
// docker --devices <loop>` builds it, with pc as its policy, the docker source narrowed to
// this run's containers, and the mechanism the host layer picks for the
// device's current scheduler.
func startDaemon(ctx context.Context, cli *client.Client, roots host.Roots, devName, run string, pc policy.Config, log *slog.Logger) (*runningDaemon, error) {
	bd, err := benchd.Start(ctx, benchd.Options{Roots: roots, Device: devName, Logger: log, Engine: cli,
		Configure: func(c *config.Config) {
			c.Source = config.SourceDocker
			c.SetPolicy(pc)
		},
		Narrow: func(src source.Source) source.Source { return source.WithLabel(src, LabelRun, run) },
	})
	if err != nil {
		return nil, err
	}
	wctx, wcancel := context.WithCancel(ctx)
	rd := &runningDaemon{d: bd.D, bd: bd, wcancel: wcancel,
		bulkIDs: map[string]bool{}, tracked: map[string]bool{}, wdone: make(chan struct{})}
	go rd.watch(wctx)
	return rd, nil
}

// stop ends the daemon (it restores every value it changed) and returns
// its statistics.
func (rd *runningDaemon) stop() (DaemonStats, error) {
	st, err := rd.bd.Stop()
	rd.wcancel()
	<-rd.wdone
	out := DaemonStats{Mechanism: rd.bd.Mechanism, Scheduler: rd.bd.Scheduler, Interval: rd.bd.Interval, Stats: st}
	rd.wmu.Lock()
	out.Tracked, out.Bulk = len(rd.tracked), rd.bulk
	rd.wmu.Unlock()
	return out, err
}

// view is what the daemon had decided for container id: level and what
// it applied on the device, "" when it does not track it.
func (rd *runningDaemon) view(id string) string {
	if rd == nil {
		return ""
	}
	s, release := rd.d.Acquire()
	defer release()
	if s == nil {
		return "no snapshot"
	}
	for _, w := range s.Workloads {
		if w.ID != id {
			continue
		}
		v := fmt.Sprintf("level %d", w.Level)
		for _, a := range w.Applied {
			switch {
			case a.Error != "":
				v += " error " + a.Error
			case a.Weight > 0:
				v += fmt.Sprintf(" weight %d", a.Weight)
			case a.Throttled:
				v += fmt.Sprintf(" capped %d B/s", a.ReadBps)
			default:
				v += " uncapped"
			}
		}
		return v
	}
	return "not tracked yet"
}

package paper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/daemon"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/source/docker"
	"github.com/ddiskqos/ddiskqos/internal/wiring"
)

// LabelRun marks the containers of one bench run; the in-process daemon
// manages only those. The engine is shared: nobody else's container may be
// tracked or touched.
const LabelRun = "ddiskqos.bench.run"

// tickStats is the daemon's Observer: its own cost per tick.
type tickStats struct {
	mu      sync.Mutex
	ticks   int
	sum     time.Duration
	max     time.Duration
	errs    map[string]int
	changes int
}

// ObserveSense: the phase reports tick cost only.
func (s *tickStats) ObserveSense(read, skipped int) {}

func (s *tickStats) ObserveTick(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ticks++
	s.sum += d
	s.max = max(s.max, d)
}

func (s *tickStats) Error(cause snapshot.ErrorCause) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errs == nil {
		s.errs = map[string]int{}
	}
	s.errs[cause.String()]++
}

func (s *tickStats) LevelChange(from, to int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes++
}

// DaemonStats is what the in-process daemon cost and did in one phase.
type DaemonStats struct {
	Mechanism    string         `json:"mechanism"`
	Scheduler    string         `json:"scheduler"`
	Interval     time.Duration  `json:"interval_ns"`
	Ticks        int            `json:"ticks"`
	TickMean     time.Duration  `json:"tick_mean_ns"`
	TickMax      time.Duration  `json:"tick_max_ns"`
	LevelChanges int            `json:"level_changes"`
	Errors       map[string]int `json:"errors,omitempty"`
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
	d      *daemon.Daemon
	cancel context.CancelFunc
	done   chan error
	stats  *tickStats
	info   DaemonStats

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
		if s := rd.d.Snapshot(); s != nil {
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
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// startDaemon runs ddiskqos in-process the way `ddiskqos run --devices
// <loop>` wires it, with pc as its policy, the docker source narrowed to
// this run's containers, and the mechanism the host layer picks for the
// device's current scheduler.
func startDaemon(ctx context.Context, cli *client.Client, roots host.Roots, devName, run string, pc policy.Config, log *slog.Logger) (*runningDaemon, error) {
	cfg := config.Default()
	hst, err := wiring.ReadHost(roots, []string{devName}, log)
	if err != nil {
		return nil, err
	}
	dev := hst.Devices.Actuated[0]
	sched := dev.Scheduler
	src, err := docker.New(docker.Options{Engine: cli, Layout: hst.Layout, ProcFS: roots.Proc, Logger: log})
	if err != nil {
		return nil, err
	}
	st := &tickStats{}
	cfg.StateFile = "" // the bench keeps no state between its phases
	opts := wiring.Options(cfg, hst, source.WithLabel(src, LabelRun, run), log)
	opts.Policy, opts.Observer = pc, st
	d, err := daemon.New(opts)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithCancel(ctx)
	rd := &runningDaemon{d: d, cancel: cancel, done: make(chan error, 1), stats: st,
		info:    DaemonStats{Mechanism: string(dev.Mech), Scheduler: sched, Interval: cfg.Interval},
		bulkIDs: map[string]bool{}, tracked: map[string]bool{}, wdone: make(chan struct{})}
	go func() { rd.done <- d.Run(dctx) }()
	go rd.watch(dctx)
	// Run takes its first tick at once; wait for the snapshot.
	for d.Snapshot() == nil {
		select {
		case err := <-rd.done:
			cancel()
			return nil, fmt.Errorf("daemon stopped at start: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return rd, nil
}

// stop ends the daemon (it restores every value it changed) and returns
// its statistics.
func (rd *runningDaemon) stop() (DaemonStats, error) {
	rd.cancel()
	var err error
	select {
	case err = <-rd.done:
	case <-time.After(30 * time.Second):
		err = errors.New("daemon did not stop within 30s")
	}
	<-rd.wdone
	s := rd.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	out := rd.info
	rd.wmu.Lock()
	out.Tracked, out.Bulk = len(rd.tracked), rd.bulk
	rd.wmu.Unlock()
	out.Ticks, out.TickMax, out.LevelChanges = s.ticks, s.max, s.changes
	if s.ticks > 0 {
		out.TickMean = s.sum / time.Duration(s.ticks)
	}
	if len(s.errs) > 0 {
		out.Errors = map[string]int{}
		for k, v := range s.errs {
			out.Errors[k] = v
		}
	}
	return out, err
}

// view is what the daemon had decided for container id: level and what
// it applied on the device, "" when it does not track it.
func (rd *runningDaemon) view(id string) string {
	if rd == nil {
		return ""
	}
	s := rd.d.Snapshot()
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

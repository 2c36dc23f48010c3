package contention

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/daemon"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source/cgroupdir"
	"github.com/ddiskqos/ddiskqos/internal/wiring"
)

// DaemonStats is what the in-process daemon did in one cell.
type DaemonStats struct {
	Mechanism    string         `json:"mechanism"`
	Ticks        int            `json:"ticks"`
	TickMean     time.Duration  `json:"tick_mean_ns"`
	TickMax      time.Duration  `json:"tick_max_ns"`
	LevelChanges int            `json:"level_changes"`
	Errors       map[string]int `json:"errors,omitempty"`
}

// observer is the daemon's Observer: its cost and level changes.
type observer struct {
	mu      sync.Mutex
	ticks   int
	sum     time.Duration
	max     time.Duration
	changes int
	errs    map[string]int
}

// ObserveSense: the phase reports tick cost only.
func (o *observer) ObserveSense(read, skipped int) {}

func (o *observer) ObserveTick(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ticks++
	o.sum += d
	o.max = max(o.max, d)
}

func (o *observer) Error(cause snapshot.ErrorCause) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.errs == nil {
		o.errs = map[string]int{}
	}
	o.errs[cause.String()]++
}

func (o *observer) LevelChange(from, to int, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.changes++
}

// runningDaemon is ddiskqos started for one cell.
type runningDaemon struct {
	cancel context.CancelFunc
	done   chan error
	obs    *observer
	mech   string
}

// startDaemon runs ddiskqos in-process as `ddiskqos run --source cgroup
// --cgroup-parent PARENT --devices DEV` wires it: config defaults, the
// cgroup-directory source over the run's parent, and the mechanism the host
// layer picks for the device's current scheduler.
func startDaemon(ctx context.Context, roots host.Roots, h cgroupfs.Hierarchy, devName, parent string) (*runningDaemon, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	hst, err := wiring.ReadHost(roots, []string{devName}, log)
	if err != nil {
		return nil, err
	}
	src, err := cgroupdir.New(cgroupdir.Options{Hierarchy: h, Parent: parent, Logger: log})
	if err != nil {
		return nil, err
	}
	cfg := config.Default()
	cfg.StateFile = "" // no state kept between cells
	obs := &observer{}
	opts := wiring.Options(cfg, hst, src, log)
	opts.Observer = obs
	d, err := daemon.New(opts)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithCancel(ctx)
	rd := &runningDaemon{cancel: cancel, done: make(chan error, 1), obs: obs, mech: string(hst.Devices.Actuated[0].Mech)}
	go func() { rd.done <- d.Run(dctx) }()
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

// stop ends the daemon (it restores what it changed) and returns what it did.
func (rd *runningDaemon) stop() (DaemonStats, error) {
	rd.cancel()
	var err error
	select {
	case err = <-rd.done:
	case <-time.After(30 * time.Second):
		err = errors.New("daemon did not stop within 30s")
	}
	o := rd.obs
	o.mu.Lock()
	defer o.mu.Unlock()
	st := DaemonStats{Mechanism: rd.mech, Ticks: o.ticks, TickMax: o.max, LevelChanges: o.changes}
	if o.ticks > 0 {
		st.TickMean = o.sum / time.Duration(o.ticks)
	}
	if len(o.errs) > 0 {
		st.Errors = map[string]int{}
		for k, v := range o.errs {
			st.Errors[k] = v
		}
	}
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return st, err
}

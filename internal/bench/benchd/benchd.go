// Package benchd runs ddiskqos in-process for the benchmarks, wired the way
// `ddiskqos run --devices DEV` wires it, and counts what it cost and did:
// ticks, their mean and worst duration, level changes, errors by cause.
package benchd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/daemon"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/wiring"
)

// Stats is what the daemon cost and did while it ran.
type Stats struct {
	Ticks        int            `json:"ticks"`
	TickMean     time.Duration  `json:"tick_mean_ns"`
	TickMax      time.Duration  `json:"tick_max_ns"`
	LevelChanges int            `json:"level_changes"`
	Errors       map[string]int `json:"errors,omitempty"`
}

// observer is the daemon's Observer: its cost per tick, level changes and
// errors.
type observer struct {
	mu      sync.Mutex
	ticks   int
	sum     time.Duration
	max     time.Duration
	changes int
	errs    map[string]int
}

func (o *observer) ObserveTick(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ticks++
	o.sum += d
	o.max = max(o.max, d)
}

// ObserveSense: a benchmark reports the tick's cost only.
func (o *observer) ObserveSense(read, skipped int) {}

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

func (o *observer) stats() Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := Stats{Ticks: o.ticks, TickMax: o.max, LevelChanges: o.changes}
	if o.ticks > 0 {
		st.TickMean = o.sum / time.Duration(o.ticks)
	}
	if len(o.errs) > 0 {
		st.Errors = maps.Clone(o.errs)
	}
	return st
}

// Options say which daemon to start.
type Options struct {
	Roots host.Roots
	// Device is the one device under QoS, as --devices names it.
	Device string
	// Source makes the workload source once the host is read.
	Source func(wiring.Host) (source.Source, error)
	// Tune, when set, changes the daemon's options before it is made
	// (e.g. its policy).
	Tune func(*daemon.Options)
	// Logger receives the daemon's log; nil discards it.
	Logger *slog.Logger
}

// Daemon is a daemon started by Start.
type Daemon struct {
	D *daemon.Daemon
	// Mechanism and Scheduler are the device's, as the host layer found
	// them; Interval is the daemon's tick interval.
	Mechanism, Scheduler string
	Interval             time.Duration

	cancel context.CancelFunc
	done   chan error
	obs    *observer
}

// Start runs ddiskqos in-process with the config defaults, no state file
// (a bench keeps no state between its phases), the source o.Source makes
// and the mechanism the host layer picks for the device's current
// scheduler, and returns once it took its first tick.
func Start(ctx context.Context, o Options) (*Daemon, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hst, err := wiring.ReadHost(o.Roots, []string{o.Device}, log)
	if err != nil {
		return nil, err
	}
	src, err := o.Source(hst)
	if err != nil {
		return nil, err
	}
	cfg := config.Default()
	cfg.StateFile = ""
	obs := &observer{}
	opts := wiring.Options(cfg, hst, src, log)
	opts.Observer = obs
	if o.Tune != nil {
		o.Tune(&opts)
	}
	d, err := daemon.New(opts)
	if err != nil {
		return nil, err
	}
	dev := hst.Devices.Actuated[0]
	dctx, cancel := context.WithCancel(ctx)
	rd := &Daemon{D: d, Mechanism: string(dev.Mech), Scheduler: dev.Scheduler, Interval: cfg.Interval,
		cancel: cancel, done: make(chan error, 1), obs: obs}
	go func() { rd.done <- d.Run(dctx) }()
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

// Stop ends the daemon (it restores every value it changed) and returns
// what it did.
func (rd *Daemon) Stop() (Stats, error) {
	rd.cancel()
	var err error
	select {
	case err = <-rd.done:
	case <-time.After(30 * time.Second):
		err = errors.New("daemon did not stop within 30s")
	}
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return rd.obs.stats(), err
}

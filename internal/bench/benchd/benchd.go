// Package benchd runs ddiskqos in-process for the benchmarks, built by
// app.Build as `ddiskqos run --devices DEV` builds it, and counts what it
// cost and did: ticks, their mean and worst duration, level changes,
// errors by cause.
package benchd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/app"
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/daemon"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

// Stats is what the daemon cost and did while it ran.
type Stats struct {
	Ticks        int            `json:"ticks"`
	TickMean     time.Duration  `json:"tick_mean_ns"`
	TickMax      time.Duration  `json:"tick_max_ns"`
	LevelChanges int            `json:"level_changes"`
	Errors       map[string]int `json:"errors,omitempty"`
}

// observer wraps the daemon's Observer (the metrics) and counts its cost
// per tick, level changes and errors.
type observer struct {
	next    daemon.Observer // nil: none
	mu      sync.Mutex
	ticks   int
	sum     time.Duration
	max     time.Duration
	changes int
	errs    map[string]int
}

func (o *observer) ObserveTick(d time.Duration) {
	if o.next != nil {
		o.next.ObserveTick(d)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ticks++
	o.sum += d
	o.max = max(o.max, d)
}

// ObserveSense: a benchmark reports the tick's cost only.
func (o *observer) ObserveSense(read, kernel, skipped int) {
	if o.next != nil {
		o.next.ObserveSense(read, kernel, skipped)
	}
}

func (o *observer) Error(cause snapshot.ErrorCause) {
	if o.next != nil {
		o.next.Error(cause)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.errs == nil {
		o.errs = map[string]int{}
	}
	o.errs[cause.String()]++
}

func (o *observer) LevelChange(from, to int, reason string) {
	if o.next != nil {
		o.next.LevelChange(from, to, reason)
	}
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
	// Configure changes the configuration from the defaults as a command
	// line would: the source (source cgroup and its parent, or docker),
	// the policy.
	Configure func(*config.Config)
	// Engine is the bench's Docker client, shared with the daemon; nil
	// when the daemon needs none (or makes its own).
	Engine *client.Client
	// Narrow, when set, narrows the daemon's source (to the bench's own
	// containers on a shared engine).
	Narrow func(source.Source) source.Source
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

	pl     *app.Pipeline
	cancel context.CancelFunc
	done   chan error
	obs    *observer
}

// Start runs ddiskqos in-process with the config defaults as o.Configure
// changes them, on o.Device alone, with no state file (a bench keeps no
// state between its phases) and the mechanism the host layer picks for the
// device's current scheduler, and returns once it took its first tick.
func Start(ctx context.Context, o Options) (*Daemon, error) {
	cfg := config.Default()
	cfg.Paths = config.Paths{Sys: o.Roots.Sys, Proc: o.Roots.Proc}
	cfg.Devices = []string{o.Device}
	cfg.StateFile = ""
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	obs := &observer{}
	pl, err := app.Build(ctx, app.Params{Config: cfg, Logger: o.Logger, Engine: o.Engine, Narrow: o.Narrow,
		Observe: func(next daemon.Observer) daemon.Observer { obs.next = next; return obs }})
	if err != nil {
		return nil, err
	}
	d := pl.Daemon
	dev := pl.Host.Devices.Actuated[0]
	dctx, cancel := context.WithCancel(ctx)
	rd := &Daemon{D: d, Mechanism: string(dev.Mech), Scheduler: dev.Scheduler, Interval: cfg.Interval,
		pl: pl, cancel: cancel, done: make(chan error, 1), obs: obs}
	go func() { rd.done <- d.Run(dctx) }()
	// Run takes its first tick at once; wait for the snapshot.
	for !published(d) {
		select {
		case err := <-rd.done:
			cancel()
			pl.Close()
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
	return rd.obs.stats(), errors.Join(err, rd.pl.Close())
}

// published says whether d has published its first snapshot.
func published(d *daemon.Daemon) bool {
	s, release := d.Acquire()
	release()
	return s != nil
}

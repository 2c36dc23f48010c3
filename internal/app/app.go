// Package app is the composition root: Build turns a configuration and the
// host's facts into the running pipeline — the workload source, the daemon
// with its devices, mechanisms and actuator, the metrics and the HTTP
// handler — the one way `ddiskqos run` and every benchmark use. Each
// default lives in config.Default alone and each choice (which devices are
// shaped, with which mechanism, which source, which actuator) is made here
// alone, so a benchmark measures exactly what an operator runs.
//
// Build opens at most one Docker Engine API client per pipeline and shares
// it between the source and the Docker actuator; a caller that has its own
// (a benchmark that also starts containers) passes it in.
package app

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ddiskqos/ddiskqos/internal/api"
	"github.com/ddiskqos/ddiskqos/internal/buildinfo"
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/daemon"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/metrics"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
	dockersrc "github.com/ddiskqos/ddiskqos/internal/source/docker"
)

// Params is what Build needs besides the configuration.
type Params struct {
	Config config.Config
	// Logger receives the pipeline's log; nil discards it.
	Logger *slog.Logger
	// Engine is a Docker client the caller already holds; nil means Build
	// makes one from Config.DockerHost when the source or the actuator
	// needs the engine (and Close closes it).
	Engine *client.Client
	// Narrow, when set, wraps the source Build made: a benchmark on a
	// shared engine narrows it to its own containers (source.WithLabel).
	Narrow func(source.Source) source.Source
	// Observe, when set, wraps the daemon's observer (the metrics): a
	// benchmark counts ticks and their cost on the way. The wrapper must
	// pass every call on.
	Observe func(daemon.Observer) daemon.Observer
}

// Pipeline is what Build made. Run its Daemon; serve Handler when the
// configuration listens; Close it after the daemon stopped.
type Pipeline struct {
	Host   Host
	Source source.Source
	Daemon *daemon.Daemon
	// Registry holds the daemon's metrics, the build info and, with a
	// Docker source, the source's health.
	Registry *prometheus.Registry
	// Checks are the health checks /healthz runs besides the snapshot's
	// age (a Docker source that lost its engine).
	Checks []api.HealthCheck

	log    *slog.Logger
	engine *client.Client // closed by Close when Build made it
}

// Build reads the host under cfg.Paths, picks the devices cfg.Devices
// names (every target device when empty) and builds the pipeline on them.
// It touches no cgroup: the first write is the daemon's first tick.
func Build(ctx context.Context, p Params) (_ *Pipeline, err error) {
	cfg, log := p.Config, p.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hst, err := ReadHost(host.Roots{Sys: cfg.Paths.Sys, Proc: cfg.Paths.Proc}, cfg.Devices, cfg.MechParams(), log)
	if err != nil {
		return nil, err
	}
	pl := &Pipeline{Host: hst, Registry: prometheus.NewRegistry(), log: log}
	defer func() {
		if err != nil {
			pl.Close()
		}
	}()
	eng := p.Engine
	engine := func() (*client.Client, error) {
		if eng == nil {
			c, err := DockerClient(cfg.DockerHost)
			if err != nil {
				return nil, err
			}
			eng, pl.engine = c, c
		}
		return eng, nil
	}
	src, err := newSource(ctx, cfg, hst, engine, log)
	if err != nil {
		return nil, err
	}
	// A source that can lose its backend (the Docker engine) reports it on
	// /healthz and /metrics.
	if ds, ok := src.(*dockersrc.Source); ok {
		pl.Checks = append(pl.Checks, ds.Health)
		if err := metrics.WatchSource(pl.Registry, ds.Name(), ds.Errors, func() bool { return ds.Health() == "" }); err != nil {
			return nil, err
		}
	}
	if p.Narrow != nil {
		src = p.Narrow(src)
	}
	pl.Source = src

	opts := daemonOptions(cfg, hst, src, log)
	if opts.NewActuator, err = newActuator(cfg, engine); err != nil {
		return nil, err
	}
	m, err := metrics.New(pl.Registry, func() (*snapshot.Snapshot, func()) { return pl.Daemon.Acquire() })
	if err != nil {
		return nil, err
	}
	if err := metrics.RegisterBuildInfo(pl.Registry, buildinfo.Read()); err != nil {
		return nil, err
	}
	opts.Observer = m
	if p.Observe != nil {
		opts.Observer = p.Observe(m)
	}
	if pl.Daemon, err = daemon.New(opts); err != nil {
		return nil, err
	}
	return pl, nil
}

// Handler is the HTTP API and /metrics of the pipeline.
func (pl *Pipeline) Handler() http.Handler {
	return api.NewHandler(pl.Daemon.Acquire, pl.Registry, pl.log, pl.Checks...)
}

// Close releases what Build opened (the Docker client it made). Call it
// after the daemon's Run returned.
func (pl *Pipeline) Close() error {
	if pl.engine == nil {
		return nil
	}
	err := pl.engine.Close()
	pl.engine = nil
	return err
}

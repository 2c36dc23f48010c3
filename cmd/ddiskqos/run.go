package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/api"
	"github.com/ddiskqos/ddiskqos/internal/buildinfo"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/daemon"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/hostlock"
	"github.com/ddiskqos/ddiskqos/internal/metrics"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/source/cgroupdir"
	dockersrc "github.com/ddiskqos/ddiskqos/internal/source/docker"
	"github.com/ddiskqos/ddiskqos/internal/wiring"
)

// runOptions holds the parsed flags of "ddiskqos run": the config
// package layers them over the file (and again on SIGHUP).
type runOptions struct{ fs *flag.FlagSet }

var runCmd = &cli.Cmd[runOptions]{
	Info: cli.Info{
		Name:    "run",
		Summary: "the daemon: discover containers, move each through four I/O priority levels as it uses 2, 8, 32, 128 MiB, apply the level as a weight or cap on its cgroup, restore on exit",
		Description: `Runs the daemon. Every interval it reads the I/O of every workload (a Docker
container, or a child cgroup of --cgroup-parent), moves a workload that did
its level's allowance of I/O down one of four levels, boosts it back to
level 1 after --boost-after at level 4, and gives each level its I/O weight
(on a throttle-only disk, a bandwidth cap) through the workload's cgroup.

Configuration comes in layers; a later one overrides an earlier one:
  1. the built-in defaults shown below
  2. $DOCKER_HOST, for docker_host
  3. the YAML file given with --config
  4. the flags given on the command line (only those; a flag left out does
     not reset the file's value)
The result is checked as a whole; every error names the key, the bad value
and where it came from (FILE:LINE, --flag or $DOCKER_HOST). On SIGHUP the
daemon reads the file again and applies the same flags over it; if the file
has an error the running configuration is kept.

Each flag sets the config-file key in brackets.`,
		More: `Config file:
  YAML, one key per flag, with the key names in brackets above. Any key may
  be left out and keeps its default; an unknown key or a value of the wrong
  type is an error. Lists are YAML lists; sizes are bytes, as a plain
  integer or with a unit (4k, 8MiB, 1GiB are powers of 1024; 100MB is
  10^8); durations need a unit (500ms, 1s, 2m). For example:

    source: cgroup
    cgroup_parent: /lxc.payload
    interval: 500ms
    thresholds: [4MiB, 16MiB, 64MiB, 256MiB]
    weights: [1000, 500, 250, 100]
    devices: ["sd*", "nvme0n1"]
    listen: ""                     # no HTTP API
    paths: {sys: /host/sys, proc: /host/proc}
    log: {level: debug, format: json}

  The reference file, every key documented with its default, is
  internal/config/default.yaml in the ddiskqos source.`,
		Examples: `  Docker host: containers of the engine at $DOCKER_HOST, else
  /var/run/docker.sock:
    ddiskqos run
    ddiskqos run --dry-run --log-level debug      # watch the levels first

  LXC host (every container is a child of /lxc.payload):
    ddiskqos run --source cgroup --cgroup-parent /lxc.payload

  systemd host (every service is a workload), journald left alone and
  the database pinned at level 1:
    ddiskqos run --source cgroup --cgroup-parent /system.slice \
      --cgroup-exempt 'systemd-journald.service' --cgroup-levels 'postgresql*=1'

  Kubernetes node (every container of every pod; the layout is found from
  the name kubepods.slice), Guaranteed pods left alone:
    ddiskqos run --source cgroup --cgroup-parent /kubepods.slice \
      --cgroup-exempt-guaranteed

  A config file, with one key overridden for this run:
    ddiskqos run --config /etc/ddiskqos/config.yaml --interval 500ms`,
		Exit: `  0  stopped by SIGTERM or SIGINT, every value ddiskqos changed restored
  1  a runtime failure (the start refused, or a restore that failed: logged)
  2  a usage error (bad flag, config key or value): nothing touched
  3  an internal error (a panic of the daemon loop, logged with its stack):
     every value it changed restored before the exit`,
	},
	Flags: func(o *runOptions, f *cli.FlagSet) {
		o.fs = f.Std()
		def := config.Default()
		def.RegisterFlags(f.Registrar())
		f.Describe("config", cli.Files)
		f.Describe("state-file", cli.Files)
		f.Describe("path-sys", cli.Dirs)
		f.Describe("path-proc", cli.Dirs)
		f.Describe("devices", cli.Devices)
		f.Describe("log-level", cli.Values("debug", "info", "warn", "error"))
	},
}

// exitPanic is run's exit status after a panic of the daemon loop (Go's
// own exit status for a panic is 2, the usage error's).
const exitPanic = 3

// runDaemon is `ddiskqos run`: the daemon. Exit 0 after a clean shutdown
// (originals restored), 1 on a runtime failure, 2 on a usage error, 3
// after a panic of the loop (originals restored).
func runDaemon(args []string, stdout, stderr io.Writer) int {
	// A log write to a closed pipe (run under "| tee", the tee gone with
	// the Ctrl-C) must fail that write, not kill the daemon with SIGPIPE
	// before it restores: ignored, a write to stdout or stderr returns
	// EPIPE, which the log handler drops.
	signal.Ignore(syscall.SIGPIPE)
	o, _, code, ok := runCmd.Parse(args, stdout, stderr)
	if !ok {
		return code
	}
	fs := o.fs
	cfg, err := config.FromFlags(fs)
	if err != nil {
		return cli.Usagef(stderr, "ddiskqos run", "%v", err)
	}
	level := new(slog.LevelVar) // SIGHUP may change it
	level.Set(cfg.Log.SlogLevel())
	log := newLogger(cfg, level, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serveDaemon(ctx, cfg, fs, log, level); err != nil {
		log.Error("ddiskqos stopped", "err", err)
		if pe := (*daemon.PanicError)(nil); errors.As(err, &pe) {
			return exitPanic
		}
		return 1
	}
	return 0
}

func newLogger(cfg config.Config, level slog.Leveler, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serveDaemon sets up and runs the daemon until ctx ends.
//
// Everything that can refuse the start comes before the first tick, which
// is the first write to a cgroup: the host lock (a second daemon would
// restore or adopt the first one's values), the API's port, the state file
// (daemon.New). A run that fails to start touches nothing.
func serveDaemon(ctx context.Context, cfg config.Config, fs *flag.FlagSet, log *slog.Logger, level *slog.LevelVar) error {
	lock, err := hostlock.Acquire(hostlock.Path())
	if err != nil {
		return err
	}
	defer lock.Release() // after Run has restored every original
	if cfg.Listen != "" {
		// api.Serve listens once the loop runs; a port already taken must
		// stop the start before the loop writes anything.
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return fmt.Errorf("api: listen on %s: %w", cfg.Listen, err)
		}
		ln.Close()
	}
	roots := host.Roots{Sys: cfg.Paths.Sys, Proc: cfg.Paths.Proc}
	hst, err := wiring.ReadHost(roots, cfg.Devices, log)
	if err != nil {
		return err
	}
	layout, h := hst.Layout, hst.Hierarchy
	src, srcName, err := newSource(ctx, cfg, layout, h, log)
	if err != nil {
		return err
	}
	opts := wiring.Options(cfg, hst, src, log)
	if cfg.Actuator == config.ActuatorDocker {
		cli, err := dockerClient(cfg)
		if err != nil {
			return err
		}
		defer cli.Close()
		opts.NewActuator = func(ac actuate.Config, adopted []actuate.Original) (daemon.Actuator, error) {
			return actuate.NewDocker(ac, cli, adopted)
		}
	}
	reg := prometheus.NewRegistry()
	var d *daemon.Daemon
	m, err := metrics.New(reg, func() *snapshot.Snapshot { return d.Snapshot() })
	if err != nil {
		return err
	}
	if err := metrics.RegisterBuildInfo(reg, buildinfo.Read()); err != nil {
		return err
	}
	opts.Observer = m
	// A source that can lose its backend (the Docker engine) reports it on
	// /healthz and /metrics.
	var checks []api.HealthCheck
	if ds, ok := src.(*dockersrc.Source); ok {
		checks = append(checks, ds.Health)
		if err := metrics.WatchSource(reg, ds.Name(), ds.Errors, func() bool { return ds.Health() == "" }); err != nil {
			return err
		}
	}
	if d, err = daemon.New(opts); err != nil {
		return err
	}
	log.Info("ddiskqos starting", "source", srcName, "cgroup_mode", layout.Mode, "hierarchy", h.Mount,
		"actuator", cfg.Actuator, "devices", len(hst.Devices.Actuated), "interval", cfg.Interval, "dry_run", cfg.DryRun,
		"listen", cfg.Listen, "state_file", cfg.StateFile)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	apiDone := make(chan error, 1)
	if cfg.Listen != "" {
		go func() { apiDone <- api.Serve(ctx, cfg.Listen, api.NewHandler(d.Snapshot, reg, log, checks...), log) }()
	}
	go reloadOnHUP(ctx, d, cfg, fs, log, level)

	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(ctx) }()
	select {
	case err := <-runErr:
		return err
	case err := <-apiDone:
		// The API could not listen: stop the loop, which restores originals.
		cancel()
		return errors.Join(err, <-runErr)
	}
}

// reloadOnHUP re-reads the configuration on SIGHUP and applies its live
// keys (config.Diff): the policy's and the interval through the loop, the
// log level at once. Keys that need a restart are named and keep their
// running values.
func reloadOnHUP(ctx context.Context, d *daemon.Daemon, cur config.Config, fs *flag.FlagSet, log *slog.Logger, level *slog.LevelVar) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		path := config.ConfigPath(fs)
		next, err := config.Reload(path, fs)
		if err != nil {
			log.Error("reload refused, keeping the running configuration", "file", path, "err", err)
			continue
		}
		live, restart := config.Diff(cur, next)
		if len(restart) > 0 {
			log.Warn("reload: these settings need a restart and were not applied", "keys", strings.Join(restart, ","))
		}
		if err := d.Reconfigure(next.Policy()); err != nil {
			log.Error("reload refused", "err", err)
			continue
		}
		if err := d.SetInterval(next.Interval); err != nil {
			log.Error("reload refused", "err", err)
			continue
		}
		// Logged before the level changes, so it shows also when the new
		// level hides INFO.
		log.Info("reloaded configuration", "file", path, "applied", strings.Join(live, ","))
		level.Set(next.Log.SlogLevel())
		cur = config.ApplyLive(cur, next)
	}
}

func dockerClient(cfg config.Config) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv}
	if cfg.DockerHost != "" {
		opts = append(opts, client.WithHost(cfg.DockerHost))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client for %s: %w", cfg.DockerHost, err)
	}
	// Negotiate the API version now, before the event stream and other
	// calls share the client; an engine that is down is no error here (the
	// client negotiates on its first request instead).
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	return cli, nil
}

// newSource builds the workload source; "auto" is docker when the engine
// answers.
func newSource(ctx context.Context, cfg config.Config, layout cgroupfs.Layout, h cgroupfs.Hierarchy, log *slog.Logger) (source.Source, string, error) {
	kind := cfg.Source
	if kind == config.SourceAuto {
		cli, err := dockerClient(cfg)
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, err = cli.Ping(pctx, client.PingOptions{})
			cancel()
			cli.Close()
		}
		if err != nil {
			return nil, "", fmt.Errorf("--source auto: the Docker engine does not answer (%v); --source docker waits for it (degraded on /healthz meanwhile); for LXC, systemd or Kubernetes hosts use --source cgroup --cgroup-parent PATH", err)
		}
		kind = config.SourceDocker
	}
	switch kind {
	case config.SourceDocker:
		cli, err := dockerClient(cfg)
		if err != nil {
			return nil, "", err
		}
		s, err := dockersrc.New(dockersrc.Options{Engine: cli, Layout: layout, ProcFS: cfg.Paths.Proc, Logger: log})
		if err != nil {
			return nil, "", err
		}
		return s, s.Name(), nil
	case config.SourceCgroup:
		parent, err := cgroupdir.ParentPath(h, cfg.CgroupParent) // also /sys/fs/cgroup/blkio/x
		if err != nil {
			return nil, "", fmt.Errorf("--cgroup-parent: %w", err)
		}
		dir, err := h.Path(parent)
		if err != nil {
			return nil, "", fmt.Errorf("--cgroup-parent %s: %w", cfg.CgroupParent, err)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, "", fmt.Errorf("--cgroup-parent %s: %s is not a cgroup directory of the %s hierarchy at %s",
				cfg.CgroupParent, dir, map[int]string{1: "v1 blkio", 2: "cgroup v2"}[h.Version], h.Mount)
		}
		var pins []cgroupdir.LevelGlob
		for _, p := range cfg.CgroupPins() {
			pins = append(pins, cgroupdir.LevelGlob{Glob: p.Glob, Level: p.Level})
		}
		s, err := cgroupdir.New(cgroupdir.Options{Hierarchy: h, Parent: parent, Layout: cgroupdir.Layout(cfg.CgroupLayout),
			Exempt: cfg.CgroupExempt, Levels: pins, ExemptGuaranteed: cfg.CgroupExemptGuaranteed, Logger: log})
		if err != nil {
			return nil, "", err
		}
		return s, s.Name(), nil
	}
	return nil, "", fmt.Errorf("source %q: want auto, docker or cgroup", kind)
}

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

	"github.com/ddiskqos/ddiskqos/internal/api"
	"github.com/ddiskqos/ddiskqos/internal/app"
	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/daemon"
	"github.com/ddiskqos/ddiskqos/internal/hostlock"
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
    cgroup_parent: /system.slice
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

  LXC host (LXC 5: every container is /lxc.payload.NAME, named NAME):
    ddiskqos run --source cgroup --cgroup-layout lxc

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
	gogc, _ := app.SetGCPercent(os.Getenv)
	pl, err := app.Build(ctx, app.Params{Config: cfg, Logger: log})
	if err != nil {
		return err
	}
	defer pl.Close() // after Run returned
	d, hst := pl.Daemon, pl.Host
	log.Info("ddiskqos starting", "source", pl.Source.Name(), "cgroup_mode", hst.Layout.Mode, "hierarchy", hst.Hierarchy.Mount,
		"actuator", cfg.Actuator, "devices", len(hst.Devices.Actuated), "interval", cfg.Interval, "dry_run", cfg.DryRun,
		"listen", cfg.Listen, "state_file", cfg.StateFile, "gogc", gogc)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	apiDone := make(chan error, 1)
	if cfg.Listen != "" {
		go func() { apiDone <- api.Serve(ctx, cfg.Listen, pl.Handler(), log) }()
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

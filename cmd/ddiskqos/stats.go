package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/api"
	"github.com/ddiskqos/ddiskqos/internal/app"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	dockersrc "github.com/ddiskqos/ddiskqos/internal/source/docker"
	"github.com/ddiskqos/ddiskqos/internal/stats"
	"github.com/ddiskqos/ddiskqos/internal/view"
)

// statsOptions are the flags of "ddiskqos stats".
type statsOptions struct {
	json, watch           bool
	interval              time.Duration
	count                 int
	dockerHost, proc, sys string
	addr                  string
}

var statsCmd = &cli.Cmd[statsOptions]{
	Info: cli.Info{
		Name: "stats", Args: "CONTAINER|CGROUP...", ArgsComplete: cli.Containers,
		Summary: "what the kernel counts for each container or cgroup: CPU, memory, I/O per disk, pids, network; its I/O latency from the daemon",
		Description: `What the kernel counts for each container or cgroup, read straight from
the cgroup tree (no daemon needed), cgroup v1 and v2 alike:

  CPU     time used, user and system; CFS throttling (periods throttled,
          time throttled); on v2 CPU pressure
  MEMORY  usage, peak, limit, page cache, anonymous memory, page faults
          (all, major), OOM kills; on v2 memory pressure
  PIDS    tasks, limit
  IO      per disk: bytes and operations read and written; on v2 I/O
          pressure (PSI "some" and "full": share of time tasks stalled)
  NET     per interface of the network namespace the cgroup's tasks are
          in, read from /proc/PID/net/dev of one of them (no namespace is
          entered); "host" when that is the host's own namespace

An argument that starts with "/" is a cgroup: its path as
/proc/PID/cgroup shows it (/docker/ID, /system.slice/x.service), or its
directory under a cgroup mount (/sys/fs/cgroup/memory/x). Any other
argument is a Docker container, by name or (a prefix of its) id, asked of
the engine at --docker-host; its cgroup is found as "ddiskqos run" finds it.

Per-request I/O latency is not in the kernel's counters: the running
daemon measures it (eBPF). When its API answers at --addr, each workload
it manages gets a LATENCY section: per disk, read and write p50/p99 of the
daemon's last tick and the requests in flight; otherwise the section says
why there is none (no daemon, its sensor off or unavailable, not one of
its workloads). --addr off asks no daemon.

Values the kernel does not provide here (a controller not mounted, PSI on
v1, a file of a newer kernel) are listed as missing, never shown as 0.

With --watch (or --interval) a reading is printed every interval, with
the rates since the previous one: CPU % of one CPU, bytes and operations
per second, network bytes per second (loopback left out), faults per
second. What is missing and the notes are printed with the first reading.`,
		Examples: `  ddiskqos stats web db                       # two containers, by name
  ddiskqos stats /system.slice/docker.service
  ddiskqos stats --watch --interval 2s web    # a reading every 2 s, with rates
  # One JSON object per cgroup per reading:
  ddiskqos stats --json web | jq .io.devices`,
		Exit: `  0  printed
  1  a container or cgroup was not found, or the Docker engine did not answer
  2  usage error`,
	},
	Flags: func(o *statsOptions, f *cli.FlagSet) {
		f.BoolVar(&o.json, "json", "print one JSON object per cgroup per reading, one per line, instead of tables")
		f.BoolVar(&o.watch, "watch", "print a reading every --interval, with rates, until interrupted (or --count readings)")
		f.DurationVar(&o.interval, "interval", time.Second, "DUR", "time between readings; setting it implies --watch")
		f.OnSet("interval", func() { o.watch = true })
		f.IntVar(&o.count, "count", 0, "N", "with --watch: stop after this many readings (0: until interrupted)")
		f.StringVar(&o.dockerHost, "docker-host", "", "URL", "Docker engine that names containers: unix:///path or tcp://host:port (default $DOCKER_HOST, else the local socket)")
		f.StringVar(&o.proc, "path-proc", "/proc", "PATH", "procfs root: the mount table, tasks' network counters", cli.Dirs)
		f.Alias("proc", "path-proc")
		f.StringVar(&o.sys, "path-sys", "/sys", "PATH", "sysfs root: block device names", cli.Dirs)
		f.Alias("sys", "path-sys")
		f.StringVar(&o.addr, "addr", api.DefaultAddr, "HOST:PORT", "the daemon's API, asked for each cgroup's I/O latency (what \"ddiskqos run --listen\" was given); off: ask no daemon")
	},
}

// runStats is `ddiskqos stats`.
func runStats(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return statsMain(ctx, args, stdout, stderr)
}

func statsMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, names, code, ok := statsCmd.Parse(args, stdout, stderr)
	if !ok {
		return code
	}
	bad := func(format string, a ...any) int { return cli.Usagef(stderr, "ddiskqos stats", format, a...) }
	if len(names) == 0 {
		return bad("name at least one container or cgroup")
	}
	if o.interval <= 0 {
		return bad("--interval %s: want a positive duration", o.interval)
	}
	if o.count < 0 {
		return bad("--count %d: want 0 (no end) or more", o.count)
	}
	if o.count > 0 && !o.watch {
		return bad("--count %d: only with --watch", o.count)
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ddiskqos stats: "+format+"\n", a...)
		return 1
	}

	layout, err := cgroupfs.DetectLayout(filepath.Join(o.proc, "self", "mountinfo"))
	if err != nil {
		return fail("%v", err)
	}
	var daemon *api.Client
	if o.addr != "off" && o.addr != "" {
		if daemon, err = api.NewClient(o.addr); err != nil {
			return bad("--addr %q: %v", o.addr, err)
		}
	}
	r := &stats.Reader{Layout: layout, ProcFS: o.proc, SysFS: o.sys}
	targets, err := statsTargets(ctx, r, names, o.dockerHost, o.proc)
	if err != nil {
		return fail("%v", err)
	}

	prev := make([]*stats.Stats, len(targets))
	var tick *time.Ticker
	if o.watch {
		tick = time.NewTicker(o.interval)
		defer tick.Stop()
	}
	for n := 1; ; n++ {
		var snap *snapshot.Snapshot
		var snapErr error
		if daemon != nil {
			qctx, cancel := context.WithTimeout(ctx, daemonWait)
			snap, snapErr = daemon.Workloads(qctx, nil)
			cancel()
		}
		cur := make([]*stats.Stats, len(targets))
		for i, t := range targets {
			s, err := r.Read(t)
			if err != nil {
				if t.ID != "" {
					return fail("container %s (%s): %v", view.Cell(t.Name), view.ShortID(t.ID), err)
				}
				return fail("%v", err)
			}
			stats.Rate(prev[i], s)
			if daemon != nil {
				s.Latency = stats.LatencyOf(t, snap, snapErr, o.addr)
			}
			cur[i] = s
		}
		if err := view.Stats(stdout, cur, o.json, o.watch, n == 1); err != nil {
			return fail("%v", err)
		}
		prev = cur
		if !o.watch || (o.count > 0 && n >= o.count) {
			return 0
		}
		select {
		case <-ctx.Done():
			return 0
		case <-tick.C:
		}
	}
}

// daemonWait is how long stats waits for the daemon's answer, each reading.
const daemonWait = 2 * time.Second

// statsTargets resolves the arguments: cgroup paths as they are, containers
// through the Docker engine.
func statsTargets(ctx context.Context, r *stats.Reader, args []string, dockerHost, proc string) ([]stats.Target, error) {
	var out []stats.Target
	var src *dockersrc.Source
	for _, a := range args {
		if strings.HasPrefix(a, "/") {
			rel := r.CgroupPath(a)
			out = append(out, stats.Target{Name: a, Cgroup: rel})
			continue
		}
		if src == nil {
			cli, err := app.DockerClient(dockerHost)
			if err != nil {
				return nil, fmt.Errorf("container %q: %w", a, err)
			}
			defer cli.Close()
			if src, err = dockersrc.New(dockersrc.Options{Engine: cli, Layout: r.Layout, ProcFS: proc}); err != nil {
				return nil, fmt.Errorf("container %q: %w", a, err)
			}
		}
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		wl, err := src.Lookup(lctx, a)
		cancel()
		if err != nil {
			if errors.Is(err, dockersrc.ErrNoContainer) {
				return nil, fmt.Errorf("%w (a cgroup path starts with /)", err)
			}
			return nil, err
		}
		out = append(out, stats.Target{Name: wl.Name, ID: wl.ID, Cgroup: wl.Cgroup, Pid: wl.Pid})
	}
	return out, nil
}

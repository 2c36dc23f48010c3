package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/app"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/cli"
	dockersrc "github.com/ddiskqos/ddiskqos/internal/source/docker"
	"github.com/ddiskqos/ddiskqos/internal/stats"
)

// statsOptions are the flags of "ddiskqos stats".
type statsOptions struct {
	json, watch           bool
	interval              time.Duration
	count                 int
	dockerHost, proc, sys string
}

var statsCmd = &cli.Cmd[statsOptions]{
	Info: cli.Info{
		Name: "stats", Args: "CONTAINER|CGROUP...", ArgsComplete: cli.Containers,
		Summary: "what the kernel counts for each container or cgroup: CPU, memory, I/O per disk, pids, network",
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
		cur := make([]*stats.Stats, len(targets))
		for i, t := range targets {
			s, err := r.Read(t)
			if err != nil {
				if t.ID != "" {
					return fail("container %s (%s): %v", statusCell(t.Name), shortID(t.ID), err)
				}
				return fail("%v", err)
			}
			stats.Rate(prev[i], s)
			cur[i] = s
		}
		if err := writeStats(stdout, cur, o.json, o.watch, n == 1); err != nil {
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

// writeStats prints one reading of every target.
func writeStats(w io.Writer, ss []*stats.Stats, asJSON, watch, first bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, s := range ss {
			if err := enc.Encode(s); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if watch {
		fmt.Fprintf(tw, "--- %s\n", ss[0].Time.Format("15:04:05.000"))
	}
	for i, s := range ss {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		writeOneStats(tw, s, !watch || first)
	}
	return tw.Flush()
}

func writeOneStats(w io.Writer, s *stats.Stats, notes bool) {
	head := statusCell(s.Name)
	if s.ID != "" {
		head += "  container " + shortID(s.ID)
	}
	if s.Cgroup != s.Name {
		head += "  cgroup " + statusCell(s.Cgroup)
	}
	fmt.Fprintf(w, "%s  (cgroup v%d)\n", head, s.CgroupVersion)
	if r := s.Rates; r != nil {
		fmt.Fprintf(w, "  RATES\tcpu %.1f%%, throttled %.0f%% of periods;  read %s/s, %.0f ops/s;  write %s/s, %.0f ops/s;  net rx %s/s, tx %s/s;  faults %.0f/s\n",
			r.CPUPercent, r.CPUThrottledPercent,
			humanBytes(rate(r.ReadBps)), r.ReadIOPS, humanBytes(rate(r.WriteBps)), r.WriteIOPS,
			humanBytes(rate(r.RxBps)), humanBytes(rate(r.TxBps)), r.PgFaultsPerSec)
	}
	if c := s.CPU; c != nil {
		line := fmt.Sprintf("used %s (user %s, system %s)", nsText(c.UsageNs), nsText(c.UserNs), nsText(c.SystemNs))
		if t := c.Throttling; t != nil {
			line += fmt.Sprintf(";  throttled %d of %d periods, %s", t.Throttled, t.Periods, nsText(t.ThrottledNs))
		}
		fmt.Fprintf(w, "  CPU\t%s%s\n", line, pressureText(c.Pressure))
	}
	if m := s.Memory; m != nil {
		fmt.Fprintf(w, "  MEMORY\tusage %s, peak %s, limit %s;  cache %s, anon %s;  faults %d (major %d), oom kills %d%s\n",
			humanBytes(m.UsageBytes), orNone(m.PeakBytes, humanBytes), orNone(m.LimitBytes, humanBytes),
			humanBytes(m.CacheBytes), humanBytes(m.AnonBytes), m.PgFault, m.PgMajFault, m.OOMKills, pressureText(m.Pressure))
	}
	if p := s.Pids; p != nil {
		fmt.Fprintf(w, "  PIDS\t%d, limit %s\n", p.Current, orNone(p.Limit, func(n uint64) string { return strconv.FormatUint(n, 10) }))
	}
	if io := s.IO; io != nil {
		fmt.Fprintf(w, "  IO\t%s%s\n", io.File, pressureText(io.Pressure))
		shown := 0
		for _, d := range io.Devices {
			if d.ReadBytes == 0 && d.WriteBytes == 0 && d.ReadOps == 0 && d.WriteOps == 0 {
				continue // a v1 row of a disk this cgroup never used
			}
			if shown == 0 {
				fmt.Fprintf(w, "\tDEVICE\tREAD\tWRITE\tREAD-OPS\tWRITE-OPS\n")
			}
			shown++
			name := d.Dev
			if d.Name != "" {
				name = d.Name + " " + d.Dev
			}
			if len(d.Lowers) > 0 {
				name += " (over " + strings.Join(d.Lowers, ",") + ")"
			}
			fmt.Fprintf(w, "\t%s\t%s\t%s\t%d\t%d\n", name, humanBytes(d.ReadBytes), humanBytes(d.WriteBytes), d.ReadOps, d.WriteOps)
		}
		if shown == 0 {
			fmt.Fprintf(w, "\tno I/O counted on any disk\n")
		}
	}
	if n := s.Net; n != nil {
		var ns string
		switch n.SharedWith {
		case "":
			ns = "a namespace of its own"
		case "pid 1":
			ns = "the host's namespace (pid 1's): the host's interfaces"
		case "reader":
			ns = "the namespace ddiskqos runs in: the host's interfaces, unless ddiskqos runs in a container"
		default:
			ns = "not compared with the host's"
		}
		fmt.Fprintf(w, "  NET\tpid %d, %s (%s)\n", n.Pid, orDash(n.Netns), ns)
		fmt.Fprintf(w, "\tIFACE\tRX\tRX-PKTS\tTX\tTX-PKTS\tERRORS\tDROPPED\n")
		for _, i := range n.Interfaces {
			fmt.Fprintf(w, "\t%s\t%s\t%d\t%s\t%d\t%d\t%d\n", statusCell(i.Name), humanBytes(i.RxBytes), i.RxPackets,
				humanBytes(i.TxBytes), i.TxPackets, i.RxErrors+i.TxErrors, i.RxDropped+i.TxDropped)
		}
	}
	if notes {
		for _, m := range s.Missing {
			fmt.Fprintf(w, "  missing: %s\n", statusCell(m))
		}
		for _, m := range s.Notes {
			fmt.Fprintf(w, "  note: %s\n", statusCell(m))
		}
	}
}

// nsText is a duration in nanoseconds, to the millisecond.
func nsText(ns uint64) string {
	return time.Duration(min(ns, 1<<63-1)).Round(time.Millisecond).String()
}

// orNone is "none" for 0, else f(n).
func orNone(n uint64, f func(uint64) string) string {
	if n == 0 {
		return "none"
	}
	return f(n)
}

// pressureText is ", pressure some X% full Y%" from the 10 s averages.
func pressureText(p *stats.Pressure) string {
	if p == nil {
		return ""
	}
	s := fmt.Sprintf(";  pressure some %.2f%%", p.Some.Avg10)
	if p.Full != nil {
		s += fmt.Sprintf(" full %.2f%%", p.Full.Avg10)
	}
	return s + " (avg10), stalled " + time.Duration(min(p.Some.TotalUs, (1<<63-1)/1000)*1000).Round(time.Millisecond).String()
}

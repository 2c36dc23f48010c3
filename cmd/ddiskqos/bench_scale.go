package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/bench/scale"
	"github.com/ddiskqos/ddiskqos/internal/cli"
)

// benchScaleOptions are the flags of "ddiskqos bench scale".
type benchScaleOptions struct {
	scale.Config
	json                        bool
	out, cpuprofile, memprofile string
}

var benchScaleCmd = &cli.Cmd[benchScaleOptions]{
	Info: cli.Info{
		Parent: "bench", Name: "scale",
		Summary: "N real cgroups (1,000 to 10,000) under the daemon: CPU, wall time, allocations and RSS per tick, scan and churn costs, /metrics time",
		Description: `Measure what the daemon costs with N workloads (--workloads is required):
create N real cgroups under a parent of the bench's own (cgroup v1 blkio or
v2, whatever this host's I/O hierarchy is), have a fraction of them read
from a loop device the bench attaches, run the daemon in this process with
the cgroup source on them, and report per tick its CPU (user+sys of this
process; the readers are child processes and do not count), wall time and
allocations, its RSS, the first full scan, the scan after churn, and
/metrics. Everything created is removed at the end, also on failure and
Ctrl-C. Needs root.`,
		Examples: `  ddiskqos bench scale --workloads 1000 --duration 30s
  ddiskqos bench scale --workloads 10000 --out scale.json \
      --cpuprofile cpu.pprof`,
	},
	Flags: func(o *benchScaleOptions, f *cli.FlagSet) {
		c := &o.Config
		f.IntVar(&c.Workloads, "workloads", 0, "N", "cgroups to create (required)")
		f.DurationVar(&c.Duration, "duration", 60*time.Second, "DUR", "the measured steady window")
		f.DurationVar(&c.Warmup, "warmup", 10*time.Second, "DUR", "after the first full scan, before the window")
		f.DurationVar(&c.Interval, "interval", time.Second, "DUR", "the daemon's tick")
		f.Float64Var(&c.IOFraction, "io-fraction", 0.01, "F", "share of the workloads that read from the loop device, O_DIRECT, 64 KiB at a time")
		f.Int64Var(&c.ReadRate, "read-rate", 1<<20, "BYTES", "each reader's cap, bytes/s")
		f.Float64Var(&c.Churn, "churn", 0.1, "F", "after the window, remove this share of the idle workloads and create as many")
		f.StringVar(&c.ScratchDir, "scratch", "/var/tmp", "DIR", "where the loop device's backing file goes; not tmpfs", cli.Dirs)
		f.BoolVar(&o.json, "json", "print the result as JSON")
		f.StringVar(&o.out, "out", "", "FILE", "also write the JSON result to FILE", cli.Files)
		f.StringVar(&o.cpuprofile, "cpuprofile", "", "FILE", "write a pprof CPU profile of the steady window", cli.Files)
		f.StringVar(&o.memprofile, "memprofile", "", "FILE", "write a pprof heap profile at the end of the window (and one at its start to FILE.start: the window's allocations are pprof -base FILE.start FILE)", cli.Files)
	},
}

// runBenchScale is "ddiskqos bench scale".
func runBenchScale(args []string, stdout, stderr io.Writer) int {
	o, _, code, ok := benchScaleCmd.Parse(args, stdout, stderr)
	if !ok {
		return code
	}
	c := o.Config
	usage := func(format string, a ...any) int { return cli.Usagef(stderr, "ddiskqos bench scale", format, a...) }
	if c.Workloads <= 0 {
		return usage("--workloads %d: want at least 1", c.Workloads)
	}
	if c.IOFraction < 0 || c.IOFraction > 1 || c.Churn < 0 || c.Churn > 1 {
		return usage("--io-fraction %g, --churn %g: want 0..1", c.IOFraction, c.Churn)
	}
	if c.Interval <= 0 || c.Duration < 2*c.Interval || c.Warmup < 0 {
		return usage("--interval %s, --duration %s, --warmup %s: want a positive interval and a duration of two intervals or more",
			c.Interval, c.Duration, c.Warmup)
	}
	c.Log = stderr
	var err error
	if c.LoadExe, c.LoadArgs, err = benchLoadExe(); err != nil {
		fmt.Fprintf(stderr, "ddiskqos bench scale: %v\n", err)
		return 1
	}
	profile, memprof, out, asJSON := o.cpuprofile, o.memprofile, o.out, o.json

	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			fmt.Fprintf(stderr, "ddiskqos bench scale: %v\n", err)
			return 1
		}
		defer f.Close()
		c.CPUProfile = f
	}
	if memprof != "" {
		f, err := os.Create(memprof)
		if err != nil {
			fmt.Fprintf(stderr, "ddiskqos bench scale: %v\n", err)
			return 1
		}
		defer f.Close()
		c.HeapProfile = f
		fs, err := os.Create(memprof + ".start")
		if err != nil {
			fmt.Fprintf(stderr, "ddiskqos bench scale: %v\n", err)
			return 1
		}
		defer fs.Close()
		c.HeapProfileStart = fs
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := scale.Run(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "ddiskqos bench scale: %v\n", err)
		return 1
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "ddiskqos bench scale: %v\n", err)
		return 1
	}
	js = append(js, '\n')
	if out != "" {
		if err := os.WriteFile(out, js, 0o644); err != nil {
			fmt.Fprintf(stderr, "ddiskqos bench scale: %v\n", err)
			return 1
		}
	}
	if asJSON {
		stdout.Write(js)
		return 0
	}
	printScale(stdout, res)
	return 0
}

// printScale writes the result for a person.
func printScale(w io.Writer, r scale.Result) {
	ok := func(b bool) string {
		if b {
			return "ok"
		}
		return "MISSED"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ddiskqos bench scale: %d workloads (%d reading) on cgroup %s, %s (%s), interval %s\n",
		r.Workloads, r.IOWorkloads, r.Cgroup, r.Device, r.Mechanism, r.Interval)
	fmt.Fprintf(&b, "host: %s, %d CPUs, %d MiB, kernel %s, %s\n", r.Host.CPU, r.Host.CPUs, r.Host.MemMiB, r.Host.Kernel, r.Host.Go)
	fmt.Fprintf(&b, "cpu per tick     %8.2f ms mean  %8.2f p50  %8.2f p95  %8.2f max  (user %.2f, sys %.2f; %.2f %% of one core)  bar %.0f ms: %s\n",
		r.CPUPerTickMS.Mean, r.CPUPerTickMS.P50, r.CPUPerTickMS.P95, r.CPUPerTickMS.Max, r.UserPerTickMS, r.SysPerTickMS, r.CPUPercent,
		r.Bar.CPUPerTickMS, ok(r.Bar.CPUOK))
	fmt.Fprintf(&b, "wall per tick    %8.2f ms mean  %8.2f p50  %8.2f p95  %8.2f max\n",
		r.WallPerTickMS.Mean, r.WallPerTickMS.P50, r.WallPerTickMS.P95, r.WallPerTickMS.Max)
	fmt.Fprintf(&b, "reads per tick   %8.0f    read calls per tick %.0f    allocations per tick %.0f (%.0f KiB)    ticks %d\n",
		r.ReadsPerTick, r.ReadCallsPerTick, r.AllocsPerTick, r.AllocKBPerTick, r.Ticks)
	fmt.Fprintf(&b, "rss              %8.1f MiB (peak %.1f, heap %.1f)  bar %.0f MiB: %s    open fds %d (limit %d/%d)\n",
		r.RSSMiB, r.RSSPeakMiB, r.HeapMiB, r.Bar.RSSMiB, ok(r.Bar.RSSOK), r.OpenFDs, r.NoFile.Soft, r.NoFile.Hard)
	fmt.Fprintf(&b, "first full scan  %8.0f ms wall, %.0f ms CPU, %d ticks (longest %.1f ms)\n",
		r.FirstScan.WallMS, r.FirstScan.CPUMS, r.FirstScan.Ticks, r.FirstScan.TickMaxMS)
	fmt.Fprintf(&b, "after churn      %8.0f ms wall, %.0f ms CPU, %d ticks (longest %.1f ms): -%d +%d\n",
		r.Churn.WallMS, r.Churn.CPUMS, r.Churn.Ticks, r.Churn.TickMaxMS, r.Churn.Removed, r.Churn.Added)
	fmt.Fprintf(&b, "/metrics         %8.1f ms wall, %.1f ms CPU plain (%d B, %d samples); %.1f ms wall, %.1f ms CPU gzip (%d B)  bar %.0f ms: %s\n",
		r.MetricsPlain.WallMS, r.MetricsPlain.CPUMS, r.MetricsPlain.Bytes, r.Series, r.MetricsGzip.WallMS, r.MetricsGzip.CPUMS,
		r.MetricsGzip.Bytes, r.Bar.MetricsMS, ok(r.Bar.MetricsOK))
	fmt.Fprintf(&b, "/v1/workloads    %8.1f ms wall, %.1f ms CPU (%d B)\n", r.WorkloadsJSON.WallMS, r.WorkloadsJSON.CPUMS, r.WorkloadsJSON.Bytes)
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "errors           %s: %d\n", e.Cause, e.Count)
	}
	io.WriteString(w, b.String())
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/bench/scale"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

const benchScaleHelp = `Usage: ddiskqos bench scale --workloads N [flags]

Measure what the daemon costs with N workloads: create N real cgroups under
a parent of the bench's own (cgroup v1 blkio or v2, whatever this host's I/O
hierarchy is), have a fraction of them read from a loop device the bench
attaches, run the daemon in this process with the cgroup source on them,
and report per tick its CPU (user+sys of this process; the readers are
child processes and do not count), wall time and allocations, its RSS, the
first full scan, the scan after churn, and /metrics. Everything created is
removed at the end, also on failure and Ctrl-C. Needs root.

Flags:
  --workloads N      cgroups to create (required)
  --duration D       the measured steady window (default 60s)
  --warmup D         after the first full scan, before the window (default 10s)
  --interval D       the daemon's tick (default 1s)
  --io-fraction F    share of the workloads that read from the loop device,
                     O_DIRECT, 64 KiB at a time (default 0.01)
  --read-rate BYTES  each reader's cap, bytes/s (default 1048576)
  --churn F          after the window, remove this share of the idle
                     workloads and create as many (default 0.1)
  --scratch DIR      where the loop device's backing file goes; not tmpfs
                     (default /var/tmp)
  --json             print the result as JSON
  --out FILE         also write the JSON result to FILE
  --cpuprofile FILE  write a pprof CPU profile of the steady window
  --memprofile FILE  write a pprof heap profile at the end of the window
  -h, --help         show this help

Exit status: 0 done, 1 failure, 2 usage error.
`

// runBenchScale is "ddiskqos bench scale".
func runBenchScale(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ddiskqos bench scale", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		c        scale.Config
		asJSON   bool
		out      string
		readRate int64
		profile  string
		memprof  string
	)
	fs.IntVar(&c.Workloads, "workloads", 0, "")
	fs.DurationVar(&c.Duration, "duration", 60*time.Second, "")
	fs.DurationVar(&c.Warmup, "warmup", 10*time.Second, "")
	fs.DurationVar(&c.Interval, "interval", time.Second, "")
	fs.Float64Var(&c.IOFraction, "io-fraction", 0.01, "")
	fs.Int64Var(&readRate, "read-rate", 1<<20, "")
	fs.Float64Var(&c.Churn, "churn", 0.1, "")
	fs.StringVar(&c.ScratchDir, "scratch", "/var/tmp", "")
	fs.BoolVar(&asJSON, "json", false, "")
	fs.StringVar(&out, "out", "", "")
	fs.StringVar(&profile, "cpuprofile", "", "")
	fs.StringVar(&memprof, "memprofile", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, benchScaleHelp)
			return 0
		}
		fmt.Fprintf(stderr, "ddiskqos bench scale: %v\n\n%s", err, benchScaleHelp)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ddiskqos bench scale: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if c.Workloads <= 0 {
		fmt.Fprintf(stderr, "ddiskqos bench scale: --workloads %d: want at least 1\n", c.Workloads)
		return 2
	}
	if c.IOFraction < 0 || c.IOFraction > 1 || c.Churn < 0 || c.Churn > 1 {
		fmt.Fprintf(stderr, "ddiskqos bench scale: --io-fraction %g, --churn %g: want 0..1\n", c.IOFraction, c.Churn)
		return 2
	}
	if c.Interval <= 0 || c.Duration < 2*c.Interval || c.Warmup < 0 {
		fmt.Fprintf(stderr, "ddiskqos bench scale: --interval %s, --duration %s, --warmup %s: want a positive interval and a duration of two intervals or more\n",
			c.Interval, c.Duration, c.Warmup)
		return 2
	}
	c.ReadRate = readRate
	c.Log = stderr
	if os.Getenv(workload.EnvMain) == "" {
		// The readers are this binary's "workload" command.
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "ddiskqos bench scale: %v\n", err)
			return 1
		}
		c.LoadExe, c.LoadArgs = exe, []string{"workload"}
	} else {
		// A test binary that runs workload.Main when re-executed with
		// DDISKQOS_WORKLOAD_MAIN=1 (workload.MaybeRunFromEnv).
		c.LoadExe = os.Args[0]
	}

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
	fmt.Fprintf(&b, "reads per tick   %8.0f    allocations per tick %.0f (%.0f KiB)    ticks %d\n",
		r.ReadsPerTick, r.AllocsPerTick, r.AllocKBPerTick, r.Ticks)
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

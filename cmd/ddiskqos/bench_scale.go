package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/bench/report"
	"github.com/ddiskqos/ddiskqos/internal/bench/scale"
	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// benchScaleOptions are the flags of "ddiskqos bench scale".
type benchScaleOptions struct {
	scale.Config
	json                        bool
	out, cpuprofile, memprofile string
}

var benchScaleCmd = &cli.Cmd[benchScaleOptions]{
	Info: scale.Info,
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
	if c.LoadExe, c.LoadArgs, err = workload.Exe(); err != nil {
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
	res.Build = report.Binary()
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
	scale.WriteText(stdout, res)
	return 0
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/calibrate"
	"github.com/ddiskqos/ddiskqos/internal/cli"
)

// calibrateOptions are the flags of "ddiskqos calibrate".
type calibrateOptions struct {
	dryRun, force, restore, json bool
	duration                     time.Duration
	stateDir, sys, proc          string
}

var calibrateCmd = &cli.Cmd[calibrateOptions]{
	Info: calibrate.Info,
	Flags: func(o *calibrateOptions, f *cli.FlagSet) {
		f.BoolVar(&o.dryRun, "dry-run", "measure and print the model and qos; write neither (the measurement still overwrites the device)")
		f.BoolVar(&o.force, "force", "calibrate a device that looks in use (mounted, held, partitioned, opened exclusively)")
		f.BoolVar(&o.restore, "restore", "write back the io.cost.model and io.cost.qos that calibrate replaced, and measure nothing")
		f.DurationVar(&o.duration, "duration", calibrate.DefaultPlan().Duration, "DUR", "how long each of the 8 patterns runs")
		f.BoolVar(&o.json, "json", "print the measurements, model and qos as JSON")
		f.StringVar(&o.stateDir, "state-dir", "/run/ddiskqos", "DIR", "where the replaced values are kept for --restore", cli.Dirs)
		f.StringVar(&o.sys, "path-sys", "/sys", "PATH", "sysfs root", cli.Dirs)
		f.Alias("sys", "path-sys")
		f.StringVar(&o.proc, "path-proc", "/proc", "PATH", "procfs root (the mount table)", cli.Dirs)
		f.Alias("proc", "path-proc")
	},
}

// runCalibrate is `ddiskqos calibrate`.
func runCalibrate(args []string, stdout, stderr io.Writer) int {
	o, rest, code, ok := calibrateCmd.Parse(args, stdout, stderr)
	if !ok {
		return code
	}
	def := calibrate.DefaultPlan()
	fail := func(code int, format string, a ...any) int {
		if code == 2 {
			return cli.Usagef(stderr, "ddiskqos calibrate", format, a...)
		}
		fmt.Fprintf(stderr, "ddiskqos calibrate: "+format+"\n", a...)
		return code
	}
	if len(rest) != 1 {
		return fail(2, "want one DEVICE (e.g. /dev/sdb), got %d arguments", len(rest))
	}
	if !filepath.IsAbs(o.stateDir) {
		return fail(2, "--state-dir %q: want an absolute path", o.stateDir)
	}
	plan := def
	plan.Duration = o.duration
	if err := plan.Validate(); err != nil {
		return fail(2, "--duration %v: %v", o.duration, err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	req := calibrate.Request{Device: rest[0], Plan: plan, StateDir: o.stateDir, DryRun: o.dryRun, Force: o.force, Restore: o.restore, JSON: o.json,
		Roots: calibrate.Roots{Sys: o.sys, Dev: "/dev", Mountinfo: filepath.Join(o.proc, "self", "mountinfo")}}
	if err := calibrate.Run(ctx, req, stdout); err != nil {
		return fail(1, "%v", err)
	}
	return 0
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/calibrate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/cli"
)

// calibrateOptions are the flags of "ddiskqos calibrate".
type calibrateOptions struct {
	dryRun, force, restore, json bool
	duration                     time.Duration
	stateDir, sys, proc          string
}

var calibrateCmd = &cli.Cmd[calibrateOptions]{
	Info: cli.Info{
		Name: "calibrate", Args: "DEVICE", ArgsComplete: cli.Devices,
		Summary: "measure a disk, write iocost's model and latency targets for it (--restore undoes)",
		Description: `Measures what a whole disk can do, with O_DIRECT requests of ddiskqos's own
load generator — sequential reads and writes of large blocks (bytes/s), 4 KiB
sequential and random reads and writes at queue depth 64 (IOPS and the
latency at saturation), and 4 KiB random requests one at a time (the
unloaded latency) — and writes iocost's io.cost.model for it (the linear
model, derived as the kernel's tools/cgroup/iocost_coef_gen.py does) and an
io.cost.qos (enable=1; p95 latency targets of 3x the unloaded p90, at most
the saturated p99; vrate between 50% and 100% of the model). iocost shares a
disk by weight only while its model says the disk is saturated: with the
kernel's default model (a whole device class) weights barely show.

THE WRITE PATTERNS OVERWRITE THE DEVICE'S DATA. A device that is mounted,
held (device-mapper, md), has partitions or is opened exclusively is
refused unless --force. The values replaced are saved under --state-dir and
written back by --restore. During the run the device's scheduler is none,
merges are off and iocost is off for it; all three are put back.`,
		Examples: `  ddiskqos calibrate --dry-run /dev/nvme1n1
  ddiskqos calibrate --duration 30s /dev/sdb
  ddiskqos calibrate --restore /dev/sdb`,
		Exit: "0 done, 1 failure (nothing written), 2 usage error.",
	},
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

	roots := calibrate.Roots{Sys: o.sys, Dev: "/dev", Mountinfo: filepath.Join(o.proc, "self", "mountinfo")}
	dev, err := calibrate.Resolve(roots, rest[0])
	if err != nil {
		return fail(1, "%v", err)
	}
	layout, err := cgroupfs.DetectLayout(roots.Mountinfo)
	if err != nil {
		return fail(1, "%v", err)
	}
	hier, err := layout.IOHierarchy()
	if err != nil {
		return fail(1, "%v", err)
	}
	if err := calibrate.CheckHierarchy(hier); err != nil {
		return fail(1, "%s: %v", dev.Path, err)
	}

	if o.restore {
		s, err := calibrate.Restore(hier, o.stateDir, dev)
		if err != nil {
			return fail(1, "%v", err)
		}
		fmt.Fprintf(stdout, "restored %s (%s), saved %s:\n  io.cost.model: %s\n  io.cost.qos:   %s\n", dev.Path, dev.Dev, s.Time.Format("2006-01-02 15:04:05Z"), s.Model, s.QoS)
		return 0
	}

	why, err := calibrate.InUse(roots, dev)
	if err != nil {
		return fail(1, "%s: %v", dev.Path, err)
	}
	if len(why) > 0 && !o.force {
		return fail(1, "%s looks in use, and calibration overwrites it (--force to go on):\n  %s", dev.Path, strings.Join(why, "\n  "))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !o.json {
		fmt.Fprintf(stdout, "calibrating %s (%s): 8 patterns of %v\n", dev.Path, dev.Dev, plan.Duration)
	}
	progress := func(m calibrate.Measurement) {
		if !o.json {
			fmt.Fprintf(stdout, "  %-17s bs %-8d qd %-3d %9.1f MiB/s %9.0f IOPS  p50 %8.0fus  p99 %8.0fus\n",
				m.Pattern, m.BlockSize, m.IODepth, m.BytesPerSec/(1<<20), m.IOPS, m.Latency.P50, m.Latency.P99)
		}
	}
	ms, err := calibrate.Measure(ctx, hier, o.sys, dev, plan, progress)
	if err != nil {
		return fail(1, "%v (nothing written)", err)
	}
	model, qos, err := calibrate.Derive(dev.Dev, ms)
	if err != nil {
		return fail(1, "%s: %v (nothing written)", dev.Path, err)
	}
	if !o.dryRun {
		if err := calibrate.Apply(hier, o.stateDir, dev, model, qos); err != nil {
			return fail(1, "%s: %v", dev.Path, err)
		}
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		out := struct {
			Device       string                  `json:"device"`
			Dev          string                  `json:"dev"`
			Measurements []calibrate.Measurement `json:"measurements"`
			Model        string                  `json:"io_cost_model"`
			QoS          string                  `json:"io_cost_qos"`
			Written      bool                    `json:"written"`
			Saved        string                  `json:"saved,omitempty"`
		}{dev.Path, dev.Dev.String(), ms, model.Line(), qos.Line(), !o.dryRun, ""}
		if !o.dryRun {
			out.Saved = calibrate.SavedPath(o.stateDir, dev)
		}
		if err := enc.Encode(out); err != nil {
			return fail(1, "%v", err)
		}
		return 0
	}
	mount := hier.Mount
	if o.dryRun {
		fmt.Fprintf(stdout, "dry run, nothing written; to apply:\n  echo '%s' > %s/io.cost.model\n  echo '%s' > %s/io.cost.qos\n", model.Line(), mount, qos.Line(), mount)
		return 0
	}
	fmt.Fprintf(stdout, "written:\n  %s/io.cost.model: %s\n  %s/io.cost.qos:   %s\nprevious values in %s (ddiskqos calibrate --restore %s)\n",
		mount, model.Line(), mount, qos.Line(), calibrate.SavedPath(o.stateDir, dev), dev.Path)
	return 0
}

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
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ddiskqos/ddiskqos/internal/calibrate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

const calibrateUsage = `usage: ddiskqos calibrate [--dry-run] [--force] [--duration DUR] [--json]
                          [--state-dir DIR] DEVICE
       ddiskqos calibrate --restore [--state-dir DIR] DEVICE

Measures what a whole disk can do, with O_DIRECT requests of ddiskqos's own
load generator — sequential reads and writes of large blocks (bytes/s), 4 KiB
sequential and random reads and writes at queue depth 64 (IOPS and the
latency at saturation), and 4 KiB random requests one at a time (the
unloaded latency) — and writes iocost's io.cost.model for it (the linear
model, derived as the kernel's tools/cgroup/iocost_coef_gen.py does) and an
io.cost.qos (enable=1; p95 latency targets of 3x the unloaded p90, at most
the saturated p99; vrate between 50%% and 100%% of the model). iocost shares a
disk by weight only while its model says the disk is saturated: with the
kernel's default model (a whole device class) weights barely show.

THE WRITE PATTERNS OVERWRITE THE DEVICE'S DATA. A device that is mounted,
held (device-mapper, md), has partitions or is opened exclusively is
refused unless --force. The values replaced are saved under --state-dir and
written back by --restore. During the run the device's scheduler is none,
merges are off and iocost is off for it; all three are put back.

Exit status: 0 done, 1 failure (nothing written), 2 usage error.

Flags:
%s
Example:
  ddiskqos calibrate --dry-run /dev/nvme1n1
  ddiskqos calibrate --duration 30s /dev/sdb
  ddiskqos calibrate --restore /dev/sdb
`

// runCalibrate is `ddiskqos calibrate`.
func runCalibrate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("calibrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := calibrate.DefaultPlan()
	dryRun := fs.Bool("dry-run", false, "measure and print the model and qos; write neither (the measurement still overwrites the device)")
	force := fs.Bool("force", false, "calibrate a device that looks in use (mounted, held, partitioned, opened exclusively)")
	restore := fs.Bool("restore", false, "write back the io.cost.model and io.cost.qos that calibrate replaced, and measure nothing")
	duration := fs.Duration("duration", def.Duration, "how long each of the 8 patterns runs")
	asJSON := fs.Bool("json", false, "print the measurements, model and qos as JSON")
	stateDir := fs.String("state-dir", "/run/ddiskqos", "where the replaced values are kept for --restore")
	sys := fs.String("sys", "/sys", "sysfs root")
	proc := fs.String("proc", "/proc", "procfs root (the mount table)")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			var b strings.Builder
			fs.SetOutput(&b)
			fs.PrintDefaults()
			fmt.Fprintf(stdout, calibrateUsage, b.String())
			return 0
		}
		fmt.Fprintln(stderr, "run 'ddiskqos calibrate --help' for usage")
		return 2
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "ddiskqos calibrate: "+format+"\n", a...)
		return code
	}
	if fs.NArg() != 1 {
		return fail(2, "want one DEVICE (e.g. /dev/sdb), got %d arguments", fs.NArg())
	}
	if !filepath.IsAbs(*stateDir) {
		return fail(2, "--state-dir %q: want an absolute path", *stateDir)
	}
	plan := def
	plan.Duration = *duration
	if err := plan.Validate(); err != nil {
		return fail(2, "--duration %v: %v", *duration, err)
	}

	roots := calibrate.Roots{Sys: *sys, Dev: "/dev", Mountinfo: filepath.Join(*proc, "self", "mountinfo")}
	dev, err := calibrate.Resolve(roots, fs.Arg(0))
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

	if *restore {
		s, err := calibrate.Restore(hier, *stateDir, dev)
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
	if len(why) > 0 && !*force {
		return fail(1, "%s looks in use, and calibration overwrites it (--force to go on):\n  %s", dev.Path, strings.Join(why, "\n  "))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !*asJSON {
		fmt.Fprintf(stdout, "calibrating %s (%s): 8 patterns of %v\n", dev.Path, dev.Dev, plan.Duration)
	}
	progress := func(m calibrate.Measurement) {
		if !*asJSON {
			fmt.Fprintf(stdout, "  %-17s bs %-8d qd %-3d %9.1f MiB/s %9.0f IOPS  p50 %8.0fus  p99 %8.0fus\n",
				m.Pattern, m.BlockSize, m.IODepth, m.BytesPerSec/(1<<20), m.IOPS, m.Latency.P50, m.Latency.P99)
		}
	}
	ms, err := calibrate.Measure(ctx, hier, *sys, dev, plan, progress)
	if err != nil {
		return fail(1, "%v (nothing written)", err)
	}
	model, qos, err := calibrate.Derive(dev.Dev, ms)
	if err != nil {
		return fail(1, "%s: %v (nothing written)", dev.Path, err)
	}
	if !*dryRun {
		if err := calibrate.Apply(hier, *stateDir, dev, model, qos); err != nil {
			return fail(1, "%s: %v", dev.Path, err)
		}
	}
	if *asJSON {
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
		}{dev.Path, dev.Dev.String(), ms, model.Line(), qos.Line(), !*dryRun, ""}
		if !*dryRun {
			out.Saved = calibrate.SavedPath(*stateDir, dev)
		}
		if err := enc.Encode(out); err != nil {
			return fail(1, "%v", err)
		}
		return 0
	}
	mount := hier.Mount
	if *dryRun {
		fmt.Fprintf(stdout, "dry run, nothing written; to apply:\n  echo '%s' > %s/io.cost.model\n  echo '%s' > %s/io.cost.qos\n", model.Line(), mount, qos.Line(), mount)
		return 0
	}
	fmt.Fprintf(stdout, "written:\n  %s/io.cost.model: %s\n  %s/io.cost.qos:   %s\nprevious values in %s (ddiskqos calibrate --restore %s)\n",
		mount, model.Line(), mount, qos.Line(), calibrate.SavedPath(*stateDir, dev), dev.Path)
	return 0
}

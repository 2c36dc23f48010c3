package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/host"
)

// checkOptions are the flags of "ddiskqos check".
type checkOptions struct {
	json                  bool
	sys, proc, dockerHost string
	config, devices       string
}

var checkCmd = &cli.Cmd[checkOptions]{
	Info: cli.Info{
		Name:    "check",
		Summary: "host preflight: cgroup layout, per-device mechanism, PSI, Docker engine, scale limits",
		Description: `Reads the host once and says whether ddiskqos can give containers disk-I/O
QoS here, and how well: the cgroup layout, for every block device the
mechanism that reaches it (bfq-weight, iocost-weight, cfq-weight, throttle),
pressure stall information, the Docker engine, and the kernel and daemon
limits a host of 10,000 containers runs into. It changes nothing.

It also says what cannot be controlled: the storage driver (with
fuse-overlayfs a container's root-filesystem I/O is done outside its
cgroup: only volumes and devices are shaped), buffered writes on cgroup v1
(charged to the kernel's flusher, not the writer), the disk under Docker's
data root and whether the daemon shapes it (give --devices as to run, or
the daemon's --config file), and
cpu.rt_runtime_us of the containers' parent (0: no SCHED_FIFO in them).

Each finding has a stable id, a status, the value seen, why it matters and
the exact command that fixes it:
  ok    as needed
  warn  QoS works, but worse than it could (limits instead of weights on a
        disk), or the host will not reach 10,000 containers; run the fix
  fail  QoS cannot work here (no I/O cgroup hierarchy, or no disk any
        mechanism reaches)
  info  not needed by ddiskqos, but by some containers (real-time
        scheduling); run the fix if yours need it`,
		Examples: `  ddiskqos check
  ddiskqos check --json | jq '.devices[] | {name, mechanism, weights_effective}'
  # From a container, the host's trees mounted under /host:
  ddiskqos check --path-sys /host/sys --path-proc /host/proc`,
		Exit: `  0  QoS can work (warnings allowed)
  1  QoS cannot work: at least one check failed
  2  usage error`,
	},
	Flags: func(o *checkOptions, f *cli.FlagSet) {
		f.BoolVar(&o.json, "json", "print the report as JSON (a stable schema) instead of a table")
		// The names of run's flags for the same things (config keys
		// paths.sys, paths.proc); --sys and --proc were check's own.
		f.StringVar(&o.sys, "path-sys", "/sys", "PATH", "sysfs root to read block devices and cgroups from; cgroup mounts under /sys in the mount table are read below it", cli.Dirs)
		f.Alias("sys", "path-sys")
		f.StringVar(&o.proc, "path-proc", "/proc", "PATH", "procfs root to read the mount table, limits, sysctls and PSI from", cli.Dirs)
		f.Alias("proc", "path-proc")
		f.StringVar(&o.dockerHost, "docker-host", "", "URL", "Docker engine to ask: unix:///path, tcp://host:port, or off (default $DOCKER_HOST, else "+host.DefaultDockerHost+")")
		f.StringVar(&o.config, "config", "", "FILE", "the daemon's config file: its devices key decides whether the disk under Docker's data root is shaped (--devices overrides it)", cli.Files)
		f.StringVar(&o.devices, "devices", "", "GLOB,...", "the daemon's devices, as given to run --devices (sd*,nvme0n1): decides whether the disk under Docker's data root is shaped; empty = run's default, every target disk", cli.Devices)
	},
}

// runCheck is `ddiskqos check`.
func runCheck(args []string, stdout, stderr io.Writer) int {
	o, _, code, ok := checkCmd.Parse(args, stdout, stderr)
	if !ok {
		return code
	}
	for _, f := range []struct{ name, dir string }{{"--path-sys", o.sys}, {"--path-proc", o.proc}} {
		if st, err := os.Stat(f.dir); err != nil || !st.IsDir() {
			return cli.Usagef(stderr, "ddiskqos check", "%s %q: not a directory", f.name, f.dir)
		}
	}

	var globs []string
	if o.config != "" && o.devices == "" {
		cfg, err := config.Load(o.config)
		if err != nil {
			return cli.Usagef(stderr, "ddiskqos check", "--config: %v", err)
		}
		globs = cfg.Devices
	}
	for g := range strings.SplitSeq(o.devices, ",") {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		if _, err := filepath.Match(g, ""); err != nil || strings.Contains(g, "/") {
			return cli.Usagef(stderr, "ddiskqos check", "--devices %q: bad pattern %q: want a device name glob as in /sys/block, such as sd* or nvme0n1", o.devices, g)
		}
		globs = append(globs, g)
	}

	var ep *host.DockerEndpoint
	dh := o.dockerHost
	if dh == "" {
		dh = os.Getenv("DOCKER_HOST")
	}
	if dh == "" {
		dh = host.DefaultDockerHost
	}
	if dh != "off" {
		e, err := host.ParseDockerHost(dh)
		if err != nil {
			return cli.Usagef(stderr, "ddiskqos check", "--docker-host: %v", err)
		}
		ep = &e
	}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	facts := host.Gather(ctx, host.Roots{Sys: o.sys, Proc: o.proc}, ep)
	facts.DeviceGlobs = globs
	checks := host.Evaluate(facts)
	report := host.BuildReport(facts, checks)

	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // fixes hold shell redirections: keep ">" readable
		if err := enc.Encode(report); err != nil {
			fmt.Fprintf(stderr, "ddiskqos check: %v\n", err)
			return 1
		}
	} else {
		writeCheckText(stdout, report)
	}
	if !report.QoSPossible {
		return 1
	}
	return 0
}

// writeCheckText prints the devices, then the checks grouped by the part of
// their id before the first dot, status first; why and fix only for the
// findings that are not ok.
func writeCheckText(w io.Writer, r host.Report) {
	counts := map[host.Status]int{}
	for _, c := range r.Checks {
		counts[c.Status]++
	}
	verdict := "QoS can work"
	if !r.QoSPossible {
		verdict = "QoS cannot work"
	}
	fmt.Fprintf(w, "ddiskqos check: %s (%d fail, %d warn, %d info, %d ok)\n", verdict, counts[host.StatusFail], counts[host.StatusWarn], counts[host.StatusInfo], counts[host.StatusOK])
	if r.Cgroup.IOHierarchy != nil {
		fmt.Fprintf(w, "cgroup %s; I/O through v%d at %s\n", r.Cgroup.Mode, r.Cgroup.IOHierarchy.Version, r.Cgroup.IOHierarchy.Mount)
	}

	if len(r.Devices) > 0 {
		rows := [][]string{{"DEVICE", "DEV", "KIND", "SCHEDULER", "MECHANISM", "WEIGHTS", "TARGET"}}
		for _, d := range r.Devices {
			weights := "no"
			if d.WeightsEffective {
				weights = "yes"
			}
			target := "yes"
			if !d.Target {
				target = "no: " + d.TargetReason
			}
			sched := d.Scheduler
			if sched == "" {
				sched = "-"
			}
			rows = append(rows, []string{d.Name, d.Dev, d.Kind, sched, string(d.Mechanism), weights, target})
		}
		fmt.Fprintln(w)
		writeCheckColumns(w, rows)
	}

	idWidth := 0
	for _, c := range r.Checks {
		idWidth = max(idWidth, len(c.ID))
	}
	group := ""
	for _, c := range r.Checks {
		if g := c.Group(); g != group {
			group = g
			fmt.Fprintf(w, "\n%s\n", g)
		}
		fmt.Fprintf(w, "  %-4s  %-*s  %s\n", c.Status, idWidth, c.ID, c.Value)
		if c.Status != host.StatusOK {
			pad := strings.Repeat(" ", 2+4+2)
			if c.Why != "" {
				fmt.Fprintf(w, "%swhy: %s\n", pad, c.Why)
			}
			if c.Fix != "" {
				fmt.Fprintf(w, "%sfix: %s\n", pad, c.Fix)
			}
		}
	}
	fmt.Fprintln(w)
	if r.QoSPossible {
		fmt.Fprintln(w, "exit 0: QoS can work; the warnings say how to do better (--json for every detail)")
	} else {
		fmt.Fprintln(w, "exit 1: QoS cannot work until the failed checks are fixed")
	}
}

// writeCheckColumns prints rows left-aligned in columns two spaces apart.
func writeCheckColumns(w io.Writer, rows [][]string) {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len(cell))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			if i == len(row)-1 {
				b.WriteString(cell)
				break
			}
			fmt.Fprintf(&b, "%-*s  ", widths[i], cell)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/view"
)

// checkOptions are the flags of "ddiskqos check".
type checkOptions struct {
	json                  bool
	sys, proc, dockerHost string
	config, devices       string
	latency               string
}

var checkCmd = &cli.Cmd[checkOptions]{
	Info: cli.Info{
		Name:    "check",
		Summary: "host preflight: cgroup layout, per-device mechanism, PSI, Docker engine, scale limits",
		Description: `Reads the host once and says whether ddiskqos can give containers disk-I/O
QoS here, and how well: the cgroup layout, for every block device the
mechanism that reaches it (bfq-weight, iocost-weight, cfq-weight, throttle)
and those the daemon runs beside it (the throttle beside a scheduler's
weight, level-limit),
pressure stall information, the Docker engine, and the kernel and daemon
limits a host of 10,000 containers runs into. It changes nothing.

It also says what cannot be controlled: the storage driver (with
fuse-overlayfs a container's root-filesystem I/O is done outside its
cgroup: only volumes and devices are shaped), buffered writes on cgroup v1
(charged to the kernel's flusher, not the writer), the disk under Docker's
data root and whether the daemon shapes it (give --devices as to run, or
the daemon's --config file),
cpu.rt_runtime_us of the containers' parent (0: no SCHED_FIFO in them), and
whether each container's I/O latency can be measured: the eBPF sensor is
loaded and attached once, then taken away (not with the daemon's latency
off: --latency off, or the --config file's).

Each finding has a stable id, a status, the value seen, why it matters and
the exact command that fixes it:
  ok    as needed
  warn  QoS works, but worse than it could (limits instead of weights on a
        disk), or the host will not reach 10,000 containers; run the fix
  fail  QoS cannot work here (no I/O cgroup hierarchy, or no disk any
        mechanism reaches)
  info  not needed by ddiskqos, but by some containers (real-time
        scheduling); run the fix if yours need it

What to fix comes first: failures and warnings about QoS, then the limits
of a host of 10,000 containers (the fine ones named in one line), then
info, the devices and what is fine.`,
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
		f.StringVar(&o.config, "config", "", "FILE", "the daemon's config file: its devices key decides whether the disk under Docker's data root is shaped, its latency key whether the eBPF sensor is probed (--devices and --latency override them), its throttle_with_weights and level_limits what runs beside each device's mechanism (default: the daemon's defaults)", cli.Files)
		f.StringVar(&o.devices, "devices", "", "GLOB,...", "the daemon's devices, as given to run --devices (sd*,nvme0n1): decides whether the disk under Docker's data root is shaped; empty = run's default, every target disk", cli.Devices)
		f.StringVar(&o.latency, "latency", "", "auto|off", "the daemon's latency, as given to run --latency: off does not probe the eBPF sensor (no BPF is loaded) and says it is off; empty = the --config file's, else auto", cli.Values("auto", "off"))
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
	cfg := config.Default()
	if o.config != "" {
		var err error
		if cfg, err = config.Load(o.config); err != nil {
			return cli.Usagef(stderr, "ddiskqos check", "--config: %v", err)
		}
		if o.devices == "" {
			globs = cfg.Devices
		}
	}
	latency := cfg.Latency
	if o.latency != "" {
		m, err := config.ParseLatencyMode(o.latency)
		if err != nil {
			return cli.Usagef(stderr, "ddiskqos check", "--latency %q: %v", o.latency, err)
		}
		latency = m
	}
	more, err := host.ParseDeviceGlobs(o.devices)
	if err != nil {
		return cli.Usagef(stderr, "ddiskqos check", "--devices %q: %v", o.devices, err)
	}
	globs = append(globs, more...)
	ep, err := host.DockerEndpointFor(o.dockerHost, os.Getenv("DOCKER_HOST"))
	if err != nil {
		return cli.Usagef(stderr, "ddiskqos check", "--docker-host: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	facts := host.GatherWith(ctx, host.Roots{Sys: o.sys, Proc: o.proc}, ep,
		host.GatherOptions{LatencyOff: latency == config.LatencyModeOff, Mechs: cfg.MechParams()})
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
		view.Check(stdout, report)
	}
	if !report.QoSPossible {
		return 1
	}
	return 0
}

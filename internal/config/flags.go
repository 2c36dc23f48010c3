package config

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// flagDef is one flag that sets one config key.
type flagDef struct {
	name, key string
	arg       string // placeholder in the usage text; "" for a bool flag
	help      string
	get       func(*Config) string // the value as a flag argument
	set       func(*Config, string) error
}

// flagDefs lists the flags in the order of the usage text. Each sets the
// key of the same name; parsing checks only the syntax, Validate the rest,
// so a range error names the flag as its origin.
var flagDefs = []flagDef{
	{name: "source", key: "source", arg: "auto|docker|cgroup",
		help: "where workloads come from: docker containers, or every child cgroup of --cgroup-parent; auto is docker if the engine answers, else an error; docker waits for an engine that is down (degraded on /healthz meanwhile)",
		get:  func(c *Config) string { return string(c.Source) },
		set:  func(c *Config, s string) error { c.Source = Source(s); return nil }},
	{name: "cgroup-parent", key: "cgroup_parent", arg: "PATH",
		help: "with --source cgroup: the cgroup whose children are the workloads, as in /proc/PID/cgroup (/system.slice, /kubepods.slice; with --cgroup-layout lxc, / by default or lxc.cgroup.dir), or its directory under the I/O hierarchy's mount",
		get:  func(c *Config) string { return c.CgroupParent },
		set:  func(c *Config, s string) error { c.CgroupParent = s; return nil }},
	{name: "cgroup-layout", key: "cgroup_layout", arg: "auto|children|kubepods|lxc|podman",
		help: "with --source cgroup: where the workloads are below --cgroup-parent: each child directory; each container of the kubelet's pods (id pod<uid>/<id>, named namespace/pod/container by --cgroup-kubelet-logs, QoS class known); lxc: each lxc.payload.NAME, named NAME (--cgroup-parent defaults to /, or lxc.cgroup.dir); podman: each libpod-<id>[.scope], named by its short id; auto is kubepods for a parent named kubepods or kubepods.slice, lxc for / or a parent holding lxc.payload.*, podman for libpod_parent or a parent holding libpod-*",
		get:  func(c *Config) string { return c.CgroupLayout },
		set:  func(c *Config, s string) error { c.CgroupLayout = s; return nil }},
	{name: "cgroup-exempt", key: "cgroup_exempt", arg: "GLOB,...",
		help: "with --source cgroup: workloads whose names match are left alone, as with the ddiskqos.exempt=true label (system-*,pod*/*)",
		get:  func(c *Config) string { return strings.Join(c.CgroupExempt, ",") },
		set:  stringListSetter(func(c *Config) *[]string { return &c.CgroupExempt })},
	{name: "cgroup-levels", key: "cgroup_levels", arg: "GLOB=N,...",
		help: "with --source cgroup: pin workloads whose names match GLOB at level N, as the ddiskqos.level label does; the first match wins, exempt wins over it (db-*=1,batch-*=4)",
		get:  func(c *Config) string { return joinList(c.CgroupLevels) },
		set: func(c *Config, s string) error {
			if strings.TrimSpace(s) == "" {
				c.CgroupLevels = nil
				return nil
			}
			v, err := parseList(s, func(e string) (CgroupPin, error) {
				p, err := ParseCgroupPin(e)
				if err != nil {
					return p, fmt.Errorf("%q: %w", e, err)
				}
				return p, nil
			})
			if err == nil {
				c.CgroupLevels = v
			}
			return err
		}},
	{name: "cgroup-exempt-guaranteed", key: "cgroup_exempt_guaranteed",
		help: "with --cgroup-layout kubepods: leave the containers of Guaranteed pods alone",
		get:  func(c *Config) string { return strconv.FormatBool(c.CgroupExemptGuaranteed) },
		set: func(c *Config, s string) error {
			b, err := strconv.ParseBool(s)
			if err == nil {
				c.CgroupExemptGuaranteed = b
			}
			return err
		}},
	{name: "cgroup-kubelet-logs", key: "cgroup_kubelet_logs", arg: "DIR",
		help: "with --cgroup-layout kubepods: the kubelet's container log links, whose names (<pod>_<namespace>_<container>-<id>.log) name containers namespace/pod/container; empty: by id, pod<uid>/<id>",
		get:  func(c *Config) string { return c.CgroupKubeletLogs },
		set:  func(c *Config, s string) error { c.CgroupKubeletLogs = s; return nil }},
	{name: "cgroup-kubelet-pods", key: "cgroup_kubelet_pods", arg: "URL",
		help: "with --cgroup-layout kubepods: the kubelet's pod list, read every 10 s, whose ddiskqos.* pod annotations (ddiskqos.level: \"4\", ddiskqos.exempt: \"true\") apply to each container of the pod as Docker's labels do; --cgroup-exempt, --cgroup-levels and --cgroup-exempt-guaranteed win over them; the kubelet serves it on its read-only port (readOnlyPort: 10255 in its config): http://127.0.0.1:10255/pods; empty (the default): annotations are not read",
		get:  func(c *Config) string { return c.CgroupKubeletPods },
		set:  func(c *Config, s string) error { c.CgroupKubeletPods = s; return nil }},
	{name: "docker-host", key: "docker_host", arg: "URL",
		help: "the Docker engine API: unix:///path or tcp://host:port (default $DOCKER_HOST, else " + DefaultDockerHost + ")",
		get:  func(c *Config) string { return c.DockerHost },
		set:  func(c *Config, s string) error { c.DockerHost = s; return nil }},
	{name: "interval", key: "interval", arg: "DUR",
		help: "how often the I/O counters are read and levels decided (at least " + MinInterval.String() + ")",
		get:  func(c *Config) string { return fmtDuration(c.Interval) },
		set:  durationSetter(func(c *Config) *time.Duration { return &c.Interval })},
	{name: "thresholds", key: "thresholds", arg: "S1,S2,S3,S4",
		help: "bytes (read+written) a workload may do at levels 1-4 before it drops a level; level 4 never drops",
		get:  func(c *Config) string { return joinList(c.Thresholds) },
		set: func(c *Config, s string) error {
			v, err := parseList(s, func(e string) (Size, error) { return ParseSize(e) })
			if err == nil {
				c.Thresholds = v
			}
			return err
		}},
	{name: "weights", key: "weights", arg: "W1,W2,W3,W4",
		help: "blkio weight (10-1000) of levels 1-4; must not increase from level to level",
		get:  func(c *Config) string { return joinList(c.Weights) },
		set: func(c *Config, s string) error {
			v, err := parseList(s, func(e string) (uint16, error) {
				n, err := strconv.ParseUint(e, 10, 16)
				if err != nil {
					return 0, fmt.Errorf("weight %q: want a whole number", e)
				}
				return uint16(n), nil
			})
			if err == nil {
				c.Weights = v
			}
			return err
		}},
	{name: "policy", key: "policy", arg: "recent|paper",
		help: "the levels' rule: recent (a workload's usage decays with --usage-window, so its level follows what it does now and a long-lived light service stays above a streamer) or paper (dDiskQoS as published: bytes count against each level's allowance until it drops; level 4 is left by the boost)",
		get:  func(c *Config) string { return c.PolicyMode.String() },
		set:  func(c *Config, s string) error { return c.PolicyMode.UnmarshalText([]byte(s)) }},
	{name: "usage-window", key: "usage_window", arg: "DUR",
		help: "the recent policy's time constant: a steady rate r counts as r × this, against the thresholds summed (with the defaults: level 1 below ~210 KB/s, 2 below ~1 MB/s, 3 below ~4.4 MB/s)",
		get:  func(c *Config) string { return fmtDuration(c.UsageWindow) },
		set:  durationSetter(func(c *Config) *time.Duration { return &c.UsageWindow })},
	{name: "boost-after", key: "boost_after", arg: "DUR",
		help: "with --policy paper: time a workload spends at level 4 before it is boosted back to level 1 (longer than --interval); the recent policy has no boost",
		get:  func(c *Config) string { return fmtDuration(c.BoostAfter) },
		set:  durationSetter(func(c *Config) *time.Duration { return &c.BoostAfter })},
	{name: "actuator", key: "actuator", arg: "cgroup|docker",
		help: "how weights and caps are written: into the cgroup files, or through the Docker engine (needs a docker source)",
		get:  func(c *Config) string { return string(c.Actuator) },
		set:  func(c *Config, s string) error { c.Actuator = Actuator(s); return nil }},
	{name: "dry-run", key: "dry_run",
		help: "decide and log levels, but write nothing",
		get:  func(c *Config) string { return strconv.FormatBool(c.DryRun) },
		set: func(c *Config, s string) error {
			b, err := strconv.ParseBool(s)
			if err == nil {
				c.DryRun = b
			}
			return err
		}},
	{name: "throttle-shares", key: "throttle_shares", arg: "F1,F2,F3,F4",
		help: "on a throttle-only device: the fraction of its present capacity (bytes/s and I/Os per second) levels 1-4 may use while a better level is active; level 1 must be 1 (uncapped)",
		get:  func(c *Config) string { return joinList(c.ThrottleShares) },
		set: func(c *Config, s string) error {
			v, err := parseList(s, func(e string) (float64, error) {
				f, err := strconv.ParseFloat(e, 64)
				if err != nil {
					return 0, fmt.Errorf("share %q: want a number", e)
				}
				return f, nil
			})
			if err == nil {
				c.ThrottleShares = v
			}
			return err
		}},
	{name: "throttle-min", key: "throttle_min", arg: "SIZE",
		help: "no bandwidth cap is ever set below this many bytes per second",
		get:  func(c *Config) string { return c.ThrottleMin.String() },
		set: func(c *Config, s string) error {
			v, err := ParseSize(s)
			if err == nil {
				c.ThrottleMin = v
			}
			return err
		}},
	{name: "throttle-burst", key: "throttle_burst", arg: "DUR",
		help: "on a throttle-only device, while a better level is active: the longest a capped workload's burst may keep the device busy (blk-throttle lets a whole 100 ms slice go at once, on every device of 6.18.2+; the fast loop re-arms the cap every period, so a tenth of that goes at once while it keeps up); 0 = no bound",
		get:  func(c *Config) string { return fmtDuration(c.ThrottleBurst) },
		set:  durationSetter(func(c *Config) *time.Duration { return &c.ThrottleBurst })},
	{name: "latency-target", key: "latency_target", arg: "auto|NUMx|DUR|off",
		help: "on a throttled device, with the I/O latency sensor: the p99 the protected (uncapped, small) requests are held to, the capped workloads getting the largest share that keeps it; auto = 2x the device's unloaded latency, learned (at least 500 µs); off = the fixed share of throttle-burst",
		get:  func(c *Config) string { return c.LatencyTarget.String() },
		set:  func(c *Config, s string) error { return c.LatencyTarget.UnmarshalText([]byte(s)) }},
	{name: "throttle-reads", key: "throttle_reads", arg: "N",
		help: "the throttle's fast loop: counter reads per second and device (~10 µs of CPU each); its 10 ms period grows with the demoted workloads to stay within it",
		get:  func(c *Config) string { return strconv.Itoa(c.ThrottleReads) },
		set: func(c *Config, s string) error {
			n, err := strconv.Atoi(s)
			if err == nil {
				c.ThrottleReads = n
			}
			return err
		}},
	{name: "work-conserving", key: "work_conserving",
		help: "the latency controller caps a neighbour only while the protected requests' p99 is above the target, and lifts the cap when it no longer needs it; false: caps whenever a better level is active beside a heavy worse one",
		get:  func(c *Config) string { return strconv.FormatBool(c.WorkConserving) },
		set: func(c *Config, s string) error {
			b, err := strconv.ParseBool(s)
			if err == nil {
				c.WorkConserving = b
			}
			return err
		}},
	{name: "throttle-with-weights", key: "throttle_with_weights",
		help: "on a device whose scheduler's weights are the mechanism (BFQ), run the throttle too: weights alone let a reader that pauses between requests wait behind a streamer's budget",
		get:  func(c *Config) string { return strconv.FormatBool(c.ThrottleWithWeights) },
		set: func(c *Config, s string) error {
			b, err := strconv.ParseBool(s)
			if err == nil {
				c.ThrottleWithWeights = b
			}
			return err
		}},
	{name: "level-limits", key: "level_limits", arg: "S1,S2,S3,S4",
		help: "static caps in bytes per second of levels 1-4, on reads and on writes each, whatever the neighbours do (0 = none; level 1 is never capped); on devices where the throttle does not run",
		get:  func(c *Config) string { return joinList(c.LevelLimits) },
		set: func(c *Config, s string) error {
			v, err := parseList(s, func(e string) (Size, error) { return ParseSize(e) })
			if err == nil {
				c.LevelLimits = v
			}
			return err
		}},
	{name: "reassert", key: "reassert", arg: "DUR",
		help: "values already in place are skipped, but rewritten this often in case someone else changed them; 0 = never",
		get:  func(c *Config) string { return fmtDuration(c.Reassert) },
		set:  durationSetter(func(c *Config) *time.Duration { return &c.Reassert })},
	{name: "devices", key: "devices", arg: "GLOB,...",
		help: "block devices to act on, as named in /sys/block (sd*,nvme0n1); empty = every non-virtual disk that carries a workload's I/O",
		get:  func(c *Config) string { return strings.Join(c.Devices, ",") },
		set:  stringListSetter(func(c *Config) *[]string { return &c.Devices })},
	{name: "latency", key: "latency", arg: "auto|off",
		help: "the I/O latency sensor (eBPF on the block layer's tracepoints: each workload's p50/p99 and in-flight per disk, histograms per level): auto runs it where the kernel and the daemon's privileges allow, else logs why and runs without it; off never loads BPF (and so runs no latency controller, whatever --latency-target says)",
		get:  func(c *Config) string { return c.Latency.String() },
		set:  func(c *Config, s string) error { return c.Latency.UnmarshalText([]byte(s)) }},
	{name: "listen", key: "listen", arg: "ADDR",
		help: "host:port of the HTTP API and /metrics; empty turns them off. The API has no authentication: an address beyond loopback lets anyone who reaches it read every workload's name and I/O (the daemon warns at start)",
		get:  func(c *Config) string { return c.Listen },
		set:  func(c *Config, s string) error { c.Listen = s; return nil }},
	{name: "state-file", key: "state_file", arg: "PATH",
		help: "where workloads' levels are kept across restarts",
		get:  func(c *Config) string { return c.StateFile },
		set:  func(c *Config, s string) error { c.StateFile = s; return nil }},
	{name: "path-sys", key: "paths.sys", arg: "PATH",
		help: "sysfs root (cgroups and block devices are read below it); /host/sys when the daemon runs in a container",
		get:  func(c *Config) string { return c.Paths.Sys },
		set:  func(c *Config, s string) error { c.Paths.Sys = s; return nil }},
	{name: "path-proc", key: "paths.proc", arg: "PATH",
		help: "procfs root (mounts, PSI); /host/proc when the daemon runs in a container",
		get:  func(c *Config) string { return c.Paths.Proc },
		set:  func(c *Config, s string) error { c.Paths.Proc = s; return nil }},
	{name: "health-models", key: "health.models", arg: "DEV=MODEL,...",
		help: "burst-credit models of devices: DEV=PRESET:SIZE (aws-gp2, aws-st1, aws-sc1, azure-premium-p1-p20) or DEV=iops=BASE/BURST/BUCKET (and/or bps=...); devices without one get the throttle detector alone",
		get:  func(c *Config) string { return joinList(c.Health.Models) },
		set:  healthModelsSetter},
	{name: "health-dstate-workloads", key: "health.dstate_workloads", arg: "N",
		help: "workloads per tick whose tasks are checked for D state (uninterruptible I/O wait); 0 = none",
		get:  func(c *Config) string { return strconv.Itoa(c.Health.DStateWorkloads) },
		set: func(c *Config, s string) error {
			n, err := strconv.Atoi(s)
			if err != nil {
				return fmt.Errorf("want a whole number")
			}
			c.Health.DStateWorkloads = n
			return nil
		}},
	{name: "health-sync-probe", key: "health.sync_probe", arg: "PATH",
		help: "file to write 4 KiB to with O_DSYNC every probe interval, latency as a histogram; empty = no probe",
		get:  func(c *Config) string { return c.Health.SyncProbe },
		set:  func(c *Config, s string) error { c.Health.SyncProbe = s; return nil }},
	{name: "health-sync-probe-interval", key: "health.sync_probe_interval", arg: "DUR",
		help: "how often the sync-write probe writes; 0 = every interval",
		get:  func(c *Config) string { return fmtDuration(c.Health.SyncProbeInterval) },
		set:  durationSetter(func(c *Config) *time.Duration { return &c.Health.SyncProbeInterval })},
	{name: "health-burst-hold-below", key: "health.burst_hold_below", arg: "F",
		help: "when a device's modelled burst balance falls below this fraction of its bucket, hold levels --health-burst-hold-from-level and worse to the model's baseline so the credit left goes to level 1; released 10 points above it; 0 = off (needs --health-models)",
		get:  func(c *Config) string { return strconv.FormatFloat(c.Health.BurstHoldBelow, 'g', -1, 64) },
		set: func(c *Config, s string) error {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return fmt.Errorf("want a number")
			}
			c.Health.BurstHoldBelow = f
			return nil
		}},
	{name: "health-burst-hold-from-level", key: "health.burst_hold_from_level", arg: "N",
		help: "the best level the burst hold holds (2..4); level 1 never is",
		get:  func(c *Config) string { return strconv.Itoa(c.Health.BurstHoldFromLevel) },
		set: func(c *Config, s string) error {
			n, err := strconv.Atoi(s)
			if err != nil {
				return fmt.Errorf("want a whole number")
			}
			c.Health.BurstHoldFromLevel = n
			return nil
		}},
	{name: "log-level", key: "log.level", arg: "LEVEL",
		help: "debug, info, warn or error",
		get:  func(c *Config) string { return c.Log.Level.String() },
		set:  func(c *Config, s string) error { return c.Log.Level.UnmarshalText([]byte(s)) }},
	{name: "log-format", key: "log.format", arg: "text|json",
		help: "log line format",
		get:  func(c *Config) string { return c.Log.Format },
		set:  func(c *Config, s string) error { c.Log.Format = s; return nil }},
}

// healthModelsSetter sets health.models from DEV=MODEL entries separated
// by commas; a plain model's own commas (iops=...,bps=...) stay inside its
// entry (a part without a DEV= before a preset or iops/bps key joins the
// one before).
func healthModelsSetter(c *Config, s string) error {
	if strings.TrimSpace(s) == "" {
		c.Health.Models = nil
		return nil
	}
	var entries []string
	for _, part := range strings.Split(s, ",") {
		k, _, _ := strings.Cut(strings.TrimSpace(part), "=")
		if len(entries) > 0 && (k == "iops" || k == "bps") {
			entries[len(entries)-1] += "," + strings.TrimSpace(part)
			continue
		}
		entries = append(entries, strings.TrimSpace(part))
	}
	var out []HealthModel
	for _, e := range entries {
		m, err := ParseHealthModel(e)
		if err != nil {
			return fmt.Errorf("%q: %w", e, err)
		}
		out = append(out, m)
	}
	c.Health.Models = out
	return nil
}

// stringListSetter sets a comma-separated list; an empty argument empties
// the list.
func stringListSetter(field func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, s string) error {
		if strings.TrimSpace(s) == "" {
			*field(c) = nil
			return nil
		}
		v, err := parseList(s, func(e string) (string, error) { return e, nil })
		if err == nil {
			*field(c) = v
		}
		return err
	}
}

func durationSetter(field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, s string) error {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("want a duration with a unit, such as 500ms, 1s or 2m")
		}
		*field(c) = d
		return nil
	}
}

// fmtDuration is d.String() without zero trailing units: 1m, not 1m0s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func parseList[T any](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for e := range strings.SplitSeq(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			return nil, fmt.Errorf("empty entry in %q", s)
		}
		v, err := parse(e)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func joinList[T any](v []T) string {
	s := make([]string, len(v))
	for i, e := range v {
		s[i] = fmt.Sprint(e)
	}
	return strings.Join(s, ",")
}

// configFlag is the name of the flag that names the config file.
const configFlag = "config"

// flagValue is the flag.Value of one flagDef. Set only checks the syntax
// and keeps the text; ApplyFlags replays it onto a Config, so the same
// command line can be applied again over a reloaded file.
type flagValue struct {
	def  *flagDef
	raw  string
	def0 string // the default, for the flag package's usage
}

func (v *flagValue) String() string {
	if v == nil || v.def == nil {
		return ""
	}
	if v.raw != "" {
		return v.raw
	}
	return v.def0
}

func (v *flagValue) Set(s string) error {
	var scratch Config
	if err := v.def.set(&scratch, s); err != nil {
		return err
	}
	v.raw = s
	return nil
}

// IsBoolFlag lets --dry-run stand alone.
func (v *flagValue) IsBoolFlag() bool { return v != nil && v.def != nil && v.def.arg == "" }

// Placeholder is the value's name in the help: PATH, DUR, auto|docker|cgroup.
func (v *flagValue) Placeholder() string { return v.def.arg }

// ConfigKey is the config-file key the flag sets.
func (v *flagValue) ConfigKey() string { return v.def.key }

// configPath is the value of --config.
type configPath string

func (p *configPath) Set(s string) error  { *p = configPath(s); return nil }
func (p *configPath) String() string      { return string(*p) }
func (p *configPath) Placeholder() string { return "FILE" }

// Registrar is what RegisterFlags declares the flags on: a *flag.FlagSet,
// or the declaration of "ddiskqos run" (cli.FlagSet.Registrar), from which
// its help, completion and man page come.
type Registrar interface {
	Var(v flag.Value, name, usage string)
}

// RegisterFlags adds --config and a flag for every key to fs; the usage
// defaults are c's values. Parsing the flags does not change c: call
// ApplyFlags after loading the file, so only the flags the user set
// override it.
func (c *Config) RegisterFlags(fs Registrar) {
	fs.Var(new(configPath), configFlag, "YAML config file read before the flags are applied; without it the built-in defaults are used")
	for i := range flagDefs {
		d := &flagDefs[i]
		fs.Var(&flagValue{def: d, def0: d.get(c)}, d.name, d.help)
	}
}

// ApplyFlags sets on c every key whose flag was set on the command line
// parsed by fs (a FlagSet from RegisterFlags). Flags left at their default
// do not touch c, so they do not override the file.
func (c *Config) ApplyFlags(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		v, ok := f.Value.(*flagValue)
		if !ok || err != nil {
			return
		}
		if e := v.def.set(c, v.raw); e != nil {
			err = &KeyError{Key: v.def.key, Value: v.raw, Origin: "--" + f.Name, Msg: e.Error()}
		}
	})
	return err
}

// setFlags maps the root key of every flag set on fs to "--name".
func setFlags(fs *flag.FlagSet) map[string]string {
	m := map[string]string{}
	if fs == nil {
		return m
	}
	fs.Visit(func(f *flag.Flag) {
		if v, ok := f.Value.(*flagValue); ok {
			m[v.def.key] = "--" + f.Name
		}
	})
	return m
}

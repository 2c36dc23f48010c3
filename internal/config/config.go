// Package config is the configuration of the ddiskqos daemon: the built-in
// defaults (default.yaml, embedded and documented key by key), a strictly
// decoded YAML file, command-line flags that override it, validation that
// names the key and the bad value of every problem, and reload on SIGHUP.
//
// The layers, lowest first: Default(), then $DOCKER_HOST for docker_host,
// then the file given with --config, then the flags the user actually set.
// Only then is the result validated, so a flag can repair a file and an
// error always shows where the bad value came from (file:line, --flag or
// $DOCKER_HOST).
package config

import (
	_ "embed"
	"fmt"
	"log/slog"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/devhealth"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/throttle"
)

// Source says where workloads come from.
type Source string

const (
	// SourceAuto is SourceDocker when the engine at docker_host answers;
	// otherwise the daemon stops with an error that says to use
	// SourceCgroup. It never falls back silently: a daemon that quietly
	// manages the wrong set of cgroups is worse than one that does not start.
	SourceAuto Source = "auto"
	// SourceDocker: the containers of the Docker engine at docker_host.
	SourceDocker Source = "docker"
	// SourceCgroup: every child cgroup of cgroup_parent (LXC, systemd
	// services, any runtime), or with cgroup_layout kubepods every
	// container of the kubelet's pods.
	SourceCgroup Source = "cgroup"
)

// Actuator says how the levels' weights and caps are written.
type Actuator string

const (
	// ActuatorCgroup writes the cgroup files directly (the default).
	ActuatorCgroup Actuator = "cgroup"
	// ActuatorDocker asks the Docker engine (docker update), so docker
	// inspect shows the values; needs a Docker source.
	ActuatorDocker Actuator = "docker"
)

// DefaultDockerHost is the engine's API when neither docker_host nor
// $DOCKER_HOST says otherwise.
const DefaultDockerHost = "unix:///var/run/docker.sock"

// MinInterval is the shortest sampling interval: below it reading the
// io.stat of thousands of cgroups costs more than the control is worth, and
// the kernel's own I/O statistics are not finer-grained anyway.
const MinInterval = 50 * time.Millisecond

// Config is the daemon's configuration. The yaml keys are the config-file
// keys; every flag sets the key of the same name (--cgroup-parent sets
// cgroup_parent, --path-sys sets paths.sys, --log-level sets log.level).
// Index i of the per-level lists is level i+1.
type Config struct {
	Source       Source `yaml:"source"`
	CgroupParent string `yaml:"cgroup_parent"` // absolute cgroup path; only with SourceCgroup
	// CgroupLayout says where the workloads are below cgroup_parent:
	// "children" (each child directory), "kubepods" (each container of the
	// kubelet's pods), or "auto" (kubepods when the parent is named
	// kubepods or kubepods.slice). Only with SourceCgroup.
	CgroupLayout string `yaml:"cgroup_layout"`
	// CgroupExempt are globs (path.Match) on workload names of the cgroup
	// source: a match is exempt, like a container labelled
	// ddiskqos.exempt=true.
	CgroupExempt []string `yaml:"cgroup_exempt"`
	// CgroupLevels pin the cgroup source's workloads whose names match a
	// glob at a level, like the ddiskqos.level label: "GLOB=LEVEL"
	// entries, the first match wins; an exempt match wins over them.
	CgroupLevels []CgroupPin `yaml:"cgroup_levels"`
	// CgroupExemptGuaranteed exempts the containers of Guaranteed pods
	// (cgroup_layout kubepods).
	CgroupExemptGuaranteed bool `yaml:"cgroup_exempt_guaranteed"`
	// CgroupKubeletLogs is the kubelet's directory of container log links
	// (/var/log/containers), which name the kubepods layout's containers
	// namespace/pod/container; "" names them by id (pod<uid>/<id>).
	CgroupKubeletLogs string `yaml:"cgroup_kubelet_logs"`
	// CgroupKubeletPods is the URL of the kubelet's pod list
	// (http://127.0.0.1:10255/pods), whose ddiskqos.* pod annotations
	// become labels of the pods' containers; "" (the default): not read.
	CgroupKubeletPods string `yaml:"cgroup_kubelet_pods"`
	// DockerHost is the engine's API URL. Empty in Default(); Load and
	// FromArgs fill it from $DOCKER_HOST, else DefaultDockerHost.
	DockerHost string `yaml:"docker_host"`

	// PolicyMode is the policy's rule: "recent" (usage decays with
	// UsageWindow, the default) or "paper" (dDiskQoS's cumulative
	// allowances and the boost).
	PolicyMode  PolicyMode    `yaml:"policy"`
	UsageWindow time.Duration `yaml:"usage_window"` // the recent rule's time constant
	Interval    time.Duration `yaml:"interval"`     // how often I/O counters are sampled
	Thresholds  []Size        `yaml:"thresholds"`   // per-level allowances (policy.Config.Allowances)
	Weights     []uint16      `yaml:"weights"`      // per-level blkio weights, 10..1000
	BoostAfter  time.Duration `yaml:"boost_after"`  // time at level 4 before going back to level 1

	Actuator Actuator `yaml:"actuator"`
	DryRun   bool     `yaml:"dry_run"` // decide and log, write nothing
	// ThrottleShares: on a device where only throttling works, the
	// fraction of its observed peak bandwidth a level may use while a
	// higher level is active. Level 1 is always 1 (uncapped).
	ThrottleShares []float64 `yaml:"throttle_shares"`
	ThrottleMin    Size      `yaml:"throttle_min"` // no cap below this, bytes/s
	// ThrottleBurst bounds how long one capped workload's burst may keep
	// the device busy while a better level is active; 0: no bound.
	ThrottleBurst time.Duration `yaml:"throttle_burst"`
	// ThrottleReads bounds the throttle's fast loop: counter reads per
	// second and device (its period grows with the demoted workloads).
	ThrottleReads int `yaml:"throttle_reads"`
	// LatencyTarget is the latency controller's target (see the type):
	// auto, NUMx, a duration or off.
	LatencyTarget LatencyTarget `yaml:"latency_target"`
	// WorkConserving: the latency controller caps only while the
	// protected requests need it (internal/control's Conserve); false
	// keeps the caps on whenever a better level is active beside a heavy
	// worse one, the share steered within the levels' shares.
	WorkConserving bool `yaml:"work_conserving"`
	// ThrottleWithWeights: on devices whose mechanism is a scheduler's
	// weight (BFQ, CFQ), the throttle runs too.
	ThrottleWithWeights bool `yaml:"throttle_with_weights"`
	// LevelLimits are static caps, bytes/s per level 1..4 on reads and on
	// writes each (the mechanism mech.LevelLimit, on devices the throttle
	// does not run on); 0 or empty: none.
	LevelLimits []Size `yaml:"level_limits"`
	// Reassert: values already in place are not rewritten, except once
	// per Reassert in case someone else changed them; 0 means never.
	Reassert time.Duration `yaml:"reassert"`
	// Devices are glob patterns (path.Match) of block device names as in
	// /sys/block, e.g. "sd*", "nvme0n1". Empty means automatic: every
	// non-virtual disk that carries a workload's I/O.
	Devices []string `yaml:"devices"`
	// Latency says whether the I/O latency sensor (eBPF) runs: auto
	// where it can, off never (no BPF is loaded).
	Latency LatencyMode `yaml:"latency"`

	Listen    string `yaml:"listen"`     // host:port of the HTTP API and metrics; "" turns them off
	StateFile string `yaml:"state_file"` // where levels survive a restart

	Paths  Paths  `yaml:"paths"`
	Log    Log    `yaml:"log"`
	Health Health `yaml:"health"`
}

// Health configures the storage-health sensors.
type Health struct {
	// Models are burst-credit models, "DEVICE=MODEL" entries (see
	// HealthModel), one per device. A device without one gets the
	// configuration-free throttle detector alone.
	Models []HealthModel `yaml:"models"`
	// DStateWorkloads is how many workloads per tick have their tasks'
	// states read (to count those in D state); 0 reads none.
	DStateWorkloads int `yaml:"dstate_workloads"`
	// SyncProbe is a file to write 4 KiB to with O_DSYNC every
	// SyncProbeInterval (0: every interval); "" for no probe.
	SyncProbe         string        `yaml:"sync_probe"`
	SyncProbeInterval time.Duration `yaml:"sync_probe_interval"`
	// BurstHoldBelow: when a modelled device's burst balance falls below
	// this fraction of its bucket, the throttle holds the workloads at
	// BurstHoldFromLevel and worse to the model's baseline, so what credit
	// is left goes to the better levels; 0 turns the hold off.
	BurstHoldBelow     float64 `yaml:"burst_hold_below"`
	BurstHoldFromLevel int     `yaml:"burst_hold_from_level"`
}

// HealthModels returns health.models by device name.
func (c Config) HealthModels() map[string]devhealth.Model {
	out := map[string]devhealth.Model{}
	for _, m := range c.Health.Models {
		out[m.Device] = m.Model
	}
	return out
}

// Paths are the roots of the kernel's filesystems, so the daemon can run in
// a container with the host's mounted elsewhere, and tests can use a tree in
// a temporary directory.
type Paths struct {
	Sys  string `yaml:"sys"`
	Proc string `yaml:"proc"`
}

// Log configures the daemon's log/slog handler.
type Log struct {
	Level  LogLevel `yaml:"level"`  // debug, info, warn or error
	Format string   `yaml:"format"` // text or json
}

// SlogLevel is Level as a slog.Level.
func (l Log) SlogLevel() slog.Level { return slog.Level(l.Level) }

//go:embed default.yaml
var defaultYAML []byte

// DefaultYAML returns the embedded default.yaml: the reference an operator
// copies, documented key by key. It decodes to exactly Default() (a test
// keeps the two from drifting).
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Default returns the built-in configuration: the daemon runs with it when
// no file is given. DockerHost is empty (see Config.DockerHost).
func Default() Config {
	pc := policy.DefaultConfig()
	shares := throttle.DefaultShares()
	c := Config{
		Source:              SourceAuto,
		CgroupLayout:        "auto",
		CgroupKubeletLogs:   "/var/log/containers",
		Interval:            time.Second,
		PolicyMode:          PolicyMode(policy.ModeRecent),
		UsageWindow:         pc.Window,
		BoostAfter:          pc.BoostAfter,
		Actuator:            ActuatorCgroup,
		ThrottleShares:      shares[:],
		ThrottleMin:         8 * MiB,
		ThrottleBurst:       throttle.DefaultBurst,
		LatencyTarget:       LatencyAuto,
		WorkConserving:      true,
		ThrottleReads:       throttle.DefaultReads,
		ThrottleWithWeights: true,
		Reassert:            60 * time.Second,
		Latency:             LatencyModeAuto,
		Listen:              "127.0.0.1:9191",
		StateFile:           "/run/ddiskqos/state.json",
		Paths:               Paths{Sys: "/sys", Proc: "/proc"},
		Log:                 Log{Level: LogLevel(slog.LevelInfo), Format: "text"},
		Health:              Health{DStateWorkloads: 32, BurstHoldFromLevel: 2},
	}
	for _, a := range pc.Allowances {
		c.Thresholds = append(c.Thresholds, Size(a))
	}
	c.Weights = append(c.Weights, pc.Weights[:]...)
	return c
}

// Policy returns the policy's part of c. Lists that do not have
// policy.NumLevels entries (which Validate rejects) leave the levels they do
// not reach at zero.
func (c Config) Policy() policy.Config {
	var pc policy.Config
	for i := range min(len(c.Thresholds), policy.NumLevels) {
		pc.Allowances[i] = uint64(c.Thresholds[i])
	}
	for i := range min(len(c.Weights), policy.NumLevels) {
		pc.Weights[i] = c.Weights[i]
	}
	pc.BoostAfter = c.BoostAfter
	pc.Mode = policy.Mode(c.PolicyMode)
	pc.Window = c.UsageWindow
	return pc
}

// SetPolicy sets the policy's keys of c (thresholds, weights, boost_after,
// policy, usage_window) from pc: the inverse of Policy, for a benchmark
// that runs the daemon with a policy of its own.
func (c *Config) SetPolicy(pc policy.Config) {
	c.Thresholds = c.Thresholds[:0:0]
	for _, a := range pc.Allowances {
		c.Thresholds = append(c.Thresholds, Size(a))
	}
	c.Weights = append([]uint16(nil), pc.Weights[:]...)
	c.BoostAfter = pc.BoostAfter
	c.PolicyMode = PolicyMode(pc.Mode)
	c.UsageWindow = pc.Window
}

// clone returns c with its slices copied, so the result and c can be
// changed independently.
func (c Config) clone() Config {
	c.Thresholds = append([]Size(nil), c.Thresholds...)
	c.Weights = append([]uint16(nil), c.Weights...)
	c.ThrottleShares = append([]float64(nil), c.ThrottleShares...)
	c.Devices = append([]string(nil), c.Devices...)
	c.CgroupExempt = append([]string(nil), c.CgroupExempt...)
	c.CgroupLevels = append([]CgroupPin(nil), c.CgroupLevels...)
	c.Health.Models = append([]HealthModel(nil), c.Health.Models...)
	return c
}

func (s Source) String() string   { return string(s) }
func (a Actuator) String() string { return string(a) }

var _ fmt.Stringer = Size(0)

// MechParams are the mechanisms' parameters c sets: what runs beside each
// device's main mechanism, and level-limit's caps.
func (c Config) MechParams() mech.Params {
	p := mech.Params{ThrottleWithWeights: c.ThrottleWithWeights}
	for _, l := range c.LevelLimits {
		p.LevelLimits = append(p.LevelLimits, uint64(l))
	}
	return p
}

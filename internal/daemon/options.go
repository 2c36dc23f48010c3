package daemon

import (
	"log/slog"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/health"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/sensor"
	"github.com/ddiskqos/ddiskqos/internal/sensor/latency"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

// Observer receives the daemon's operational metrics (internal/metrics
// implements it). The loop calls it from its own goroutine.
type Observer interface {
	// ObserveTick: how long one tick took.
	ObserveTick(d time.Duration)
	// ObserveSense: after each tick's sensing, how many workloads'
	// counters were read from their files, how many were taken from the
	// kernel's maps instead (the I/O latency sensor's,
	// internal/sensor/latency), and how many were left for a later tick
	// because they have been quiet (see Options.QuietMax).
	ObserveSense(read, kernel, skipped int)
	// Error: one error of the loop, by cause.
	Error(cause snapshot.ErrorCause)
	// LevelChange: a workload moved (0 is exempt); reason is the policy's.
	LevelChange(from, to int, reason string)
}

type nopObserver struct{}

func (nopObserver) ObserveTick(time.Duration)    {}
func (nopObserver) ObserveSense(int, int, int)   {}
func (nopObserver) Error(snapshot.ErrorCause)    {}
func (nopObserver) LevelChange(int, int, string) {}

// Options configure a Daemon.
type Options struct {
	Hierarchy  cgroupfs.Hierarchy
	CgroupMode string
	// SenseDevices are disks whose I/O is counted besides the actuated
	// ones; on cgroup v1 accounting is enabled on all of them at start
	// (cgroupfs.Hierarchy.EnableV1Accounting).
	SenseDevices []cgroupfs.Dev
	// Stacked maps a stacked device (loop over a file, dm, md) to the disks
	// below it, whose counters repeat its I/O (sensor counts it once).
	Stacked  map[cgroupfs.Dev][]cgroupfs.Dev
	Source   source.Source
	Policy   policy.Config
	Actuator actuate.Config // Hierarchy is taken from above
	// ActuatorName is reported in the snapshot ("cgroup" or "docker").
	ActuatorName string
	// NewActuator builds the actuator from the configuration and the
	// originals adopted from the state file; nil means the cgroup-file
	// actuator (actuate.New).
	NewActuator func(cfg actuate.Config, adopted []actuate.Original) (Actuator, error)
	Interval    time.Duration
	// StateFile is where originals and levels are kept ("" = nowhere). A
	// knob is written only once its original is saved there (the
	// actuator's Config.Persist); a failed save is retried every tick,
	// counted as a "state" error and shown in Snapshot.StateError. At
	// start, entries of cgroups that are gone or were created again (their
	// directory inode changed) are dropped.
	StateFile string
	// HostPressure is the host's PSI file (/proc/pressure/io), "" for none.
	HostPressure string
	// OrphanGrace is how long after start a cgroup adopted from the state
	// file may stay unclaimed before its original values are restored; and
	// not before the source's initial listing is complete (source.Synced):
	// until then every adopted cgroup looks unclaimed.
	OrphanGrace time.Duration
	Logger      *slog.Logger
	Observer    Observer
	// Now is the clock; time.Now when nil (tests step their own).
	Now func() time.Time
	// QuietMax is the longest a workload whose counters have not moved
	// goes without its counters being read (adaptive polling, see
	// sensor.MaxPeriod); 0 means DefaultQuietTicks intervals, and anything below
	// two intervals reads every workload every tick.
	QuietMax time.Duration
	// NoFile is RLIMIT_NOFILE's soft limit, the open-file budget; 0 means
	// raise the soft limit to the hard one at Run and use that.
	NoFile uint64
	// Health configures the storage-health stage (internal/health).
	Health health.Options
	// Latency configures the I/O latency stage (internal/sensor/latency).
	Latency latency.Options
	// Activity, when set, says which cgroups did I/O: a quiet workload it
	// saw is read at the next tick (sensor.Activity). nil: the I/O latency
	// sensor's per-tick deltas when it is attached
	// (internal/sensor/latency), else polling alone.
	Activity sensor.Activity
	// ActiveQuietMax is QuietMax for a workload whose cgroup the Activity
	// source vouches for at the tick (it sees every request of it, so a
	// quiet workload that does I/O is read at the next tick anyway): the
	// backstop of a source that could miss some. 0 means
	// DefaultActiveQuietMax; negative or below QuietMax: QuietMax (the
	// source only wakes workloads up).
	ActiveQuietMax time.Duration
}

// DefaultActiveQuietMax is the default of Options.ActiveQuietMax: 64
// ticks at the default 1 s interval (a polling period is a power of two
// not above it). It was a minute, which made 32 ticks: at 10,000 quiet
// workloads, 310 of a tick's ~440 counter file reads were this backstop
// (the scale benchmark, internal/bench/scale).
const DefaultActiveQuietMax = 64 * time.Second

// DefaultQuietTicks is the default of Options.QuietMax in intervals.
const DefaultQuietTicks = sensor.DefaultQuietTicks

// Package snapshot holds the immutable picture of the daemon's state that
// the loop publishes once per tick. The HTTP API, the metrics collector and
// `ddiskqos status` only ever read a Snapshot, so no request races the loop.
//
// Its JSON form is what GET /v1/workloads returns: a public contract.
package snapshot

import "time"

// Snapshot is the daemon's state after one tick. Never modify one after it
// is published.
type Snapshot struct {
	At       time.Time     `json:"at"`
	Tick     uint64        `json:"tick"`
	Interval time.Duration `json:"interval_ns"`
	// TickDuration is how long the last tick took (sense, decide, actuate).
	TickDuration time.Duration `json:"tick_duration_ns"`
	Source       string        `json:"source"`   // docker | cgroup
	Actuator     string        `json:"actuator"` // cgroup | docker
	DryRun       bool          `json:"dry_run"`
	CgroupMode   string        `json:"cgroup_mode"` // v1 | v2 | hybrid
	// Workloads are sorted by Name, then ID. A Workload that did not
	// change since the previous tick is the same *Workload in both
	// snapshots (never modify one either).
	Workloads []*Workload `json:"workloads"`
	// Devices are the block devices actuated, sorted by Name.
	Devices []Device `json:"devices"`
	// Levels counts workloads per level; index 0 is exempt/none, 1..4 the levels.
	Levels [5]int `json:"levels"`
	// Errors counts errors since start by cause (one of ErrorCauses),
	// sorted by Cause; causes with no error are left out.
	Errors []ErrorCount `json:"errors,omitempty"`
	// StateError is why the state file could not be saved, "" when the
	// last save succeeded: while it is set, knobs whose original is not
	// saved are not written.
	StateError string `json:"state_error,omitempty"`
	// SourceError is why the workload source cannot reach its backend
	// (the Docker engine), "" while it can: the daemon keeps running
	// degraded, containers are neither discovered nor released.
	SourceError string `json:"source_error,omitempty"`
	// HostPressure is /proc/pressure/io, nil when PSI is unavailable.
	HostPressure *Pressure `json:"host_pressure,omitempty"`
	// Health is the storage-health sensors' picture (health.go).
	Health *Health `json:"health,omitempty"`
	// Latency is the I/O latency sensor's state and its histograms per
	// disk, operation and level (latency.go).
	Latency *Latency `json:"latency,omitempty"`
}

// Workload is one container or cgroup the daemon manages.
type Workload struct {
	ID     string            `json:"id"`
	Name   string            `json:"name"`
	Cgroup string            `json:"cgroup"` // relative to the I/O hierarchy
	Labels map[string]string `json:"labels,omitempty"`

	Level        int       `json:"level"` // 1..4; 0 when exempt
	Pinned       bool      `json:"pinned,omitempty"`
	Exempt       bool      `json:"exempt,omitempty"`
	LabelError   string    `json:"label_error,omitempty"`
	BytesInLevel uint64    `json:"bytes_in_level"`
	Allowance    uint64    `json:"allowance"` // of the current level
	LevelSince   time.Time `json:"level_since"`
	Weight       int       `json:"weight"` // 10..1000; 0 when exempt

	// Counters since the daemon began tracking the workload.
	ReadBytes  uint64 `json:"read_bytes"`
	WriteBytes uint64 `json:"write_bytes"`
	ReadIOs    uint64 `json:"read_ios"`
	WriteIOs   uint64 `json:"write_ios"`
	// Rates over the last tick, bytes per second.
	ReadBps  float64 `json:"read_bps"`
	WriteBps float64 `json:"write_bps"`

	// Applied lists what is in force on each device, sorted by device.
	Applied []Applied `json:"applied,omitempty"`
	// Pressure is the cgroup's io.pressure (v2 only).
	Pressure *Pressure `json:"pressure,omitempty"`
	// DTasks is how many of its tasks were in uninterruptible sleep
	// (state D, usually waiting for I/O) when last looked at; looked at
	// only on ticks it did I/O or had some, a bounded number per tick.
	DTasks int `json:"dstate_tasks,omitempty"`
	// Latency is what the I/O latency sensor (eBPF) measured of its
	// requests, per disk it used (sorted by device); absent without the
	// sensor (Snapshot.Latency says why).
	Latency []WorkloadLatency `json:"latency,omitempty"`
}

// Applied is what ddiskqos set for one workload on one device.
type Applied struct {
	Device    string `json:"device"` // e.g. loop3
	Dev       string `json:"dev"`    // MAJ:MIN
	Mechanism string `json:"mechanism"`
	// Weight on the 10..1000 scale, 0 when the mechanism is a throttle.
	Weight int `json:"weight,omitempty"`
	// Limits in force (throttle mechanism), zero fields unlimited.
	ReadBps  uint64 `json:"read_bps_limit,omitempty"`
	WriteBps uint64 `json:"write_bps_limit,omitempty"`
	// ReadIOPS and WriteIOPS: the request caps in force beside the byte
	// caps (the throttle caps both: a cap in bytes alone lets a stream of
	// small requests through).
	ReadIOPS  uint64 `json:"read_iops_limit,omitempty"`
	WriteIOPS uint64 `json:"write_iops_limit,omitempty"`
	Throttled bool   `json:"throttled,omitempty"`
	// Knobs are the values in force of the per-level mechanisms beside
	// the weight or caps, each as the mechanism writes it:
	// "mechanism=value", joined by "; " ("level-limit=rbps=10485760
	// wbps=10485760 riops=max wiops=max"); "" when none has a value.
	Knobs string `json:"knobs,omitempty"`
	Error string `json:"error,omitempty"` // last failure to apply
	// Used: the workload's own counters show I/O on the device (the
	// kernel's totals for its cgroup). What is set on a device it never
	// touched does nothing to it.
	Used bool `json:"used,omitempty"`
}

// Device is a block device the daemon actuates on.
type Device struct {
	Name             string `json:"name"`
	Dev              string `json:"dev"`
	Scheduler        string `json:"scheduler"`
	Mechanism        string `json:"mechanism"`
	WeightsEffective bool   `json:"weights_effective"`
	// TopActiveLevel is the best level that did I/O on the device in the
	// last tick, 0 when idle (what the throttle mechanism keys on).
	TopActiveLevel int `json:"top_active_level"`
	// CapacityBps and CapacityIOPS are the device's capacity as the
	// throttle estimates it from the device's own counters (what the caps
	// are shares of); 0 without a throttle or before it measured.
	CapacityBps  float64 `json:"capacity_bps,omitempty"`
	CapacityIOPS float64 `json:"capacity_iops,omitempty"`
	// The latency controller (internal/control), where it runs (the
	// latency sensor attached, a throttle on the device): the protected
	// requests' p99 it holds (LatencyTarget, learned or configured; 0
	// until learned), their last measured p99 (ProtectedP99), both in
	// seconds, and the share of the capacity the capped workloads get
	// together (CappedShare, 0..1). All 0 without the controller.
	LatencyTarget float64 `json:"latency_target_seconds,omitempty"`
	ProtectedP99  float64 `json:"protected_p99_seconds,omitempty"`
	CappedShare   float64 `json:"capped_share,omitempty"`
	// Rates over the last tick and totals since start: the bytes the
	// managed workloads read and wrote on the device (stacked devices'
	// bytes once, on the device they were issued to).
	ReadBps    float64 `json:"read_bps"`
	WriteBps   float64 `json:"write_bps"`
	ReadBytes  uint64  `json:"read_bytes"`
	WriteBytes uint64  `json:"write_bytes"`
}

// Pressure is one PSI reading (some and full), averages in percent, totals
// in microseconds.
type Pressure struct {
	SomeAvg10 float64 `json:"some_avg10"`
	SomeAvg60 float64 `json:"some_avg60"`
	SomeTotal uint64  `json:"some_total_us"`
	FullAvg10 float64 `json:"full_avg10"`
	FullAvg60 float64 `json:"full_avg60"`
	FullTotal uint64  `json:"full_total_us"`
}

// ErrorCause is why the daemon loop counted an error: the one list of
// causes, counted by the daemon (ErrorCount.Cause is its String) and
// declared up front by the metrics (ddiskqos_scan_errors_total{cause}).
// Not a string type, so no cause can be counted that is not declared here.
type ErrorCause uint8

const (
	CauseSense   ErrorCause = iota // reading a workload's counters failed
	CauseActuate                   // writing or restoring a knob failed
	CauseState                     // saving the state file failed
	CauseFDLimit                   // a workload left untracked: no file descriptor left for it
	NumErrorCauses
)

var causeNames = [NumErrorCauses]string{"sense", "actuate", "state", "fd_limit"}

// String is the cause's word in the JSON snapshot and the metrics' label.
func (c ErrorCause) String() string {
	if c < NumErrorCauses {
		return causeNames[c]
	}
	return "unknown"
}

// ErrorCauses returns every cause, in declaration order.
func ErrorCauses() []ErrorCause {
	cs := make([]ErrorCause, NumErrorCauses)
	for i := range cs {
		cs[i] = ErrorCause(i)
	}
	return cs
}

// ErrorCount is how many errors of one cause happened since start.
type ErrorCount struct {
	Cause string `json:"cause"`
	Count uint64 `json:"count"`
}

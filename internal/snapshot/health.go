package snapshot

import "time"

// Health is the storage-health picture of one tick: each watched device's
// burst-credit state, the host's tasks blocked on I/O, the sync-write
// probe, and the latest device state changes.
type Health struct {
	Devices []DeviceHealth `json:"devices"`
	// BlockedTasks is /proc/stat procs_blocked: tasks of the whole host
	// in uninterruptible sleep waiting for I/O; nil when unreadable.
	BlockedTasks *uint64 `json:"blocked_tasks,omitempty"`
	// DStateSampled is how many workloads had their tasks' states read
	// this tick (at most the configured number).
	DStateSampled int        `json:"dstate_sampled"`
	Probe         *SyncProbe `json:"sync_probe,omitempty"`
	// Events are the last device state changes, oldest first.
	Events []HealthEvent `json:"events,omitempty"`
}

// DeviceHealth is one device's health (devhealth.Status), base units.
type DeviceHealth struct {
	Name   string    `json:"name"`
	Dev    string    `json:"dev"`
	State  string    `json:"state"` // normal | draining | exhausted | recovering
	Since  time.Time `json:"since"`
	Reason string    `json:"reason,omitempty"`
	// What the device did over the last tick.
	IOPS       float64 `json:"iops"`
	Bps        float64 `json:"bps"`
	Util       float64 `json:"util"` // 0..1
	QueueDepth float64 `json:"queue_depth"`
	PeakIOPS   float64 `json:"peak_iops"`
	PeakBps    float64 `json:"peak_bps"`
	FloorIOPS  float64 `json:"floor_iops,omitempty"`
	FloorBps   float64 `json:"floor_bps,omitempty"`
	// The device's own counters (/sys/block/<dev>/stat, every process's
	// I/O), cumulative as the kernel keeps them: requests and bytes
	// completed, the time it had I/O in flight (io_ticks) and that time
	// weighted by the requests in flight (time_in_queue). Zero before the
	// first reading.
	ReadIOs        uint64  `json:"read_ios"`
	WriteIOs       uint64  `json:"write_ios"`
	ReadBytes      uint64  `json:"read_bytes"`
	WriteBytes     uint64  `json:"write_bytes"`
	IOTime         float64 `json:"io_time_seconds"`
	IOTimeWeighted float64 `json:"io_time_weighted_seconds"`
	// The daemon's own caps on the device over the last tick: the rates
	// they allowed the capped workloads together (0: none in force), and
	// whether a workload ran at its cap (held back by it) for a good part
	// of the tick. While it did, what the device delivered is the
	// daemon's doing and is not judged a floor.
	CapIOPS    float64 `json:"cap_iops,omitempty"`
	CapBps     float64 `json:"cap_bps,omitempty"`
	HeldByCaps bool    `json:"held_by_caps,omitempty"`
	// The burst-credit model, when one is configured for the device.
	Model *BurstModel `json:"model,omitempty"`
	// Hold is the burst hold, when one is configured and the device has a
	// model and a throttle.
	Hold *BurstHold `json:"hold,omitempty"`
}

// BurstHold is a device's burst hold: while Held, the workloads at
// FromLevel and worse share at most the model's baseline.
type BurstHold struct {
	Held   bool      `json:"held"`
	Since  time.Time `json:"since"` // when Held last changed (zero: never held)
	Reason string    `json:"reason,omitempty"`
	// Below and Release are the balances (0..1) at which it engages and may
	// be released.
	Below     float64 `json:"below"`
	Release   float64 `json:"release"`
	FromLevel int     `json:"from_level"`
	// CapIOPS and CapBps are the baseline held to while Held (0: that unit
	// not held).
	CapIOPS float64 `json:"cap_iops,omitempty"`
	CapBps  float64 `json:"cap_bps,omitempty"`
}

// BurstModel is the modelled credit bucket of a device.
type BurstModel struct {
	Name    string  `json:"name"`
	Balance float64 `json:"balance"` // 0..1 of the bucket that runs out first
	// BalanceIOs and BalanceBytes are the credits left (0 without that bucket).
	BalanceIOs   float64 `json:"balance_ios"`
	BalanceBytes float64 `json:"balance_bytes"`
	// DrainIOPS and DrainBps are the net credit spent per second
	// (negative: refilling).
	DrainIOPS float64 `json:"drain_iops"`
	DrainBps  float64 `json:"drain_bps"`
	// SecondsToEmpty at the present drain; nil when not draining.
	SecondsToEmpty *float64 `json:"seconds_to_empty,omitempty"`
}

// HealthEvent is a device's change of state.
type HealthEvent struct {
	At     time.Time `json:"at"`
	Device string    `json:"device"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason"`
}

// SyncProbe is the sync-write probe: a small O_DSYNC write to Path every
// interval, the seed's `dd oflag=sync` made continuous.
type SyncProbe struct {
	Path   string  `json:"path"`
	Count  uint64  `json:"count"`
	Errors uint64  `json:"errors"`
	Last   float64 `json:"last_seconds"`
	Sum    float64 `json:"sum_seconds"`
	// Pending is how long the write in progress has waited so far, 0
	// when none is (a write that hangs shows here before it ends).
	Pending float64 `json:"pending_seconds"`
	// Buckets are the histogram's upper bounds in seconds, Counts the
	// cumulative number of writes at most that long.
	Buckets []float64 `json:"buckets"`
	Counts  []uint64  `json:"counts"`
}

package snapshot

// WorkloadLatency is what the I/O latency sensor (eBPF) measured of one
// workload's requests on one disk.
type WorkloadLatency struct {
	Device string    `json:"device"` // e.g. loop3, vda
	Dev    string    `json:"dev"`    // MAJ:MIN
	Read   OpLatency `json:"read"`
	Write  OpLatency `json:"write"`
}

// OpLatency is one direction (read or write) of a WorkloadLatency.
type OpLatency struct {
	// Requests completed and their bytes since the daemon began tracking
	// the workload.
	Requests uint64 `json:"requests"`
	Bytes    uint64 `json:"bytes"`
	// InFlight is how many requests were issued to the disk and not yet
	// completed at the last tick.
	InFlight uint64 `json:"in_flight"`
	// TickRequests is how many requests completed during the last tick;
	// P50 and P99 are the median and 99th percentile of their times (from
	// the request's allocation, or its issue, to its completion), and
	// Queue the mean of the part spent before the issue (in the
	// scheduler); all 0 when none completed. Seconds, to the histogram's
	// resolution (a quarter of the value).
	TickRequests uint64  `json:"tick_requests"`
	P50          float64 `json:"p50_seconds"`
	P99          float64 `json:"p99_seconds"`
	Queue        float64 `json:"queue_seconds"`
}

// Latency is the I/O latency sensor's state and its histograms per disk,
// operation and level: who waits, at which level.
type Latency struct {
	// Available is whether the sensor runs; Reason says why not, and Fix
	// what to do. Off: not for want of anything, the operator turned it
	// off (latency: off).
	Available bool   `json:"available"`
	Off       bool   `json:"off,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Fix       string `json:"fix,omitempty"`
	// Buckets are the upper bounds (seconds) of the histograms' buckets,
	// shared by every series; each series' Counts are cumulative, one per
	// bound (the +Inf bucket is its Requests).
	Buckets []float64       `json:"buckets,omitempty"`
	Series  []LatencySeries `json:"series,omitempty"`
	// Uncounted are requests not counted for want of room in the kernel's
	// table (a new cgroup's, while full); Untimed those not timed for want
	// of room in the table of requests in flight. Since start.
	Uncounted uint64 `json:"uncounted_requests,omitempty"`
	Untimed   uint64 `json:"untimed_requests,omitempty"`
	// Missed are block events the kernel skipped the sensor for (a
	// request completing in an interrupt while the sensor ran on that
	// CPU): each may be a request never counted as done.
	Missed uint64 `json:"missed_events,omitempty"`
	// Keys is how many (cgroup, disk, operation) aggregates the kernel
	// holds.
	Keys int `json:"keys"`
}

// LatencySeries is the histogram of the requests of every workload at one
// level on one disk in one direction since the daemon started, each
// request counted at the level its workload had when it completed.
type LatencySeries struct {
	Device    string `json:"device"`
	Dev       string `json:"dev"`
	Operation string `json:"operation"` // read | write
	// Level is "0" (exempt) .. "4", or "other": cgroups that are no
	// workload (the host's own, a stacked device's driver).
	Level    string   `json:"level"`
	Requests uint64   `json:"requests"`
	Bytes    uint64   `json:"bytes"`
	Sum      float64  `json:"sum_seconds"`
	Counts   []uint64 `json:"counts"`
}

// LatencySummary is what a one-line view shows of w's latency: the highest
// p99 of its last tick's requests over its disks and directions (seconds,
// 0 when none completed) and its requests in flight on all of them; ok is
// false when there is no latency record (no sensor, or no I/O yet).
func (w *Workload) LatencySummary() (p99 float64, inFlight uint64, ok bool) {
	for _, l := range w.Latency {
		p99 = max(p99, l.Read.P99, l.Write.P99)
		inFlight += l.Read.InFlight + l.Write.InFlight
	}
	return p99, inFlight, len(w.Latency) > 0
}

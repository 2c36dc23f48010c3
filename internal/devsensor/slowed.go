package devsensor

// One judgement of a device's counters, shared by the throttle's capacity
// estimate (internal/throttle) and the health tracker (internal/devhealth):
// the device was busy over a period, and it has slowed down — the same
// demand waits longer per request than it did at its best.

// The judgement's constants.
const (
	// BusyUtil: a device with I/O in flight at least this share of a
	// period was busy over it: demand was there, what completed is what
	// the device delivered.
	BusyUtil = 0.9
	// SlowedLatency: a busy device has slowed when a request spends at
	// least this many times longer in flight than at the reference (its
	// best): the same demand now waits. A shallower demand (one request
	// at a time) is slower with each request no slower, and is not that.
	SlowedLatency = 1.5
)

// Period is what a device's counters moved by over a period of Secs
// seconds: requests completed, milliseconds with I/O in flight (io_ticks)
// and milliseconds requests spent in flight, summed (time_in_queue).
type Period struct {
	Secs    float64
	IOs     uint64
	BusyMs  uint64
	QueueMs uint64
}

// Util is the share of the period with I/O in flight (0 for no period).
func (p Period) Util() float64 {
	if p.Secs <= 0 {
		return 0
	}
	return float64(p.BusyMs) / (p.Secs * 1000)
}

// LatencyMs is the mean time a request spent in flight, ms (Little's
// law); 0 when none completed.
func (p Period) LatencyMs() float64 {
	if p.IOs == 0 {
		return 0
	}
	return float64(p.QueueMs) / float64(p.IOs)
}

// Busy reports whether the device had I/O in flight at least BusyUtil of
// the period.
func (p Period) Busy() bool { return p.Util() >= BusyUtil }

// Slowed reports whether the device, busy over the period, kept each
// request in flight at least SlowedLatency times longer than refMs (its
// latency, ms, when it delivered its best; 0: none known, any latency is
// not below it). Whether it also delivered less is the caller's to say.
func (p Period) Slowed(refMs float64) bool {
	return p.Busy() && p.LatencyMs() >= SlowedLatency*refMs
}

package throttle

import "time"

// Defaults of the throttle mechanism.
const (
	// DefaultHold: the caps stay this long after a better level's
	// last I/O on the device, so a reader's pauses between requests (10 ms
	// at 100 IOPS, a Poisson gap now and then) do not lift them, while a
	// neighbour gets the whole device back well within a second.
	DefaultHold = 250 * time.Millisecond
	// DefaultPeriod is the fast loop's period: how soon a better
	// level's first I/O puts the caps on.
	DefaultPeriod = 10 * time.Millisecond
	// DefaultReads bounds the fast loop's counter reads per second
	// and device (Config.Reads): with many demoted workloads the period
	// grows instead, so its cost stays per device, not per workload (what
	// a read costs: docs/bench/scale.md; reads that take longer than
	// ~10 µs each — a parent's counters with thousands of workloads below
	// it — count by the time they took). Each period reads the demoted
	// workloads once and the parents twice, so with one parent the period
	// stays 10 ms up to 3 demoted workloads, ~100 ms at 48; 1,000 demoted
	// streams are looked at every 2 s — as soon as when the demoted were
	// read twice a period at 1,000 reads per second, for half the CPU.
	DefaultReads = 500
	// DefaultBurst: see Config.MaxBurst.
	DefaultBurst = 5 * time.Millisecond
)

// Config configures the work-conserving throttle used on devices whose
// mechanism is the throttle (mech.Throttle).
//
// A fast loop per device (every Period) reads the byte counters of the
// parents of the managed cgroups and of every demoted workload (level 2 and
// below). What the parents did beyond the demoted workloads was done by a
// better level — a level-1 workload, a new container before its first tick.
// While a better level did I/O on the device within Hold, every heavy
// workload of a worse level — one that takes a large share of the device,
// in bytes or requests in flight (load.go) — is capped, in bytes/s
// and IOPS, to its level's share of what the device delivers now; a light
// one is never capped to protect another. Within Hold after the better
// level stops, the caps are lifted. While a capped workload is active its
// cap is written again every period (re-armed): blk-throttle restarts its
// slice on each write, so a backlogged group is let through cap × Period
// per write instead of cap × slice (100 ms) at once, at the same rate —
// 5 % of a loop device re-armed every 10 ms held a 4 KiB victim's p99 at
// 1.0 ms where the same cap left alone gave 3.0 ms (pace.go). The device's capacity is estimated from its own
// counters, read through the device's sensor (devsensor; see capacity in
// caps.go, where the cap arithmetic is too). A Ceiling (Hold)
// bounds the worse levels' caps further, better level active or not. What
// the caps allowed, and whether a workload was held back by one, is added
// to the device sensor's Caps every period, so a consumer of the device's
// counters can tell the throttle's doing from the device's.
//
// Steered (Steer, the latency controller of internal/control, where the
// I/O latency sensor runs), the MaxBurst bound gives way to a share the
// controller moves each tick from the protected requests' measured p99:
// the capped levels' shares are scaled so their sum is that share (each
// level still at most its own); see internal/control's package doc for its
// rule. Not steered, the fixed rule above holds exactly.
type Config struct {
	// Shares[i] is the fraction of the device's capacity that all the
	// workloads of level i+1 together may use while a better level is doing
	// I/O on the device. Shares[0] is 1 (level 1 is never capped). When
	// several capped levels are active their sum is scaled down to the
	// largest of them.
	Shares [levels]float64
	// Min is the lowest bytes/s cap ever set on a workload.
	Min uint64
	// Hold: see DefaultHold; 0 means that.
	Hold time.Duration
	// Period: see DefaultPeriod; 0 means that.
	Period time.Duration
	// Reads: see DefaultReads; 0 means that.
	Reads int
	// MaxBurst bounds, while a better level is active, how long one
	// slice's worth of a capped workload's cap may keep the device busy:
	// blk-throttle lets a backlogged group dispatch a whole slice's bytes
	// and I/Os at the start of each slice, and a better level's request
	// that arrives then waits behind all of it. A cap is therefore at
	// most capacity × MaxBurst / slice, the slice 100 ms (throttleSlice):
	// 5 % with the default 5 ms. Re-arming every Period shrinks the burst
	// further, to cap × Period; the bound is what holds when the loop is
	// late by a whole slice. It is not raised to MaxBurst / Period: 10 %
	// re-armed every 10 ms gave the victim 4.8 ms, 50 % stopped limiting
	// at all (the group's queue drained between writes and the kernel
	// dropped its debt). 0: no bound.
	MaxBurst time.Duration
	// Light is the share of the device's capacity in bytes/s below which
	// a workload is light (never capped to protect another) unless it
	// holds a queue; see load.go. 0 means DefaultLight.
	Light float64
	// InFlight measures the workloads' requests in flight; nil: estimated
	// from the device's counters.
	InFlight InFlight
	// DebtForgiven: the kernel drops a re-armed group's request debt
	// when the time since the last write allowed no whole request
	// (host.ThrottleForgivesRequestDebt: 6.16 and later). A workload that
	// runs at its bytes cap is then re-armed every Period whatever its
	// request cap; see rearmDue in pace.go.
	DebtForgiven bool
}

// DefaultShares are the throttle's default Shares, the one place
// they are written (config.Default takes them from here).
func DefaultShares() [levels]float64 { return [levels]float64{1, 0.6, 0.45, 0.3} }

// SteerRange is the range of the share the latency controller steers
// (Steer): from the fixed rule's share, where it starts — MaxBurst / slice
// (5 %), at most the largest managed level's share — up to that largest
// share (the caps still give each level at most its own, scaled).
func (t Config) SteerRange() (start, most float64) {
	shares := t.Shares
	if shares[0] == 0 {
		shares = DefaultShares()
	}
	for _, s := range shares[1:] {
		if s < 1 {
			most = max(most, s)
		}
	}
	start = most
	if t.MaxBurst > 0 {
		start = min(start, t.MaxBurst.Seconds()/throttleSlice.Seconds())
	}
	return start, most
}

package devhealth

import (
	"fmt"
	"math"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
)

// Sample is what a device did over one interval, from two readings of its
// stat file.
type Sample struct {
	At    time.Time // end of the interval
	Secs  float64   // its length
	IOs   uint64    // requests completed (read + write)
	Bytes uint64    // read + written
	// BusyMs is io_ticks' delta: time with I/O in flight. QueueMs is
	// time_in_queue's: in-flight requests integrated over time, so
	// QueueMs/(Secs*1000) is the average number in flight.
	BusyMs, QueueMs uint64
	// Caps is what the daemon's own caps did on the device over the
	// interval (devsensor.Caps): a sample in which a workload was held
	// back by one says what the daemon imposed, not what the device can.
	Caps devsensor.Caps
}

// FromReadings is the sample between two readings of a device's sensor,
// the kernel's counters and the daemon's caps over the same interval.
func FromReadings(prev, cur devsensor.Reading) Sample {
	s := Delta(prev.Stat, cur.Stat, cur.At, cur.At.Sub(prev.At).Seconds())
	s.Caps = cur.Caps.Sub(prev.Caps)
	return s
}

// Delta is the sample between two readings of a device's stat file taken
// secs apart, the second at at. A counter that went backwards (device
// re-attached) counts from zero.
func Delta(prev, cur cgroupfs.BlockStat, at time.Time, secs float64) Sample {
	return Sample{At: at, Secs: secs, IOs: sub(cur.IOs(), prev.IOs()), Bytes: sub(cur.Bytes(), prev.Bytes()),
		BusyMs: sub(cur.IOTicksMs, prev.IOTicksMs), QueueMs: sub(cur.TimeInQueueMs, prev.TimeInQueueMs)}
}

func sub(cur, prev uint64) uint64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

func (s Sample) iops() float64 { return float64(s.IOs) / s.Secs }
func (s Sample) bps() float64  { return float64(s.Bytes) / s.Secs }
func (s Sample) util() float64 { return math.Min(1, float64(s.BusyMs)/(s.Secs*1000)) }
func (s Sample) depth() float64 {
	return float64(s.QueueMs) / (s.Secs * 1000)
}

// busy: the device had I/O in flight nearly all the time, at least one
// request on average: demand is there, what completes is what the device
// delivers.
func (s Sample) busy() bool { return s.util() >= devsensor.BusyUtil && s.depth() >= 1 }

// heldByCaps: for at least heldShare of the sample a workload ran at a
// cap of the daemon's: the device delivered what the daemon let through.
func (s Sample) heldByCaps() bool { return s.Caps.HeldSecs >= heldShare*s.Secs }

// latency is the mean time a request spent in flight (Little's law), s.
func (s Sample) latency() float64 {
	if s.IOs == 0 {
		return math.Inf(1)
	}
	return float64(s.QueueMs) / 1000 / float64(s.IOs)
}

// State is a device's health.
type State int

const (
	Normal     State = iota
	Draining         // spending burst credit, the model expects it to run out
	Exhausted        // delivering a steady floor while demand stays high
	Recovering       // was exhausted; demand fell or the rate came back
)

func (s State) String() string {
	switch s {
	case Normal:
		return "normal"
	case Draining:
		return "draining"
	case Exhausted:
		return "exhausted"
	case Recovering:
		return "recovering"
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// The detector's constants. They describe the shape of a throttle, not a
// device: no configuration.
const (
	// window: how long the rate must sit on its floor. Detection then
	// takes window plus one sample (the one that straddles the drop).
	window = 4 * time.Second
	// dropTo: the floor is at most this share of the busy peak.
	dropTo = 0.5
	// steady: the window's samples stay within this share of their mean
	// (plus two requests' worth of counting noise per sample).
	steady = 0.3
	// peakHalfLife: the busy peak is forgotten slowly.
	peakHalfLife = 30 * time.Minute
	// recoverAfter: without a model, how long recovering lasts without a
	// new floor before the device is normal again.
	recoverAfter = 60 * time.Second
	// idleToRecover: exhausted, demand gone for this long means the
	// bucket is filling again.
	idleToRecover = 3 * time.Second
	// drainTau: time constant of the drain rate's moving average (a
	// gp2 burst lasts half an hour; 20 s smooths a bursty workload and
	// still follows a change within a minute).
	drainTau = 20 * time.Second
	// drainingHorizon: with a model, a device is draining once the bucket
	// would be empty within this long (or is below lowFrac).
	drainingHorizon = 15 * time.Minute
	lowFrac         = 0.2
	// Recovering ends with a model once the balance is back above this.
	recoveredFrac = 0.5
	// heldShare: a sample in which a workload ran at one of the daemon's
	// caps for at least this share of it is the daemon's doing.
	heldShare = 0.25
)

// Status is a device's health after a sample.
type Status struct {
	State  State
	Since  time.Time // when State was entered
	Reason string    // why it was entered

	// What the last sample saw.
	IOPS, Bps  float64
	Util       float64 // 0..1
	QueueDepth float64 // mean requests in flight
	// PeakIOPS and PeakBps are the busy peaks the floor is judged against;
	// FloorIOPS and FloorBps the floor while exhausted (0 otherwise).
	PeakIOPS, PeakBps   float64
	FloorIOPS, FloorBps float64
	// The daemon's own caps in the last sample: the rates they allowed
	// the capped workloads together (averaged over the sample, 0: no
	// cap), and whether a workload ran at its cap (held back by it) for
	// a good part of it. While that is so the device's rate is not judged
	// a floor.
	CapIOPS, CapBps float64
	HeldByCaps      bool

	// With a model (Modeled): the estimated balance (fraction of the
	// bucket that runs out first, and per unit), the net credit spent per
	// second (negative: refilling), and the seconds until empty at that
	// rate (+Inf when not draining).
	Modeled                  bool
	Balance                  float64
	BalanceIOs, BalanceBytes float64
	DrainIOPS, DrainBps      float64
	TimeToEmpty              float64
}

// Tracker follows one device. The zero value is not usable: NewTracker.
type Tracker struct {
	model Model
	// stacked: the device sits on a disk below it (StackedOn); the floor
	// detector does not judge it.
	stacked bool

	st     Status
	recent []Sample // the last window of samples
	// peaks while busy, and the request latency at the IOPS peak
	peakIOPS, peakBps, peakLat float64
	peakAt                     time.Time
	drainW                     float64   // weight the drain averages have gathered (bias correction)
	drainIOPS, drainBps        float64   // uncorrected averages
	idleSince                  time.Time // exhausted: first non-busy sample
	calmSince                  time.Time // draining: first sample not draining
	started                    bool
}

// NewTracker starts following a device whose model is m (the zero Model:
// none, the detector alone). The bucket starts full, as a new volume's.
func NewTracker(m Model) *Tracker {
	t := &Tracker{model: m}
	t.st.Modeled = m.Enabled()
	t.st.BalanceIOs, t.st.BalanceBytes = m.IOPS.Size, m.Bytes.Size
	t.st.Balance = 1
	t.st.TimeToEmpty = math.Inf(1)
	return t
}

// StackedOn tells the tracker that its device is stacked on another (a
// loop device over a file, dm over its slaves): a burst balance is a
// disk's, and a stacked device's steady low rate while busy is the disk
// below it — its own traffic, a cap of the daemon's on the stacked device,
// or anyone else's I/O on that disk (measured: a loop device over the
// machine's disk at 4 % of its peak, 10x slower a request, while the test
// suite's other packages read that disk) — never a credit of its own. The
// floor detector then does not judge it (the disk below is judged where it
// is watched); a model given for it still is.
func (t *Tracker) StackedOn() { t.stacked = true }

// Status is the state after the last sample.
func (t *Tracker) Status() Status { return t.st }

// Observe folds in one sample and returns the new status and whether the
// state changed. Samples of zero length are ignored.
func (t *Tracker) Observe(s Sample) (Status, bool) {
	if s.Secs <= 0 {
		return t.st, false
	}
	if !t.started {
		t.started = true
		t.st.Since = s.At
	}
	st := &t.st
	st.IOPS, st.Bps, st.Util, st.QueueDepth = s.iops(), s.bps(), s.util(), s.depth()
	st.CapIOPS, st.CapBps, st.HeldByCaps = s.Caps.IOs/s.Secs, s.Caps.Bytes/s.Secs, s.heldByCaps()
	t.recent = append(t.recent, s)
	cut := 0
	for cut < len(t.recent) && s.At.Sub(t.recent[cut].At) > window {
		cut++
	}
	t.recent = append(t.recent[:0], t.recent[cut:]...)

	t.updatePeaks(s)
	t.updateModel(s)
	floor, why := t.floor()

	prev := st.State
	switch st.State {
	case Normal, Draining:
		switch {
		case floor:
			t.enter(Exhausted, s.At, why)
		case st.Modeled && st.Balance <= 0 && s.busy():
			t.enter(Exhausted, s.At, "model: burst balance empty while the device is busy")
		case st.State == Normal && t.draining():
			t.enter(Draining, s.At, fmt.Sprintf("model: spending %.0f%% of a full bucket, empty in %.0fs at this rate",
				100*(1-st.Balance), st.TimeToEmpty))
		case st.State == Draining && !t.draining():
			if t.calmSince.IsZero() {
				t.calmSince = s.At
			}
			if s.At.Sub(t.calmSince) >= 10*time.Second {
				t.enter(Normal, s.At, "model: no longer spending burst credit")
			}
		default:
			t.calmSince = time.Time{}
		}
	case Exhausted:
		if !s.busy() {
			if t.idleSince.IsZero() {
				t.idleSince = s.At
			}
			if s.At.Sub(t.idleSince) >= idleToRecover {
				t.enter(Recovering, s.At, "demand fell: credit accrues again")
			}
			break
		}
		t.idleSince = time.Time{}
		if (st.FloorIOPS > 0 && st.IOPS >= 2*st.FloorIOPS) || (st.FloorBps > 0 && st.Bps >= 2*st.FloorBps) {
			t.enter(Recovering, s.At, fmt.Sprintf("rate back above the floor: %.0f IOPS, %.0f B/s", st.IOPS, st.Bps))
		}
	case Recovering:
		switch {
		case floor:
			t.enter(Exhausted, s.At, why)
		case st.Modeled && st.Balance >= recoveredFrac:
			t.enter(Normal, s.At, fmt.Sprintf("model: balance back to %.0f%%", 100*st.Balance))
		case !st.Modeled && s.At.Sub(st.Since) >= recoverAfter:
			t.enter(Normal, s.At, fmt.Sprintf("no floor for %s", recoverAfter))
		}
	}
	return t.st, st.State != prev
}

func (t *Tracker) enter(to State, at time.Time, why string) {
	t.st.State, t.st.Since, t.st.Reason = to, at, why
	t.idleSince, t.calmSince = time.Time{}, time.Time{}
	if to == Exhausted {
		n := float64(len(t.recent))
		var io, b float64
		for _, r := range t.recent {
			io += r.iops()
			b += r.bps()
		}
		t.st.FloorIOPS, t.st.FloorBps = io/n, b/n
		// The device says the bucket is empty: the model follows it (its
		// start may have been wrong).
		t.st.BalanceIOs, t.st.BalanceBytes, t.st.Balance = 0, 0, 0
		if t.st.Modeled {
			t.st.TimeToEmpty = 0
		}
	} else if to == Normal {
		t.st.FloorIOPS, t.st.FloorBps = 0, 0
	}
}

// updatePeaks keeps the peaks of what the device delivered, decaying, and
// the request latency at the IOPS peak. Any sample counts, busy or not: a
// device that bursts faster than its demand and then throttles below it is
// the case to catch. The peaks do not decay while exhausted (what the floor
// is judged against must not sink to it).
func (t *Tracker) updatePeaks(s Sample) {
	if t.st.State != Exhausted && !t.peakAt.IsZero() {
		f := math.Exp2(-s.Secs / peakHalfLife.Seconds())
		t.peakIOPS *= f
		t.peakBps *= f
	}
	if s.IOs == 0 {
		return
	}
	if r := s.iops(); r >= t.peakIOPS {
		t.peakIOPS, t.peakLat, t.peakAt = r, s.latency(), s.At
	}
	t.peakBps = math.Max(t.peakBps, s.bps())
	t.st.PeakIOPS, t.st.PeakBps = t.peakIOPS, t.peakBps
}

// floor reports whether the last window is a throttle's floor: the device
// busy over the window with a request in flight on average in every
// sample, a rate at most dropTo of its peak and steady, requests waiting
// devsensor.SlowedLatency times longer than at the peak — and none of it the daemon's
// doing: in no sample of the window was a workload held back by one of
// the daemon's own caps (a capped stream beside readers that keep the
// device busy is such a floor, imposed, not the device's).
func (t *Tracker) floor() (bool, string) {
	if t.stacked || len(t.recent) < 3 || t.recent[len(t.recent)-1].At.Sub(t.recent[0].At) < window-window/4 {
		return false, ""
	}
	var secs, ios, bytes, q, busyMs float64
	var queueMs uint64
	for _, r := range t.recent {
		if r.depth() < 1 || r.heldByCaps() {
			return false, ""
		}
		busyMs += float64(r.BusyMs)
		secs += r.Secs
		ios += float64(r.IOs)
		bytes += float64(r.Bytes)
		q += float64(r.QueueMs) / 1000
		queueMs += r.QueueMs
	}
	// Busy over the window, each request waiting longer than at the peak
	// (the same demand now waits: the device, not the workload, slowed):
	// the one busy/slowed judgement, the throttle's capacity estimate's too.
	per := devsensor.Period{Secs: secs, IOs: uint64(ios), BusyMs: uint64(busyMs), QueueMs: queueMs}
	if ios == 0 || !per.Busy() {
		return false, "" // idle, or nothing completes at all: a hang, not a floor
	}
	if !per.Slowed(t.peakLat * 1000) {
		return false, ""
	}
	lat := q / ios
	check := func(mean, peak float64, rate func(Sample) float64, per float64) bool {
		if peak <= 0 || mean > dropTo*peak {
			return false
		}
		for _, r := range t.recent {
			if math.Abs(rate(r)-mean) > steady*mean+2*per/r.Secs {
				return false
			}
		}
		return true
	}
	meanIOPS, meanBps := ios/secs, bytes/secs
	perIO := 1.0
	if ios > 0 {
		perIO = bytes / ios
	}
	if check(meanIOPS, t.peakIOPS, Sample.iops, 1) || check(meanBps, t.peakBps, Sample.bps, perIO) {
		return true, fmt.Sprintf("throttled by the device (burst credit exhausted?): a steady %.0f IOPS, %.0f B/s while busy (peak %.0f IOPS, %.0f B/s; a request waits %.1fx longer)",
			meanIOPS, meanBps, t.peakIOPS, t.peakBps, lat/t.peakLat)
	}
	return false, ""
}

// updateModel runs the buckets over the sample.
func (t *Tracker) updateModel(s Sample) {
	st := &t.st
	if !st.Modeled {
		return
	}
	// The drain rates are moving averages over drainTau, corrected for
	// their start from zero (the first samples are not diluted).
	a := 1 - math.Exp(-s.Secs/drainTau.Seconds())
	t.drainW += a * (1 - t.drainW)
	step := func(b Bucket, bal, avg, drain *float64, rate float64) float64 {
		if !b.Enabled() {
			return math.Inf(1)
		}
		d := rate - b.Baseline
		*bal = math.Max(0, math.Min(b.Size, *bal-d*s.Secs))
		*avg += a * (d - *avg)
		*drain = *avg / t.drainW
		if *drain <= 0 {
			return math.Inf(1)
		}
		return *bal / *drain
	}
	tte := math.Min(step(t.model.IOPS, &st.BalanceIOs, &t.drainIOPS, &st.DrainIOPS, s.iops()),
		step(t.model.Bytes, &st.BalanceBytes, &t.drainBps, &st.DrainBps, s.bps()))
	st.TimeToEmpty = tte
	frac := 1.0
	if t.model.IOPS.Enabled() {
		frac = math.Min(frac, st.BalanceIOs/t.model.IOPS.Size)
	}
	if t.model.Bytes.Enabled() {
		frac = math.Min(frac, st.BalanceBytes/t.model.Bytes.Size)
	}
	st.Balance = frac
}

func (t *Tracker) draining() bool {
	st := &t.st
	return st.Modeled && (st.DrainIOPS > 0 || st.DrainBps > 0) &&
		(st.TimeToEmpty < drainingHorizon.Seconds() || st.Balance < lowFrac)
}

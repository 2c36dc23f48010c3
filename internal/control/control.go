// Package control is the per-device latency controller: it holds the
// protected workloads' latency on a device within a target learned from the
// device itself, and gives the throttle's capped workloads the largest
// share of the device's capacity that keeps it (docs/latency.md says why
// this target and this rule).
// It is pure: the daemon hands it, once per tick, what the latency sensor
// timed; it returns the share. No file, no clock of its own.
//
// The rule, per device and tick:
//
//   - Measure: the protected requests are the small ones (mean size of a
//     cgroup's requests in the tick at most SmallRequest, 64 KiB) of the
//     tracked workloads that no cap of the throttle held on the device:
//     the victims, whatever their level (a light level-3 service is one).
//     Their times are pooled until MinSamples requests (10); the measure
//     is the pool's p99 (with fewer than 100 requests the nearest-rank p99
//     is the slowest one: a single slow request counts, as the victim
//     lives it). No pool, no decision: the share stays. While caps are in
//     force the pool is a window: Window requests (500), or WindowTicks
//     (5) ticks holding at least MinSamples, whichever comes first. One
//     tick's p99 of ~140 requests is their second slowest, so per-tick
//     decisions cut on two slow reads; over 500 it is the fifth slowest.
//     A tick whose own p90 is above twice the target (a tenth of its
//     requests that slow: an overload, not noise) is cut at once, deeply,
//     and starts a new window.
//
//   - Target: Config.Target when set (config latency_target), else
//     Multiple (2) × the device's unloaded latency: the pooled p99 of the
//     protected requests over ticks with no cap in force and no other
//     request on the device moving more bytes than they do, or of a probe.
//     The first such value is taken; later ones lower it at once and raise
//     it by a tenth of the difference (a lucky minimum ages). While caps
//     stay on (a streamer that never stops), the controller probes, like
//     BBR's min-RTT probe: two ticks at a tenth of the Floor share
//     (probeFrac: at the floor itself a streamer's large requests still
//     lift the victims' p99 well above unloaded), every ProbeEvery
//     (30 s) and before its first decision; the lower of their p99s is the
//     unloaded latency (one tick's is noisy, and the first still drains
//     what the capped workloads had queued), and the next tick is back at
//     the share before it. Where the device serves protected requests
//     alone (Input.Alone: nothing else in flight from their issue to their
//     completion, as beside a paced backup that leaves the device idle
//     most of the time), those are its unloaded latency, learned the same
//     way (the lower p99 of two pools, learnAlone) without a probe: no
//     probe is due while they come, so a moderate neighbour is never idled
//     to learn the target; a streamer that keeps the device busy leaves
//     none, and is probed as above.
//
//   - Share (AIMD, only while a cap was in force and held a workload back
//     in a tick of the window — a cap nobody runs into says nothing about
//     its size):
//     above the target, cut to 0.7× (0.5× when above twice the target),
//     never below Floor (2 %); at most half the target, raise by a quarter;
//     at most 0.8× the target, raise by Step (1 % of the capacity);
//     between, hold. A cut remembers the share it cut from (the knee,
//     like CUBIC's last maximum): for KneeHold (20 s) after it, raises stop
//     at kneeFrac (0.85) of the knee, so the share sits just below the
//     share that hurt instead of climbing back into it every few ticks
//     (cuts within kneeEvent, 3 s, of each other are one event: the knee
//     stays the highest share they came from);
//     after KneeHold without another cut the knee is forgotten and the
//     share probes past it by Step. Never above what the levels capped
//     now get together unsteered (Input.Max: a level-4 stream alone,
//     30 %), nor Max (the largest level share, 60 %). It starts at Start,
//     the throttle's fixed share without the controller (MaxBurst /
//     slice, 5 %).
//
//   - Work conservation (Config.Conserve, the daemon's default; lift.go):
//     a contention starts capped at Start (the throttle caps within its
//     fast loop's period, before any tick could measure), and the caps
//     are lifted as soon as a tick shows the protected requests at most
//     half their target; lifted, they come back only when the latency
//     goes above it, and only as deep as that takes. A held cap's
//     tick within half the target doubles the share only when the
//     ticks pooled at that share (at least doubleTicks, 2) are within it
//     too: one tick's p99 is its second slowest request. The learned
//     target is at least MinTarget (500 µs): 2× a 100 µs device is a
//     target any neighbour breaks, for a gain no victim notices.
//
// Failure modes: a target learned from 4 KiB health checks is tight for a
// service that later reads 64 KiB (the share then sits lower than it could,
// never above what protects); a device whose unloaded latency is noisy is
// learned low (tight); a device slowing down (burst credits) is followed at
// a tenth per probe; a tick is the controller's shortest period (1 s by
// default): the first tick of a too-large share is lived before it is cut,
// and a share only a little too large (the window's p99 above the target,
// no tick's p90 above twice it) for the rest of its window, up to
// WindowTicks. Without
// the sensor the daemon never steers and the throttle keeps its fixed
// share.
package control

import (
	"fmt"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/iolat"
)

// Defaults of the controller.
const (
	DefaultMultiple   = 2.0
	DefaultFloor      = 0.02
	DefaultStep       = 0.01
	DefaultProbeEvery = 30 * time.Second
	DefaultMinSamples = 10
	// DefaultWindow is how many protected requests a loaded decision
	// pools. Measured in the host scenario (docs/mechanisms.md, two
	// alternated pairs of one-trial runs): deciding on ~500 instead of
	// each tick's ~140 gave web p99 2.12/2.30x idle against 2.74/2.68x,
	// the streamer 4.0/3.2 % against 2.6/2.3 %; the three-trial host
	// report of the built window (docs/bench/contention-host.md as of 4d0505c) kept
	// the streamer at 3 %, as the per-tick rule's had: fewer cuts on
	// noise, no share gained.
	DefaultWindow = 500
	// WindowTicks bounds a loaded window in ticks for victims too few to
	// fill Window soon (eight health checks at 5/s fill 500 in 12 s).
	WindowTicks = 5
	// SmallRequest is the largest mean request size (bytes) of a
	// cgroup's requests in a tick for them to count as protected ones:
	// latency targets are about small requests; a 1 MiB read takes longer
	// unloaded and would move the target with the mix.
	SmallRequest = 64 << 10
	// DefaultMinTarget is the least learned target: on a device that
	// serves a 4 KiB read in 100 µs unloaded, 2x is 200 µs, which any
	// neighbour at all breaks, and capping it to hold that buys a
	// victim nothing it would notice; half a millisecond for a small
	// read is fast on every device class (docs/latency.md).
	DefaultMinTarget = 500 * time.Microsecond
	// KneeHold is how long a knee (the share a cut came from) bounds the
	// raises: measured on the host's loop device (bench contention
	// --scenario host), AIMD without it climbed back into the share that hurt
	// every 5-10 s, each climb a second of victims at 5-20x their p99.
	KneeHold = 20 * time.Second
)

// The AIMD's constants.
const (
	cutFactor     = 0.7  // above the target
	deepCutFactor = 0.5  // above twice the target
	fastRaise     = 1.25 // at most half the target
	raiseBelow    = 0.8  // at most this fraction of the target: raise by Step
	ageUp         = 0.1  // a higher unloaded sample moves the baseline by this part
	kneeFrac      = 0.85 // after a cut, raises stop at this part of the share cut from
	// kneeEvent: cuts this close to the last one are one event (a queue
	// the share let through drains over two or three ticks, each above
	// the target): the knee stays the highest share they came from. In
	// the host scenario (new disk, 15:01) two cuts a tick apart from 0.068
	// and 0.048 left the knee at 0.048, and the share sat at 0.04 for the
	// whole KneeHold with the victims' p99 at half the target.
	kneeEvent     = 3 * time.Second
	maxProbeTicks = 3 // a probe without enough requests gives up after this many ticks
	// probeMeasures: a probe measures this many pools at the floor and
	// learns the lowest p99. One tick's p99 of ~140 requests is about its
	// second-slowest request: in the host scenario single probes learned
	// 360 µs in three runs and 1.9 ms in a fourth, whose 5.7 ms target
	// held for half a minute; the first tick also still drains what the
	// capped workloads had queued.
	probeMeasures = 2
	// probeFrac: a probe runs at this part of the Floor (0.2 % by
	// default), close to unloaded. At the floor itself the capped
	// streamer's large requests still reach the device: in the host
	// scenario (a loop device streaming 0.7-1 GB/s, 633 KB requests) a
	// static 2 % cap left the web reader's p99 at 1.8-5.7x idle, and
	// probes at the floor learned 0.5-1.2 ms as unloaded against an idle
	// p99 of 0.53 ms: a target of up to 7x idle.
	probeFrac = 0.1
	// fastCutQ: a loaded tick whose quantile fastCutQ is above twice the
	// target is cut at once, without waiting for its window.
	fastCutQ = 0.9
)

// Config configures one device's controller. Zero fields take defaults.
type Config struct {
	// Target is a fixed latency target for the protected requests' p99;
	// 0: Multiple × the device's unloaded latency, learned.
	Target time.Duration
	// Multiple: see Target; 0 means DefaultMultiple.
	Multiple float64
	// Start is the share before any decision (the throttle's fixed
	// share); Floor and Max bound the share; Step is the slow raise.
	Start, Floor, Max, Step float64
	// ProbeEvery: while caps stay on, the unloaded latency is probed this
	// often; 0 means DefaultProbeEvery.
	ProbeEvery time.Duration
	// MinSamples: requests pooled before a measure; 0 means the default.
	MinSamples uint64
	// Window: protected requests pooled before a loaded decision (see
	// the package doc); 0 means DefaultWindow. At most MinSamples means
	// every tick with MinSamples decides.
	Window uint64
	// MinTarget is the least learned target (Multiple × unloaded is
	// raised to it); 0 means DefaultMinTarget, negative none. A fixed
	// Target is taken as it is.
	MinTarget time.Duration
	// Conserve makes the controller work-conserving (lift.go): it lifts
	// the caps (State.Lifted, share 1) once the protected requests are
	// measured well within their target, caps again only when their
	// latency goes above it, and lifts the
	// caps again when the latency no longer needs them.
	Conserve bool
}

// withDefaults fills c's zero fields and checks it.
func (c Config) withDefaults() (Config, error) {
	if c.Multiple == 0 {
		c.Multiple = DefaultMultiple
	}
	if c.Floor == 0 {
		c.Floor = DefaultFloor
	}
	if c.Step == 0 {
		c.Step = DefaultStep
	}
	if c.ProbeEvery == 0 {
		c.ProbeEvery = DefaultProbeEvery
	}
	if c.MinSamples == 0 {
		c.MinSamples = DefaultMinSamples
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	switch {
	case c.MinTarget == 0:
		c.MinTarget = DefaultMinTarget
	case c.MinTarget < 0:
		c.MinTarget = 0
	}
	if c.Max == 0 {
		c.Max = 1
	}
	if c.Start == 0 {
		c.Start = c.Floor
	}
	switch {
	case c.Target < 0:
		return c, fmt.Errorf("latency target %s: must not be negative", c.Target)
	case c.Multiple < 1:
		return c, fmt.Errorf("latency target multiple %g: must be at least 1", c.Multiple)
	case c.Floor <= 0 || c.Floor > c.Max || c.Max > 1:
		return c, fmt.Errorf("share floor %g and max %g: want 0 < floor <= max <= 1", c.Floor, c.Max)
	case c.Step <= 0 || c.Step > 1:
		return c, fmt.Errorf("share step %g: want 0 < step <= 1", c.Step)
	}
	c.Start = min(max(c.Start, c.Floor), c.Max)
	return c, nil
}

// Input is what one device's protected requests and caps did since the
// last Step.
type Input struct {
	At time.Time
	// Hist: the protected requests' times (see the package doc).
	Hist iolat.Hist
	// Alone: those of them the device served alone (iolat.Delta.Alone:
	// nothing else in flight from their issue to their completion), the
	// device's unloaded latency whatever the neighbours do.
	Alone iolat.Hist
	// Capped: a cap of the throttle was in force on the device over the
	// interval; Held: one held its workload back (it ran at its cap).
	Capped, Held bool
	// Quiet: no other request on the device moved more bytes than the
	// protected ones (with Capped false: an unloaded interval).
	Quiet bool
	// Max, when above 0, bounds the share below Config.Max: the most the
	// levels capped now can get (a level-4 stream alone: its 30 %), so no
	// tick is spent raising or cutting a share above what is in force.
	// Work-conserving (Config.Conserve), it does not: the throttle scales
	// the levels' caps up to a share above it (see mostOf).
	Max float64
	// Contended: the throttle's level rule would cap a workload on the
	// device over the interval (a better level active beside a heavy
	// worse one), whether a cap was in force or lifted by the controller
	// (Config.Conserve).
	Contended bool
	// Used is the part of the device's capacity the workloads the level
	// rule would cap moved over the interval, together (0: not known):
	// where a cut from lifted caps starts (lift.go).
	Used float64
	// InForce is the share the caps in force give those workloads
	// together (0: not known): a slow start doubles from it when above
	// the share (the throttle's least cap, 8 MiB/s, is 8 % of a 100 MiB/s
	// disk at a 5 % share: doubling the share would raise the cap in force
	// by a quarter).
	InForce float64
	// Refused: the throttle's lift guard refused the lift in force over
	// the interval and set the share before it back (the device's
	// requests waited longer at once, internal/throttle's guard.go): a
	// failed lift (lift.go).
	Refused bool
	// Queues: the throttle predicts that lifting the caps in force would
	// queue the let-go requests ahead of everyone's (its lift guard's
	// reference against the device's latency with nothing capped): a cap
	// that holds its neighbour back is not lifted (lift.go).
	Queues bool
	// Shallow: the throttle measured fewer than one request in flight
	// on the device, on average, with nothing capped (its lift guard's
	// depth): the device idles between the neighbours' requests. Work-conserving, the
	// controller then lifts the caps before a contention (lift.go: an
	// idle lift), which the throttle refuses at once where the device
	// queues after all.
	Shallow bool
}

// State is what the controller shows (snapshot, metrics).
type State struct {
	// Share is the capped workloads' share of the device's capacity, all
	// together.
	Share float64
	// Target is the protected p99 held; 0 until learned. Baseline is the
	// learned unloaded latency (0: none yet).
	Target, Baseline time.Duration
	// P99 is the last measure of the protected requests (0: none yet).
	P99 time.Duration
	// Probing: this tick's share is the probe's (a tenth of the floor).
	Probing bool
	// Lifted: no cap is needed now (Config.Conserve); Share is then 1.
	Lifted bool
}

// Controller is one device's controller.
type Controller struct {
	cfg       Config
	st        State
	pool      iolat.Hist
	poolLoad  bool // the pool holds loaded (capped) ticks' requests
	poolProbe bool // the pool holds a probe's requests
	poolTicks int  // ticks pooled (a loaded window's length)
	poolHeld  bool // a cap held its workload back in one of them
	probeAt   time.Time
	probeN    int // ticks into the current probe
	probeM    int // pools measured in it
	probeMin  time.Duration
	before    float64 // the share before the probe
	learnedAt time.Time
	knee      float64 // the share the last cut came from (0: none)
	// dblFrom, dblTo: the last doubling of the slow start, from and to
	// (0: none to check; see checkDouble).
	dblFrom, dblTo float64
	kneeAt         time.Time
	lift           liftState // Config.Conserve's (lift.go)
	// The protected requests served alone (Input.Alone): the pool
	// filling, its ticks, and the p99 of the first of a pair measured.
	alonePool  iolat.Hist
	aloneTicks int
	aloneLast  uint64 // served alone in the last tick
	aloneFirst time.Duration
}

// New returns a controller; an error names the bad value.
func New(cfg Config) (*Controller, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctl := &Controller{cfg: c, st: State{Share: c.Start, Target: c.Target}}
	if c.Conserve {
		ctl.lift.wait = LiftBackoff
	}
	return ctl, nil
}

// State returns what the controller holds now.
func (c *Controller) State() State { return c.st }

// Step folds in one tick and returns the share the capped workloads get
// until the next one.
func (c *Controller) Step(in Input) State {
	c.learnAlone(in)
	probing := c.st.Probing
	loaded := in.Capped && !probing
	unloaded := !in.Capped && in.Quiet
	// A pool holds one kind of interval: loaded, unloaded or a probe.
	if c.pool.Count() > 0 && (c.poolLoad != loaded || c.poolProbe != probing) {
		c.resetPool()
	}
	c.poolLoad, c.poolProbe = loaded, probing
	if probing || loaded || unloaded {
		c.pool.Add(&in.Hist)
		c.poolTicks++
		c.poolHeld = c.poolHeld || in.Held
	}
	n := c.pool.Count()
	measured := n >= c.cfg.MinSamples
	if loaded {
		// A loaded pool is a window (see the package doc).
		measured = measured && (n >= c.cfg.Window || c.poolTicks >= WindowTicks)
	}
	var m time.Duration
	held := c.poolHeld
	if c.st.Lifted && !probing {
		return c.stepLifted(in, unloaded)
	}
	if measured {
		m = c.pool.Quantile(0.99)
		c.st.P99 = m
		c.resetPool()
	}
	switch {
	case probing:
		c.probeN++
		if measured {
			c.probeM++
			if c.probeMin == 0 || m < c.probeMin {
				c.probeMin = m
			}
		}
		if c.probeM >= probeMeasures || c.probeN >= probeMeasures+maxProbeTicks {
			if c.probeMin > 0 {
				c.learn(in.At, c.probeMin)
			}
			c.st.Probing, c.st.Share, c.probeAt = false, c.before, in.At
		}
		return c.st
	case unloaded:
		if measured {
			c.learn(in.At, m)
		}
		return c.idleStep(in)
	case !in.Capped:
		return c.idleStep(in)
	}
	if in.Contended {
		c.lift.contendedAt = in.At
	}
	// Loaded: probe first when the unloaded latency is unknown or old.
	if c.dueProbe(in.At) {
		c.before, c.st.Share, c.st.Probing, c.probeN, c.probeM, c.probeMin = c.st.Share, probeFrac*c.cfg.Floor, true, 0, 0, 0
		c.resetPool()
		return c.st
	}
	most := c.mostOf(in.Max)
	c.st.Share = min(c.st.Share, most)
	t := c.st.Target
	s := c.st.Share
	if !measured && t != 0 && in.Held && c.slowTick(&in.Hist, 2*t) {
		// An overload within the window: cut now, start a new window.
		c.lift.checkCut = false // the cut from lifted was needed
		c.st.P99 = in.Hist.Quantile(0.99)
		c.resetPool()
		c.st.Share = max(c.cfg.Floor, s*deepCutFactor)
		c.setKnee(in.At, s)
		return c.st
	}
	if c.checkDouble(in, t, s) {
		return c.st
	}
	if lift, double := c.liftDue(in, measured, m, t, s, most, in.Held || held); lift {
		return c.liftNow(in.At)
	} else if double {
		// A raise the knee bounds to the share in force moves nothing: no
		// new window then, or no window is measured while the knee holds
		// (each good tick reset it) and a window above the target, good
		// and bad ticks in turn, never cuts.
		if ns := c.raise(in.At, s, min(most, c.doubled(s, in.InForce))); ns > s {
			c.st.Share, c.dblFrom, c.dblTo = ns, s, ns
			c.resetPool()
			return c.st
		}
	}
	if measured && c.cfg.Conserve && c.checkedCut(in.At, m) {
		// The cut bought nothing (lift.go): undone. From lifted: lifted
		// again, the wait it started undone; capped: the share before it,
		// the knee it set forgotten, and lifted where the throttle does
		// not predict that a lift queues and no failed lift is waited out
		// (the caps may be what slows the victims: liftUntried).
		if c.lift.cutShare == 0 {
			c.lift.cutAt = time.Time{}
			return c.liftNow(in.At)
		}
		c.st.Share, c.knee = max(c.st.Share, c.lift.cutShare), 0
		if c.liftUntried(in) {
			return c.liftNow(in.At)
		}
		return c.st
	}
	if !measured || t == 0 || !held {
		return c.st
	}
	if nf := c.lift.noiseFloor(in.At); c.cfg.Conserve && nf > t {
		t = nf // the latency no cap lowered (lift.go)
	}
	switch {
	case m > 2*t:
		c.windowCut(in.At, m, t, s, deepCutFactor)
	case m > t:
		c.windowCut(in.At, m, t, s, cutFactor)
	case 2*m <= t && c.cfg.Conserve:
		// Work-conserving, a window well within the target while the cap
		// holds its neighbour is the slow start's tick, pooled: double.
		c.st.Share = c.raise(in.At, s, min(most, c.doubled(s, in.InForce)))
		c.dblFrom, c.dblTo = s, c.st.Share
	case 2*m <= t:
		c.st.Share = c.raise(in.At, s, min(most, max(s*fastRaise, s+c.cfg.Step)))
	case float64(m) <= raiseBelow*float64(t):
		c.st.Share = c.raise(in.At, s, min(most, s+c.cfg.Step))
	}
	return c.st
}

// slowStartEnd: the slow start doubles the share up to this part of the
// capacity, and raises it by a quarter (fastRaise) above. A doubling's
// overshoot costs the victims one tick at the share doubled to, and the
// cost grows with the share: each period's re-arm lets share × period of
// the device's time through, and near half the capacity a QD32 reader's
// queue drains between writes, so the kernel drops its debt and the cap
// stops holding. In TestRealV1LatencyEffect (2026-12-07, after the
// throttle's one file a period) doublings from 22 % to 44 % held, from
// 35 % to 52-70 % gave the victim a second of 10-25 ms reads (8x idle
// over the pair) before the check set it back.
const slowStartEnd = 0.25

// doubled is the slow start's raise from share s (from inForce where
// higher): doubled, but not past slowStartEnd unless s already is, where
// it is a quarter more.
func (c *Controller) doubled(s, inForce float64) float64 {
	if s >= slowStartEnd {
		return max(s*fastRaise, s+c.cfg.Step)
	}
	return max(s, min(2*max(s, inForce), slowStartEnd))
}

// checkDouble makes the first tick of at least MinSamples protected
// requests after a doubling (at the share it doubled to, t the target, s
// the share) its check: its p99 above the target with the cap holding
// its neighbour, the share it doubled from is back at once, and the knee
// is the share that hurt. Without it an overshoot waited for a window
// (up to WindowTicks) below the fast cut's twice the target: in a make
// test (TestRealV1LatencyEffect, 2026-12-03) per-tick doublings took a
// QD32 streamer from 5 % to 20 % in 4 s, and the victim's p99 stayed at
// 6-7x idle for the 6 s left, each pair alike.
func (c *Controller) checkDouble(in Input, t time.Duration, s float64) bool {
	if c.dblTo == 0 || in.Hist.Count() < c.cfg.MinSamples {
		return false
	}
	from, to := c.dblFrom, c.dblTo
	c.dblFrom, c.dblTo = 0, 0
	if s != to || t == 0 || !in.Held || in.Hist.Quantile(0.99) <= t {
		return false
	}
	c.st.P99 = in.Hist.Quantile(0.99)
	c.resetPool()
	c.st.Share = max(c.cfg.Floor, from)
	// The knee is this share, not the highest of the event (setKnee):
	// the next doubling stops below it, and the attempts converge on
	// the share that held (in the make test above, kept at the event's
	// highest, they went 5 -> 8.5 % and back every 2 s).
	c.knee, c.kneeAt = s, in.At
	return true
}

// windowCut is a measured window's cut of share s by factor (its p99 m
// above the target t): the knee at s, and the cut checked where work
// conservation is on (liftState.armCheck).
func (c *Controller) windowCut(at time.Time, m, t time.Duration, s, factor float64) {
	c.st.Share = max(c.cfg.Floor, s*factor)
	c.setKnee(at, s)
	if c.cfg.Conserve {
		c.lift.armCheck(m, t, s)
	}
}

// resetPool empties the pool.
func (c *Controller) resetPool() {
	c.pool, c.poolTicks, c.poolHeld = iolat.Hist{}, 0, false
}

// setKnee records a cut at at from share s: the knee is s, unless the
// last cut was within kneeEvent, when the two are one event and the knee
// stays the higher share.
func (c *Controller) setKnee(at time.Time, s float64) {
	if c.knee != 0 && at.Sub(c.kneeAt) <= kneeEvent {
		s = max(s, c.knee)
	}
	c.knee, c.kneeAt = s, at
}

// raise is a raise from share s to want, bounded by the knee while it is
// remembered (see the package doc); never below s.
func (c *Controller) raise(at time.Time, s, want float64) float64 {
	if c.knee == 0 {
		return want
	}
	if at.Sub(c.kneeAt) >= KneeHold {
		c.knee = 0
		return want
	}
	return max(s, min(want, kneeFrac*c.knee))
}

package control

import (
	"time"

	"github.com/ddiskqos/ddiskqos/internal/iolat"
)

// Work conservation (Config.Conserve): a cap only while the protected
// requests need it.
//
//   - A contention starts capped: the throttle caps a heavy neighbour
//     within its fast loop's period of a better level's first request, at
//     the share in force (Start at first), long before a tick could
//     measure anything; what a first tick of no cap costs is the whole
//     tick (a stacked disk's 500 ms queue for every victim request in it).
//   - Lift: a tick of at least MinSamples protected requests whose p99 is
//     at most half the target (a tick's p99 is its second-slowest request:
//     noise makes it higher, never lower) with no cap holding anybody back
//     or the share at its most (Config.Max; see mostOf); where a cap holds its neighbour
//     (it wants more), such a tick doubles the share instead (a slow
//     start: an overshoot costs the victims a tick at twice a share that
//     held, not a tick of no cap, which on the bench's stacked virtio disk
//     was a 500 ms queue for every victim request); or a full window at most
//     raiseBelow × the target with the share at the most the levels allow
//     (no raise left) or with no cap holding anybody back (the neighbour
//     wants less than its cap: the cap buys nothing), lifts the caps
//     (State.Lifted, share 1: the throttle caps nobody by level; a
//     burst-credit Ceiling still bounds). Without a learned target the
//     controller first probes, as below: a neighbour pays those ticks
//     once.
//   - Cut from lifted: while lifted and contended, a tick whose p90 is
//     above the target (a tenth of the victims' requests slow with no cap
//     in force: contention, not noise), a tick of too few requests to
//     measure whose median is (requests so slow that few fit in a tick),
//     or a window whose p99 is, caps again. At most LiftCutDeep × the target, the cap starts at
//     cutFactor × what the capped-to-be workloads moved (Input.Used): a
//     moderate neighbour loses a third, not its stream; far above it (a
//     stacked disk's queue) or with Used unknown, at Start.
//   - A lift cut within LiftKeep doubles the wait before the next
//     (LiftBackoff, up to LiftMaxWait), and one cut far above the target
//     (LiftCutDeep) waits LiftMaxWait at once: where only a small share
//     protects, a failed lift costs the victims one tick now and then, not
//     one every few seconds. A lift that lasts LiftKeep resets the wait.
//   - The throttle's lift guard (internal/throttle's guard.go) may refuse
//     a lift within its fast loop's periods, when the device's requests
//     wait at once several times longer than with the caps in force (a
//     queue the let-go workloads fill ahead of everyone): Input.Refused,
//     the share the lift came from back, and the wait of a failed lift.
//   - Lifted with nobody contended for LiftIdle: capped again at Start,
//     ready for the next contention's first request.
//   - The idle lift: where the throttle measured the device shallow with
//     nothing capped (Input.Shallow: fewer than two requests in flight
//     on average, a paced backup one request at a time), a tick with
//     nobody contended lifts the caps before any contention (unless a
//     failed lift's wait runs): a contention beside a neighbour that
//     queues nobody starts uncapped, and is capped only when the victims'
//     latency asks, as from any lift. Armed at Start instead, a paced
//     50 MB/s backup lost half its rate for the seconds the controller
//     took to learn and lift (docs/bench's vda cell, 8812a1d: 26 MB/s for
//     the first 2-6 s). The throttle watches the idle lift for as long as
//     it stands and refuses it within 40 ms when the device queues after
//     all (internal/throttle's watchIdle): Input.Refused, the caps armed
//     again at the share before.
//   - Noise no cap lowers: a lifted window's bar is also noiseMargin x
//     the p99 of its requests served alone where they are most of it
//     (aloneFloor).

// Work conservation's constants.
const (
	// LiftBackoff is the first wait after a cut from lifted caps before
	// they may be lifted again.
	LiftBackoff = 10 * time.Second
	// LiftMaxWait bounds the doubled wait.
	LiftMaxWait = 5 * time.Minute
	// LiftKeep: a lift cut sooner than this was a failed lift.
	LiftKeep = time.Minute
	// LiftIdle: lifted caps with nobody contended this long are armed
	// again (capped at Start for the next contention).
	LiftIdle = 10 * time.Second
	// LiftCutDeep: a cut from lifted at most this many times the target
	// starts from what the neighbours moved; above it, from Start.
	LiftCutDeep = 4.0
	// liftTick: a tick whose p99 is at most this part of the target lifts.
	liftTick = 0.5
	// doubleTicks: a held cap's tick within liftTick of the target
	// doubles the share only when the ticks pooled at this share, at least
	// this many with it, are within it too (pooledWithin).
	doubleTicks = 2
	// mostTicks: ticks well within the target in a row that lift a cap
	// holding its neighbour at the most share (liftDue).
	mostTicks = 2
	// fewSlow: a lifted tick of fewer than MinSamples protected requests
	// but at least this many, half of them above the target, cuts.
	fewSlow = 2
)

// liftState is what work conservation keeps.
type liftState struct {
	pool        iolat.Hist // the lifted, contended ticks' protected requests
	alone       iolat.Hist // those of them the device served alone
	poolTicks   int
	liftedAt    time.Time // the last lift
	cutAt       time.Time // the last cut from lifted
	wait        time.Duration
	contendedAt time.Time // the last contended tick while lifted
	// A cut on a window's p99 (cutFrom), from lifted or from a share
	// (cutShare), waits for the next window to show it helped (checkCut);
	// one that did not sets the noise floor windows are judged above
	// (noise, until noiseAt + NoiseHold).
	cutFrom  time.Duration
	checkCut bool
	cutShare float64 // the share a checked capped cut came from; 0: from lifted
	noise    time.Duration
	noiseAt  time.Time
	atMost   int     // ticks in a row well within the target, held at the most share
	before   float64 // the share the last lift came from
}

// A cut that buys nothing. A window whose p99 is a little above the
// target (not a tick's contention: its p90, or a tick too slow to fill)
// may be the device's own noise, which no cap removes: in
// TestRealV1NoHarm (a paced 50 MB/s neighbour on a loop device over the
// machine's disk, the victim's idle p99 1.25 ms and 2.9x that without any
// QoS) a lifted window at 3.76 ms cut a 3.64 ms target, the capped window
// after it measured 3.83 ms, and the AIMD went on cutting towards the
// floor: the neighbour lost a third of its rate for nothing (and, capped
// from the start, windows at 1.1-1.3x a tight target cut 24, 17, 12 MiB/s
// with the victim's p99 below no QoS's). So the first window after such a
// cut, lifted or capped, is its check: at least noHelpFrac of the p99 that
// cut, the cut is undone (lifted again, or the share before it back), and
// for NoiseHold the windows are judged against noiseMargin x that p99
// where it is above the target (the latency the caps could not lower). A
// cut far above the target (LiftCutDeep), or on a tick, is never checked
// so.
const (
	noHelpFrac  = 0.8
	noiseMargin = 1.25
	// NoiseHold is how long a cut that bought nothing raises the
	// windows' bar, lifted or capped.
	NoiseHold = 2 * time.Minute
)

// resetPool empties the lifted window.
func (l *liftState) resetPool() {
	l.pool, l.alone, l.poolTicks = iolat.Hist{}, iolat.Hist{}, 0
}

// aloneFloor is the bar a lifted window's requests served alone set
// (0: fewer than MinSamples of them, or not most of the window all):
// noiseMargin x their p99. A request the device served with nothing else
// in flight waited for no neighbour, and its time is latency no cap
// lowers (the host's disk, the CPU the loop worker waits for): where those
// are as slow as the window's slowest, the window's p99 is the device's
// noise, not contention. On the machine's own disk beside a paced
// 50 MB/s backup (docs/bench's vda cell, 2026-12-03, 8812a1d), windows of
// 0.9-2.2 ms against a 0.75-0.85 ms target cut the backup to 35 MB/s
// with no QoS keeping the victims at 2.35x idle. Only lifted, and only
// where most requests are served alone (a neighbour that leaves the
// device idle): applied to capped windows too, it held a 20 % cap of a
// QD32 streamer with the victim at 6x idle in a make test
// (TestRealV1LatencyEffect, 2026-12-03: the few requests served alone
// between the streamer's were slow too, on the machine's shared disk).
func (c *Controller) aloneFloor(all, alone *iolat.Hist) time.Duration {
	if n := alone.Count(); n < c.cfg.MinSamples || 2*n < all.Count() {
		return 0
	}
	return time.Duration(noiseMargin * float64(alone.Quantile(0.99)))
}

// idleStep is Step with nothing capped and nobody contended (not lifted,
// not probing): the idle lift (see the file's doc).
func (c *Controller) idleStep(in Input) State {
	l := &c.lift
	if !c.cfg.Conserve || in.Contended || !in.Shallow || (!l.cutAt.IsZero() && in.At.Sub(l.cutAt) < l.wait) {
		return c.st
	}
	return c.liftNow(in.At)
}

// noiseFloor is the windows' bar at at besides the target (0: none).
func (l *liftState) noiseFloor(at time.Time) time.Duration {
	if l.noise == 0 || at.Sub(l.noiseAt) >= NoiseHold {
		return 0
	}
	return time.Duration(noiseMargin * float64(l.noise))
}

// armCheck makes the next window the check of a cut at p99 m against
// target t, from share s (0: from lifted).
func (l *liftState) armCheck(m, t time.Duration, s float64) {
	l.cutFrom, l.cutShare, l.checkCut = m, s, float64(m) <= LiftCutDeep*float64(t)
}

// checkedCut reports whether a window's p99 m, the first after a checked
// cut (armCheck), shows the cut bought nothing (see above); it clears the
// check either way.
func (c *Controller) checkedCut(at time.Time, m time.Duration) bool {
	l := &c.lift
	if !l.checkCut {
		return false
	}
	l.checkCut = false
	if float64(m) < noHelpFrac*float64(l.cutFrom) {
		return false
	}
	l.noise, l.noiseAt = m, at
	return true
}

// stepLifted is Step while the caps are lifted (not probing); unloaded:
// the tick had no cap in force and was quiet (pooled in c.pool).
func (c *Controller) stepLifted(in Input, unloaded bool) State {
	l := &c.lift
	if unloaded {
		if c.pool.Count() >= c.cfg.MinSamples {
			c.learn(in.At, c.pool.Quantile(0.99))
			c.resetPool()
		}
	} else if c.pool.Count() > 0 {
		c.resetPool() // a cap still draining while lifted: no measure
	}
	if in.Refused {
		return c.refusedLift(in.At)
	}
	if !in.Contended {
		l.resetPool()
		if in.At.Sub(l.contendedAt) >= LiftIdle {
			c.st.Share, c.st.Lifted = c.cfg.Start, false
		}
		return c.st
	}
	l.contendedAt = in.At
	t := c.st.Target
	if t == 0 {
		// An idle lift before any target: the requests served alone
		// tell it (learnAlone) where they come; else the caps are armed
		// for the capped path's probe, no failed lift counted.
		if c.aloneComing() {
			return c.st
		}
		c.st.Share, c.st.Lifted = c.cfg.Start, false
		l.resetPool()
		c.resetPool()
		return c.st
	}
	if c.slowTick(&in.Hist, t) {
		c.st.P99 = in.Hist.Quantile(0.99)
		return c.cutLifted(in.At, c.st.P99, in.Used, in.Max)
	}
	l.pool.Add(&in.Hist)
	l.alone.Add(&in.Alone)
	l.poolTicks++
	n := l.pool.Count()
	if n < c.cfg.MinSamples || (n < c.cfg.Window && l.poolTicks < WindowTicks) {
		return c.st
	}
	m, af := l.pool.Quantile(0.99), c.aloneFloor(&l.pool, &l.alone)
	c.st.P99 = m
	l.resetPool()
	if m > max(t, l.noiseFloor(in.At), af) {
		st := c.cutLifted(in.At, m, in.Used, in.Max)
		l.armCheck(m, t, 0)
		return st
	}
	if in.At.Sub(l.liftedAt) >= LiftKeep {
		l.wait = LiftBackoff // a lift that held
	}
	return c.st
}

// slowTick reports whether a tick's protected requests show contention
// against t (the target, lifted; twice it for a capped tick's fast cut):
// at least MinSamples of them with their p90 above t, or fewer (at least
// fewSlow) with their median above it. A
// QD1 victim whose requests each wait 160 ms fits six in a tick; waiting
// for MinSamples of them would keep the caps lifted for seconds while
// every one of its requests is forty times slower than idle (measured in
// the VM's TestRealV2LatencyEffect: p99 37x idle over the 1.4 s left;
// capped at 40 % on a loaded host, TestRealV1LatencyControl's victim fitted
// six in a tick and the share was never cut). At
// idle, a tick's request is above the target (Multiple x the idle p99)
// far less than one time in a hundred: half of a few of them is not
// noise.
func (c *Controller) slowTick(h *iolat.Hist, t time.Duration) bool {
	n := h.Count()
	if n >= c.cfg.MinSamples {
		return h.Quantile(fastCutQ) > t
	}
	return n >= fewSlow && h.Quantile(0.5) > t
}

// cutLifted caps again after lifted caps let the protected requests' p99
// reach m (see the file's doc).
func (c *Controller) cutLifted(at time.Time, m time.Duration, used, most float64) State {
	l := &c.lift
	s := c.cfg.Start
	if used > 0 && float64(m) <= LiftCutDeep*float64(c.st.Target) {
		s = cutFactor * used
	}
	c.st.Share, c.st.Lifted = max(min(s, c.mostOf(most)), c.cfg.Floor), false
	switch {
	case float64(m) > LiftCutDeep*float64(c.st.Target):
		l.wait = LiftMaxWait // no cap at all is far from enough here
	case at.Sub(l.liftedAt) < LiftKeep:
		l.wait = min(2*l.wait, LiftMaxWait)
	}
	l.cutAt, l.checkCut = at, false
	l.resetPool()
	c.resetPool()
	return c.st
}

// liftDue reports whether a loaded tick lifts the caps (see the file's
// doc): measured, the window's p99 m; t the target, s the share, at most
// most; held: a cap held someone back in the window. double: the tick
// doubles the share instead.
func (c *Controller) liftDue(in Input, measured bool, m, t time.Duration, s, most float64, held bool) (lift, double bool) {
	if !c.cfg.Conserve || t == 0 || (!c.lift.cutAt.IsZero() && in.At.Sub(c.lift.cutAt) < c.lift.wait) {
		return false, false
	}
	// At the most share a held cap may lift, unless the throttle predicts
	// the let-go requests would queue ahead of the victims' (in.Queues).
	room := !held || (s >= most && !in.Queues)
	// A cap holding its neighbour back at the most share lifts on
	// mostTicks such ticks in a row or a window (below): the neighbour
	// wants more than the most, and one tick at it says little of no cap
	// at all.
	if in.Hist.Count() >= c.cfg.MinSamples && float64(in.Hist.Quantile(0.99)) <= liftTick*float64(t) {
		if !held || s < most {
			c.lift.atMost = 0
			return !held, held && c.pooledWithin(t)
		}
		if c.lift.atMost++; c.lift.atMost >= mostTicks && !in.Queues {
			c.lift.atMost = 0
			return true, false
		}
	} else {
		c.lift.atMost = 0
	}
	return measured && float64(m) <= raiseBelow*float64(t) && room, false
}

// pooledWithin reports whether the ticks pooled at the share in force,
// this one with them, at least doubleTicks, have their p99 within
// liftTick of target t: a held cap's tick doubles the share only then.
// One tick's p99 of ~100 requests is their second slowest, and at a share
// whose windows sit at the target one tick in a few is that lucky: by
// hand on the loop device over vda (TestRealV1LatencyControl,
// 2026-12-07), a window of 1.44 ms at 12 % against a 1.44 ms target, then
// one tick within half of it doubled the share to 24 %, and the next tick
// measured 3.6 ms (8x the reader's idle p99).
// A window measured this tick has emptied the pool: its p99 then decides
// by the window's own rule (Step), not the tick's.
func (c *Controller) pooledWithin(t time.Duration) bool {
	return c.poolTicks >= doubleTicks && float64(c.pool.Quantile(0.99)) <= liftTick*float64(t)
}

// liftUntried reports whether a capped cut that bought nothing lifts the
// caps: unless the throttle predicts the let-go requests would queue
// (Input.Queues) or a failed lift's wait runs. On a CPU-bound device the
// caps themselves slow the victims (blk-throttle lets a capped stream's
// requests go in bursts, each burst the loop worker's CPU): in the host
// scenario on a loop device over tmpfs (2026-12-03, 3fcde9d) a QD32
// streamer with no QoS left the web reader at 2.5x idle (777 us), the
// controller held it at 16-45 % with the web reader at 3.6-4.6x, every
// cut checked and undone, the windows never within the target to double.
// Lifted, the windows are judged against the noise floor the check set,
// and a lift that fails is cut and waited out as any.
func (c *Controller) liftUntried(in Input) bool {
	return !in.Queues && (c.lift.cutAt.IsZero() || in.At.Sub(c.lift.cutAt) >= c.lift.wait)
}

// refusedLift takes the throttle's refusal of the lift (Input.Refused):
// the share before the lift, as the throttle set it back, and the wait of
// a failed lift.
func (c *Controller) refusedLift(at time.Time) State {
	l := &c.lift
	c.st.Share, c.st.Lifted = max(l.before, c.cfg.Floor), false
	l.wait = min(2*l.wait, LiftMaxWait)
	l.cutAt, l.checkCut = at, false
	l.resetPool()
	c.resetPool()
	return c.st
}

// liftNow lifts the caps.
func (c *Controller) liftNow(at time.Time) State {
	c.lift.before = c.st.Share
	c.st.Share, c.st.Lifted = 1, true
	c.lift.liftedAt, c.lift.contendedAt, c.lift.atMost = at, at, 0
	c.lift.resetPool()
	c.resetPool()
	return c.st
}

// mostOf is the most a share may be: Config.Max, below it the levels'
// (Input.Max) when above 0, never below the floor. Work-conserving, the
// levels do not bound it: the throttle scales the levels' caps up to the
// share, so a slow start goes on past them (a level-4 stream alone: 30 %,
// 60 %, then lifted), never jumping from the levels' most to no cap at
// all (in the VM's TestRealV2LatencyEffect, from 31 % to none cost the
// victim 37x idle for the tick it took to cut).
func (c *Controller) mostOf(levels float64) float64 {
	if levels > 0 && !c.cfg.Conserve {
		return max(min(c.cfg.Max, levels), c.cfg.Floor)
	}
	return c.cfg.Max
}

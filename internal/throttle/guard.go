package throttle

import (
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// The lift guard: a lift (Steer(1), the latency controller's work
// conservation) is a bet that the capped workloads, let go, do not make
// the device's requests wait. The controller judges it by the victims'
// requests over a tick (a second); on a device whose queue is shared the
// bet is lost well within it: a QD16 streamer let go on the VM's disk,
// which qemu holds to 100 MiB/s, queued 16 MiB ahead of every victim read
// (160-185 ms each, TestRealV2LatencyEffect), and a QD32 one on the host's
// stacked loop device fills vda's 500 ms read_expire queue. So for
// guardWatch after a lift the fast loop watches the time the device's
// completed requests spent in flight (diskstats: the weighted ms over the
// requests completed, a window of guardWindow), against what it was with
// the caps in force just before (guardRef, decayed over the periods the
// caps were in force and contended). A window at guardFactor times that,
// guardMinMs above it and with at least guardMinDepth requests in flight
// on average (a queue, not one slow request at a time: in the VM a paced
// 19 MiB/s neighbour's lift was refused on its own requests' times, and
// TestRealV2NoHarm's neighbour then stayed at 63 % for 15 s) refuses the
// lift at once: the share before it
// is back within a period, and RefusedAt tells the controller, which
// counts it as a failed lift (lift.go). Where the device serves the let-go
// requests in parallel (a deep-queue device), each is no longer in
// flight and the lift stands.
//
// A like comparison predicts a lift before it is made: the requests the
// device kept in flight on average (its weighted time in flight per ms)
// while nothing was capped (the neighbours streaming freely before the
// contention) against the same with the caps in force. Where it was
// guardFactor times as many, and at least guardMinDepth (a shared queue:
// the VM's disk at QD16; a QD32 streamer on the host's stacked loop
// device, ~18 in flight), LiftQueues says so, and the controller does not
// lift a cap that holds its neighbour back (lift.go): a lift there is
// refused, but only after its first requests queued ahead of the victims'
// (in an 8 s victim's 800 reads, enough to make its p99). Depth, not the
// time per request: a paced neighbour's 1 MiB requests, one at a time,
// take several times as long each as the mix of a capped neighbour's and
// the victims' 4 KiB ones, and queue nobody (TestRealV1LiftGuard failed
// on that in a quiet make test, 2026-12-03: a QD1 reader at 150 MB/s
// predicted to queue).
//
// The same depth decides where a contention may start uncapped: a device
// that kept fewer than guardShallow requests in flight with nothing
// capped (shallow: a paced backup, one request at a time) lets the
// controller lift the caps before any victim comes (control's
// Input.Shallow), and such an idle lift is watched for as long as it
// stands (watchIdle): a window at guardMinDepth refuses it, and the caps
// are armed again within that window.
const (
	guardWatch  = 3 * time.Second
	guardWindow = 40 * time.Millisecond
	guardFactor = 3.0
	guardMinMs  = 2.0
	// guardMinDepth: the requests in flight on average, with nothing
	// capped, below which a lift is not predicted to queue: a neighbour
	// with fewer leaves a victim's request behind at most one of its own.
	guardMinDepth = 2.0
	// guardShallow: the requests in flight on average, with nothing
	// capped, below which the device is shallow (it idles between the
	// neighbours' requests): a paced QD1 reader kept 0.3-0.7 in flight on
	// the host's loop device (TestRealV1LiftGuard); an unpaced one, one
	// request always in flight, 1, and on the host's stacked loop device
	// that one request at a time still holds a 4 KiB reader at ~500 ms.
	guardShallow = 0.9
	// guardMinIOs: requests completed in a window (and in the reference)
	// for its latency to count.
	guardMinIOs = 4
	// guardDecay is the reference's decay per period (10 ms: about 300 ms
	// of memory).
	guardDecay = 0.97
)

// liftGuard is the guard's state.
type liftGuard struct {
	refMs, refIOs float64 // the decayed in-flight ms and requests with caps in force
	// freeMs, freeIOs: the same while no cap was in force.
	freeMs, freeIOs float64
	// refWall, freeWall: the decayed wall-clock ms of the same periods
	// (in-flight ms per wall ms: the mean depth).
	refWall, freeWall float64
	last              cgroupfs.BlockStat
	lastAt            time.Time
	lastOK            bool
	liftAt            time.Time // the last lift (zero: none watched)
	idle              bool      // it was made with nobody contended (watchIdle)
	before            float64   // the share before it
	win               cgroupfs.BlockStat
	winAt             time.Time
	refusedAt         time.Time
}

// lifting records a Steer from share to next at now (under t.mu);
// contended: the level rule capped a workload at the last period (a lift
// without is an idle lift, watched by its depth: watchIdle).
func (g *liftGuard) lifting(share, next float64, now time.Time, contended bool) {
	switch {
	case next >= 1 && share < 1:
		g.liftAt, g.before, g.winAt, g.idle = now, share, time.Time{}, !contended
	case next < 1:
		g.liftAt, g.idle = time.Time{}, false
	}
}

// observe folds in the device's reading s at now; capped: caps were in
// force and contended at the last period; free: no cap was in force;
// contended: the level rule capped a workload (in force or lifted). It
// reports whether the lift watched is refused.
func (g *liftGuard) observe(s cgroupfs.BlockStat, now time.Time, capped, free, lifted, contended bool) bool {
	if !g.lastOK {
		g.last, g.lastAt, g.lastOK = s, now, true
		return false
	}
	dMs, dIOs := float64(sub(s.TimeInQueueMs, g.last.TimeInQueueMs)), float64(sub(s.IOs(), g.last.IOs()))
	dWall := max(float64(now.Sub(g.lastAt))/float64(time.Millisecond), 0)
	g.last, g.lastAt = s, now
	if capped && !lifted {
		g.refMs, g.refIOs, g.refWall = guardDecay*g.refMs+dMs, guardDecay*g.refIOs+dIOs, guardDecay*g.refWall+dWall
		return false
	}
	if free && !(lifted && contended) && dIOs > 0 {
		g.freeMs, g.freeIOs, g.freeWall = guardDecay*g.freeMs+dMs, guardDecay*g.freeIOs+dIOs, guardDecay*g.freeWall+dWall
	}
	if lifted && g.idle && !g.liftAt.IsZero() {
		return g.watchIdle(s, now)
	}
	if !lifted || g.liftAt.IsZero() || now.Sub(g.liftAt) >= guardWatch || g.refIOs < guardMinIOs {
		return false
	}
	lat, depth, ok := g.window(s, now)
	if !ok {
		return false
	}
	ref := g.refMs / g.refIOs
	if lat >= guardFactor*ref && lat-ref >= guardMinMs && depth >= guardMinDepth {
		g.refusedAt, g.liftAt = now, time.Time{}
		return true
	}
	return false
}

// watchIdle watches a lift made with nobody contended (the controller's
// idle lift beside a shallow neighbour: control's Input.Shallow) for as
// long as it stands: a window of at least guardMinIOs requests with
// guardMinDepth in flight on average (a neighbour now queueing: a
// greedy stream started, or the paced one let go deeper) refuses it, so
// the caps are armed again within a window, not at the controller's next
// tick, and a contention that starts then starts capped.
func (g *liftGuard) watchIdle(s cgroupfs.BlockStat, now time.Time) bool {
	if _, depth, ok := g.window(s, now); ok && depth >= guardMinDepth {
		g.refusedAt, g.liftAt, g.idle = now, time.Time{}, false
		return true
	}
	return false
}

// window folds the reading s at now into the watched lift's window: when
// one of at least guardWindow and guardMinIOs completed requests closes
// (ok), the time in flight per request (lat, ms) and the requests in
// flight on average (depth), and the next starts; with fewer completed
// the window goes on.
func (g *liftGuard) window(s cgroupfs.BlockStat, now time.Time) (lat, depth float64, ok bool) {
	if g.winAt.IsZero() {
		g.win, g.winAt = s, now
		return 0, 0, false
	}
	ios := float64(sub(s.IOs(), g.win.IOs()))
	if now.Sub(g.winAt) < guardWindow || ios < guardMinIOs {
		return 0, 0, false
	}
	inFlight := float64(sub(s.TimeInQueueMs, g.win.TimeInQueueMs))
	lat, depth = inFlight/ios, inFlight/max(float64(now.Sub(g.winAt))/float64(time.Millisecond), 1)
	g.win, g.winAt = s, now
	return lat, depth, true
}

// queues reports whether the device kept guardFactor times as many
// requests in flight (and at least guardMinDepth) with nothing capped as
// with the caps in force: a lift would queue the let-go requests ahead of
// the victims' (see above).
func (g *liftGuard) queues() bool {
	if g.refIOs < guardMinIOs || g.freeIOs < guardMinIOs || g.refWall <= 0 || g.freeWall <= 0 {
		return false
	}
	ref, free := g.refMs/g.refWall, g.freeMs/g.freeWall
	return free >= guardFactor*ref && free >= guardMinDepth
}

// shallow reports whether the device kept fewer than guardShallow
// requests in flight on average while nothing was capped, measured (at
// least guardMinIOs of them): the neighbours leave it idle between their
// requests (a paced backup, one request at a time), and the controller
// need not arm the caps before a contention (control's Input.Shallow).
func (g *liftGuard) shallow() bool {
	return g.freeIOs >= guardMinIOs && g.freeWall > 0 && g.freeMs/g.freeWall < guardShallow
}

// guardLift runs the guard on the period's device reading (under t.mu):
// a refused lift sets the share before it back.
func (t *Throttle) guardLift(now time.Time) {
	if !t.devLastOK {
		return
	}
	contended := t.contended()
	capped := t.inForce && contended
	lifted := t.share >= 1
	if t.guard.observe(t.devLast.Stat, now, capped, !t.inForce, lifted, contended) {
		t.log.Info("throttle: a lift of the caps refused: the device's requests waited longer at once",
			"device", t.name, "share", t.guard.before)
		t.share = t.guard.before
	}
}

// GuardStatus is what the lift guard knows of the device, for the latency
// controller.
type GuardStatus struct {
	// RefusedAt is the last time the guard refused a lift of the caps
	// (zero: never): the device's requests waited longer at once.
	RefusedAt time.Time
	// Queues: lifting the caps in force would queue the let-go requests
	// ahead of everyone's (liftGuard.queues).
	Queues bool
	// Shallow: the device kept fewer than guardShallow requests in flight
	// on average with nothing capped (it idles between the neighbours'
	// requests): a contention may start uncapped (liftGuard.shallow).
	Shallow bool
}

// Guard is the lift guard's status.
func (t *Throttle) Guard() GuardStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return GuardStatus{RefusedAt: t.guard.refusedAt, Queues: t.guard.queues(), Shallow: t.guard.shallow()}
}

// contended reports whether the level rule capped a workload at the last
// period (in force, or lifted by a share of 1; under t.mu).
func (t *Throttle) contended() bool {
	return !t.contendedAt.IsZero() && !t.contendedAt.Before(t.lastStep)
}

package throttle

import (
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

var gt0 = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

// guardDev is a device's counters as the guard reads them.
type guardDev struct {
	s  cgroupfs.BlockStat
	at time.Time
}

// run feeds g the device completing ios requests of latMs each per 10 ms
// period, for n periods; it reports whether a period refused the lift
// watched.
func (d *guardDev) run(g *liftGuard, n int, ios uint64, latMs uint64, capped, lifted bool) bool {
	refused := false
	for range n {
		d.at = d.at.Add(10 * time.Millisecond)
		d.s.ReadIOs += ios
		d.s.TimeInQueueMs += ios * latMs
		refused = g.observe(d.s, d.at, capped, !capped && !lifted, lifted, capped || lifted) || refused
	}
	return refused
}

// TestLiftGuard: a lift whose requests wait at once much longer than
// with the caps in force is refused within a window; one whose
// requests take as long (a deep-queue device, or a neighbour that
// wanted no more) stands; the guard watches only guardWatch after a
// lift, and only with a reference.
func TestLiftGuard(t *testing.T) {
	t.Parallel()
	d := &guardDev{at: gt0}
	var g liftGuard
	if d.run(&g, 50, 1, 5, true, false) {
		t.Fatal("refused with the caps in force")
	}
	g.lifting(0.6, 1, d.at, true)
	if d.run(&g, 20, 1, 6, false, true) {
		t.Fatal("refused a lift whose requests took 6 ms against 5 ms capped")
	}
	if d.run(&g, 10, 1, 40, false, true) == false {
		t.Fatal("a lift whose requests took 40 ms against 5 ms capped stood")
	}
	if g.refusedAt.IsZero() || g.before != 0.6 {
		t.Fatalf("refused: at %v, share before %g; want a time and 0.6", g.refusedAt, g.before)
	}

	// Slower requests one at a time (a paced neighbour let go: 15 ms each
	// against 4 ms capped, fewer than guardMinDepth in flight) are no
	// queue: the lift stands. Mutation checked: without the depth, refused.
	dd := &guardDev{at: gt0}
	var gd liftGuard
	dd.run(&gd, 50, 1, 4, true, false)
	gd.lifting(0.6, 1, dd.at, true)
	if dd.run(&gd, 20, 1, 15, false, true) {
		t.Fatal("refused a lift whose requests took 15 ms against 4 ms capped, 1.5 in flight")
	}

	// Predicted: requests in flight 40 ms each with nothing capped (the
	// neighbours streaming freely) against 5 ms capped queue; 6 ms do not.
	var gq liftGuard
	dq := &guardDev{at: gt0}
	dq.run(&gq, 50, 1, 40, false, false)
	dq.run(&gq, 50, 1, 5, true, false)
	if !gq.queues() {
		t.Fatalf("free 40 ms a request, capped 5 ms: queues false, want true (free %.1f/%.0f, ref %.1f/%.0f)", gq.freeMs, gq.freeIOs, gq.refMs, gq.refIOs)
	}
	var gn liftGuard
	dn := &guardDev{at: gt0}
	dn.run(&gn, 50, 1, 6, false, false)
	dn.run(&gn, 50, 1, 5, true, false)
	if gn.queues() {
		t.Fatal("free 6 ms a request, capped 5 ms: queues true, want false")
	}
	// A paced neighbour, one 1 MiB request at a time (7 ms each, 0.7 in
	// flight on average), against the caps' mix of its requests and the
	// victims' 4 KiB ones (four a period, 1 ms each: 0.4 in flight): each
	// request took 7 times as long free, but the device kept fewer than
	// guardMinDepth in flight, and a lift queues nobody. Mutation checked:
	// the time per request compared instead (the rule before) says it
	// queues, as TestRealV1LiftGuard saw in a quiet make test.
	var gp liftGuard
	dp := &guardDev{at: gt0}
	dp.run(&gp, 50, 1, 7, false, false)
	dp.run(&gp, 50, 4, 1, true, false)
	if gp.queues() {
		t.Fatalf("free one request at a time, 7 ms each, capped four of 1 ms: queues true, want false (free %.1f ms in flight over %.0f ms, ref %.1f over %.0f)", gp.freeMs, gp.freeWall, gp.refMs, gp.refWall)
	}

	// Past guardWatch the guard is off: the controller judges.
	d2 := &guardDev{at: gt0}
	var g2 liftGuard
	d2.run(&g2, 50, 1, 5, true, false)
	g2.lifting(0.6, 1, d2.at, true)
	d2.run(&g2, int(guardWatch/(10*time.Millisecond)), 1, 5, false, true)
	if d2.run(&g2, 10, 1, 40, false, true) {
		t.Fatal("refused a lift older than guardWatch")
	}

	// A small absolute rise on a fast device (0.1 -> 0.5 ms... in whole
	// ms, 0 -> 1) is not a queue: guardMinMs.
	d3 := &guardDev{at: gt0}
	var g3 liftGuard
	d3.run(&g3, 50, 2, 0, true, false)
	g3.lifting(0.6, 1, d3.at, true)
	if d3.run(&g3, 20, 2, 1, false, true) {
		t.Fatal("refused a lift whose requests took 1 ms against 0 ms capped (below guardMinMs)")
	}

	// No reference (never capped while contended): nothing to judge by.
	d4 := &guardDev{at: gt0}
	var g4 liftGuard
	g4.lifting(0.6, 1, d4.at, true)
	if d4.run(&g4, 20, 1, 100, false, true) {
		t.Fatal("refused a lift without a reference")
	}
}

// idle feeds g n periods of ios requests of latMs each with nothing
// capped and nobody contended (lifted: under an idle lift).
func (d *guardDev) idle(g *liftGuard, n int, ios uint64, latMs uint64, lifted bool) bool {
	refused := false
	for range n {
		d.at = d.at.Add(10 * time.Millisecond)
		d.s.ReadIOs += ios
		d.s.TimeInQueueMs += ios * latMs
		refused = g.observe(d.s, d.at, false, true, lifted, false) || refused
	}
	return refused
}

// TestLiftGuardIdle: a paced neighbour one request at a time (7 ms each,
// one every 10 ms: 0.7 in flight) is shallow, a QD32 stream (32 in
// flight) is not, and neither is a device not yet measured; an idle lift
// stands while the device stays shallow, however long, and is refused
// within a window once it keeps guardMinDepth in flight. Mutation
// checked: without watchIdle the deep stream's lift stands.
func TestLiftGuardIdle(t *testing.T) {
	t.Parallel()
	var g liftGuard
	if g.shallow() {
		t.Fatal("shallow with nothing measured")
	}
	d := &guardDev{at: gt0}
	d.idle(&g, 50, 1, 7, false)
	if !g.shallow() {
		t.Fatalf("one request at a time, 7 ms each, every 10 ms: shallow false (%.1f ms in flight over %.0f ms)", g.freeMs, g.freeWall)
	}
	g.lifting(0.05, 1, d.at, false)
	if d.idle(&g, int(2*guardWatch/(10*time.Millisecond)), 1, 7, true) {
		t.Fatal("refused an idle lift beside a neighbour one request at a time")
	}
	if !g.shallow() {
		t.Fatal("an idle lift's own periods made the device deep")
	}
	// Now a greedy stream: 4 completed a period, 80 ms each (32 in flight).
	if !d.idle(&g, 5, 4, 80, true) {
		t.Fatal("an idle lift stood with 32 requests in flight")
	}
	if g.before != 0.05 || g.idle {
		t.Fatalf("refused: before %g, idle %v; want 0.05, false", g.before, g.idle)
	}
	d.idle(&g, 50, 4, 80, false)
	if g.shallow() {
		t.Fatal("32 in flight: shallow true")
	}
	// A lift made while contended is not watched by depth (TestLiftGuard).
	var gc liftGuard
	dc := &guardDev{at: gt0}
	dc.idle(&gc, 50, 1, 7, false)
	gc.lifting(0.6, 1, dc.at, true)
	if dc.idle(&gc, 5, 4, 80, true) {
		t.Fatal("a contended lift without a reference refused on depth")
	}
}

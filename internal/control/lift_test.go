package control

import (
	"math"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/iolat"
)

// conserving is a work-conserving controller (Window 1: each tick of
// MinSamples decides) and a stepper a second apart.
func conserving(t *testing.T) (*Controller, func(in Input) State, *time.Time) {
	t.Helper()
	c, err := New(Config{Multiple: 3, Start: 0.05, Floor: 0.02, Max: 0.3, Step: 0.01, Window: 1, Conserve: true})
	if err != nil {
		t.Fatal(err)
	}
	at := t0
	return c, func(in Input) State {
		at = at.Add(time.Second)
		in.At = at
		return c.Step(in)
	}, &at
}

// contended is a tick of n protected requests at lat beside a neighbour
// the level rule would cap, lifted (no cap in force).
func contended(lat time.Duration, used float64) Input {
	return Input{Hist: hist(lat, 100), Contended: true, Used: used, Max: 0.3}
}

// capped is a tick under the caps, held back.
func capped(lat time.Duration) Input {
	return Input{Hist: hist(lat, 100), Capped: true, Held: true, Contended: true, Max: 0.3}
}

// learnLifted: a contention starts capped at Start; the first tick probes
// (no target yet), two probe ticks learn 1 ms (target 3 ms), and the next
// tick, its p99 at most half the target, lifts.
func learnLifted(t *testing.T, step func(Input) State) {
	t.Helper()
	if st := step(capped(1 * ms)); !st.Probing || st.Share != probeFrac*0.02 {
		t.Fatalf("first capped tick without a target: %+v, want a probe at a tenth of the floor", st)
	}
	step(capped(1 * ms))
	if st := step(capped(1 * ms)); st.Probing || st.Lifted || st.Share != 0.05 || !near(st.Target, 3*ms) {
		t.Fatalf("after the probe: %+v, want capped at Start with a ~3ms target", st)
	}
	if st := step(unheld(1 * ms)); !st.Lifted || st.Share != 1 {
		t.Fatalf("a tick at a third of the target, nobody held by the cap: %+v, want lifted (share 1)", st)
	}
}

// unheld is a capped tick in which the cap held nobody back.
func unheld(lat time.Duration) Input {
	in := capped(lat)
	in.Held = false
	return in
}

// TestConserveSlowStart: ticks well within the target while the cap holds
// its neighbour double the share up to slowStartEnd, then raise it by a
// quarter a tick up to its most (Config.Max), past the
// levels' own (Input.Max: the throttle scales their caps up to it), then
// lift; an overshoot is an ordinary cut, from a share that held.
func TestConserveSlowStart(t *testing.T) {
	t.Parallel()
	c, err := New(Config{Multiple: 3, Start: 0.05, Floor: 0.02, Max: 0.6, Step: 0.01, Window: 1, Conserve: true})
	if err != nil {
		t.Fatal(err)
	}
	at := t0
	step := func(in Input) State {
		at = at.Add(time.Second)
		in.At = at
		return c.Step(in)
	}
	step(capped(1 * ms)) // the probe
	step(capped(1 * ms))
	step(capped(1 * ms))
	// Doubled up to slowStartEnd (25 %), a quarter more a tick above it.
	for _, want := range []float64{0.1, 0.2, 0.25, 0.3125, 0.390625, 0.48828125, 0.6} {
		if st := step(capped(1 * ms)); st.Lifted || math.Abs(st.Share-want) > 1e-9 {
			t.Fatalf("a held cap, tick at a third of the target, the levels' most 0.3: %+v, want the share raised to %g", st, want)
		}
	}
	if st := step(capped(1 * ms)); !st.Lifted {
		t.Fatalf("at its most, a tick at a third of the target: %+v, want lifted", st)
	}
	// A least cap above the share: the doubling starts from the cap in
	// force (8 % of the device), not from the share (5 %); what the
	// neighbour moved (a burst above its cap) does not count.
	c, err = New(Config{Start: 0.05, Floor: 0.02, Max: 0.6, Step: 0.01, Window: 1, Conserve: true, Target: 3 * ms})
	if err != nil {
		t.Fatal(err)
	}
	in := capped(1 * ms)
	in.InForce, in.Used = 0.08, 0.5
	if st := step(in); math.Abs(st.Share-0.16) > 1e-9 {
		t.Fatalf("held at a least cap of 8 %% with the share at 5 %%, a tick well within the target: %+v, want 0.16", st)
	}
	// A window (not a tick) well within the target, held, doubles too:
	// ticks of fewer than MinSamples requests decide nothing alone.
	c, err = New(Config{Start: 0.05, Floor: 0.02, Max: 0.6, Step: 0.01, Conserve: true, Target: 3 * ms})
	if err != nil {
		t.Fatal(err)
	}
	few := capped(1 * ms)
	few.Hist = hist(1*ms, 9)
	for i := 1; i <= WindowTicks; i++ {
		st := step(few)
		if want := map[bool]float64{false: 0.05, true: 0.1}[i == WindowTicks]; math.Abs(st.Share-want) > 1e-9 {
			t.Fatalf("tick %d of a window of %d-request ticks at a third of the target, held: %+v, want share %g", i, 9, st, want)
		}
	}
	// Not work-conserving, the levels' most bounds the share.
	c, err = New(Config{Start: 0.05, Floor: 0.02, Max: 0.6, Step: 0.01, Window: 1, Target: 3 * ms})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		step(capped(1 * ms))
	}
	if st := c.State(); st.Share != 0.3 {
		t.Fatalf("capping controller, ticks at a third of the target: %+v, want the levels' most 0.3", st)
	}
}

// TestConserveNoHarm: a neighbour that leaves the victims within their
// target is capped only until one tick shows it (after the one probe
// that learns the target), then never again, tick after tick. Fails
// without the Conserve rule (the share stays in the levels' range).
func TestConserveNoHarm(t *testing.T) {
	t.Parallel()
	c, step, _ := conserving(t)
	if st := c.State(); st.Lifted || st.Share != 0.05 {
		t.Fatalf("new: %+v, want capped at Start, ready for a contention's first request", st)
	}
	learnLifted(t, step)
	for i := range 120 {
		if st := step(contended(2*ms, 0.05)); !st.Lifted || st.Probing {
			t.Fatalf("tick %d at 2 ms (target 3 ms): %+v, want the caps lifted", i, st)
		}
	}
}

// TestConserveCuts: lifted caps that let the victims' p90 above the target
// cap at once: from what the neighbour moved where the overshoot is
// moderate, from Start where it is far; a tail in a window caps too.
func TestConserveCuts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		lat  time.Duration
		used float64
		want float64
	}{
		{"moderate", 5 * ms, 0.2, cutFactor * 0.2},
		{"moderate, the neighbour above the levels' most", 5 * ms, 0.9, 0.3},
		{"far", 500 * ms, 0.9, 0.05},
		{"far: the longest wait", 500 * ms, 0.9, 0.05},
		{"far, used unknown", 5 * ms, 0, 0.05},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, step, _ := conserving(t)
			learnLifted(t, step)
			if st := step(contended(tc.lat, tc.used)); st.Lifted || math.Abs(st.Share-tc.want) > 1e-9 {
				t.Fatalf("p90 %s against 3 ms, the neighbour at %g: %+v, want capped at %g", tc.lat, tc.used, st, tc.want)
			}
			if tc.lat > 100*ms && c.lift.wait != LiftMaxWait {
				t.Fatalf("a lift cut %s above a 3 ms target: wait %s, want %s", tc.lat, c.lift.wait, LiftMaxWait)
			}
		})
	}
	t.Run("few and slow", func(t *testing.T) {
		t.Parallel()
		// A QD1 victim whose reads each wait 160 ms: six in a tick, fewer
		// than MinSamples (and than a window). One slow request among
		// few, or a lone one, is no contention yet.
		_, step, _ := conserving(t)
		learnLifted(t, step)
		if st := step(Input{Hist: hist(160*ms, 6), Contended: true, Used: 0.9, Max: 0.3}); st.Lifted || math.Abs(st.Share-0.05) > 1e-9 {
			t.Fatalf("lifted, six requests of 160 ms against a 3 ms target: %+v, want capped at Start", st)
		}
		_, step, _ = conserving(t)
		learnLifted(t, step)
		for _, h := range []iolat.Hist{mix(hist(1*ms, 2), hist(160*ms, 1)), hist(160*ms, 1)} {
			if st := step(Input{Hist: h, Contended: true, Used: 0.9, Max: 0.3}); !st.Lifted {
				t.Fatalf("lifted, %d requests, at most one slow: %+v, want still lifted", h.Count(), st)
			}
		}
	})
	t.Run("tail in a window", func(t *testing.T) {
		t.Parallel()
		c, err := New(Config{Start: 0.05, Floor: 0.02, Max: 0.3, Step: 0.01, Conserve: true, Target: 3 * ms})
		if err != nil {
			t.Fatal(err)
		}
		at := t0.Add(time.Second)
		if st := c.Step(Input{At: at, Hist: hist(1*ms, 140), Capped: true, Contended: true}); !st.Lifted {
			t.Fatalf("fixed target, a tick at a third of it: %+v, want lifted", st)
		}
		// p90 fine, p99 above: no cut until the window (500) is full.
		tail := mix(hist(1*ms, 135), hist(5*ms, 5))
		for i := 1; i <= 4; i++ {
			at = at.Add(time.Second)
			st := c.Step(Input{At: at, Hist: tail, Contended: true, Used: 0.2})
			if i < 4 && !st.Lifted {
				t.Fatalf("tick %d, %d pooled: %+v, want no decision yet", i, 140*i, st)
			}
			if i == 4 && (st.Lifted || math.Abs(st.Share-cutFactor*0.2) > 1e-9) {
				t.Fatalf("a full window with p99 5 ms: %+v, want capped at %g", st, cutFactor*0.2)
			}
		}
	})
}

// TestConserveLifts: after a cut from lifted, caps are not lifted again
// before LiftBackoff, then a tick well within the target lifts; a failed
// lift doubles that wait; a full window with room at the levels' most
// lifts, and so does one where no cap holds anybody; lifted caps nobody is
// contended by for LiftIdle are armed again at Start.
func TestConserveLifts(t *testing.T) {
	t.Parallel()
	c, step, atp := conserving(t)
	learnLifted(t, step)
	for range LiftKeep / time.Second {
		step(contended(2*ms, 0.9)) // a lift that held: the wait stays LiftBackoff
	}
	cutAt := atp.Add(time.Second)
	if st := step(contended(5*ms, 0.1)); st.Lifted || c.lift.wait != LiftBackoff {
		t.Fatalf("5 ms lifted: %+v, wait %s, want a cut and a wait of %s", st, c.lift.wait, LiftBackoff)
	}
	var st State
	for atp.Add(time.Second).Sub(cutAt) < LiftBackoff {
		if st = step(capped(1 * ms)); st.Lifted {
			t.Fatalf("%s after a cut: lifted, want none before LiftBackoff %s", atp.Sub(cutAt), LiftBackoff)
		}
	}
	// (A probe of the unloaded latency, due every 30 s of caps, may take
	// the ticks right after the wait.)
	for range probeMeasures + 2 {
		if st = step(capped(1 * ms)); st.Lifted {
			break
		}
	}
	if !st.Lifted {
		t.Fatalf("%s after the cut, ticks at a third of the target: %+v, want lifted", atp.Sub(cutAt), st)
	}
	// A failed lift (cut at once): the next wait is twice as long.
	cutAt = atp.Add(time.Second)
	step(contended(5*ms, 0.1))
	if c.lift.wait != 2*LiftBackoff {
		t.Fatalf("wait after a failed lift %s, want %s", c.lift.wait, 2*LiftBackoff)
	}
	for atp.Add(time.Second).Sub(cutAt) < 2*LiftBackoff {
		if st = step(capped(1 * ms)); st.Lifted {
			t.Fatalf("%s after a failed lift: lifted, want none before %s", atp.Sub(cutAt), 2*LiftBackoff)
		}
	}
	// (A probe of the unloaded latency, due every 30 s of caps, may take
	// the ticks right after the wait.)
	for range probeMeasures + 1 {
		if st = step(capped(1 * ms)); st.Lifted {
			break
		}
	}
	if !st.Lifted {
		t.Fatalf("%s after a failed lift: %+v, want lifted", atp.Sub(cutAt), st)
	}

	// A window (Window 1: a tick) at 2 ms, 0.67 of the target: no fast
	// lift, and none while a held cap can still be raised; one at the
	// levels' most, or one nobody ran into, lifts.
	windowLift := func(t *testing.T, in Input, share float64) State {
		c, err := New(Config{Start: share, Floor: 0.02, Max: 0.3, Step: 0.01, Window: 1, Conserve: true, Target: 3 * ms})
		if err != nil {
			t.Fatal(err)
		}
		in.At = t0
		return c.Step(in)
	}
	w := capped(2 * ms)
	if st := windowLift(t, w, 0.1); st.Lifted {
		t.Fatalf("a held cap at 0.1 below the most 0.3, window at 2 ms: %+v, want a raise, not a lift", st)
	}
	if st := windowLift(t, w, 0.3); !st.Lifted {
		t.Fatalf("a held cap at the levels' most, window at 2 ms: %+v, want lifted", st)
	}
	w.Held = false
	if st := windowLift(t, w, 0.1); !st.Lifted {
		t.Fatalf("a cap nobody ran into, window at 2 ms: %+v, want lifted", st)
	}

	// Lifted, nobody contended for LiftIdle: armed again at Start.
	_, step2, _ := conserving(t)
	learnLifted(t, step2)
	for i := time.Duration(1); i*time.Second < LiftIdle; i++ {
		if st := step2(Input{Hist: hist(1*ms, 100)}); !st.Lifted {
			t.Fatalf("%ds uncontended: %+v, capped before LiftIdle", i, st)
		}
	}
	if st := step2(Input{Hist: hist(1*ms, 100)}); st.Lifted || st.Share != 0.05 {
		t.Fatalf("%s uncontended: %+v, want capped at Start for the next contention", LiftIdle, st)
	}
}

// TestMinTarget: a learned target is at least MinTarget; a fixed one is
// taken as it is.
func TestMinTarget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  Config
		want time.Duration
	}{
		{Config{}, DefaultMinTarget},
		{Config{MinTarget: 800 * time.Microsecond}, 800 * time.Microsecond},
		{Config{MinTarget: -1}, 200 * time.Microsecond}, // DefaultMultiple (2) × 100 µs
	} {
		c, err := New(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.Step(Input{At: t0, Hist: hist(100*time.Microsecond, 100), Quiet: true})
		if got := c.State().Target; !near(got, tc.want) {
			t.Errorf("%+v, unloaded 100 µs: target %s, want %s", tc.cfg, got, tc.want)
		}
	}
	c, _ := New(Config{Target: 200 * time.Microsecond})
	if got := c.State().Target; got != 200*time.Microsecond {
		t.Errorf("fixed 200 µs: target %s", got)
	}
}

// TestConserveCutBoughtNothing: a lifted window's tail above the target
// cuts; when the first capped window after it is as slow (the device's
// own noise, no cap lowers it) the caps are lifted again, and lifted
// windows at that latency no longer cut; a tail above the noise floor
// does, and a capped window that is faster keeps the caps.
func TestConserveCutBoughtNothing(t *testing.T) {
	t.Parallel()
	_, step, _ := conserving(t)
	learnLifted(t, step) // target 3 ms
	tail := func(d time.Duration) Input {
		return Input{Hist: mix(hist(1*ms, 95), hist(d, 5)), Contended: true, Used: 0.2, Max: 0.3}
	}
	if st := step(tail(4 * ms)); st.Lifted {
		t.Fatalf("a lifted window's p99 at 4 ms against 3 ms: %+v, want capped", st)
	}
	in := tail(4 * ms)
	in.Capped, in.Held = true, true
	if st := step(in); !st.Lifted {
		t.Fatalf("the capped window after the cut as slow (4 ms): %+v, want lifted again", st)
	}
	for i := range 10 {
		if st := step(tail(4500 * time.Microsecond)); !st.Lifted {
			t.Fatalf("lifted window %d at 4.5 ms, under the noise floor 1.25 x 4 ms: %+v, want still lifted", i, st)
		}
	}
	if st := step(tail(6 * ms)); st.Lifted {
		t.Fatalf("a lifted window at 6 ms, above the noise floor: %+v, want capped", st)
	}
	in = tail(2 * ms)
	in.Capped, in.Held = true, true
	if st := step(in); st.Lifted {
		t.Fatalf("the capped window after that cut at 2 ms (a third of 6 ms): %+v, want still capped", st)
	}
}

// TestConserveCappedCutBoughtNothing: capped, a window a little above the
// target cuts; when the next window is as slow, the share before the cut
// comes back and, where the throttle predicts that a lift would queue,
// windows at that latency no longer cut while one above the noise floor
// does; where it does not predict so, the caps are lifted (they may be
// what slows the victims), lifted windows under the noise floor keep them
// lifted and one above it cuts. Mutation checked: no armCheck on capped
// cuts fails it; liftUntried always false fails the second half.
func TestConserveCappedCutBoughtNothing(t *testing.T) {
	t.Parallel()
	for _, queues := range []bool{true, false} {
		c, err := New(Config{Start: 0.1, Floor: 0.02, Max: 0.6, Step: 0.01, Window: 1, Conserve: true, Target: 3 * ms})
		if err != nil {
			t.Fatal(err)
		}
		at := t0
		step := func(d time.Duration) State {
			at = at.Add(time.Second)
			// A tail: the p99 at d, the p90 within the target (lifted, a
			// tick's p90 above it is contention and cuts).
			in := Input{At: at, Hist: mix(hist(1*ms, 95), hist(d, 5)), Capped: true, Held: true, Contended: true, InForce: 0.1, Used: 0.1, Queues: queues}
			if c.State().Lifted {
				in.Capped, in.Held, in.InForce = false, false, 0
			}
			return c.Step(in)
		}
		if st := step(4 * ms); math.Abs(st.Share-0.07) > 1e-9 {
			t.Fatalf("queues %v: held at 10 %%, a window at 4 ms against 3 ms: %+v, want cut to 0.07", queues, st)
		}
		st := step(4 * ms)
		if queues && (st.Lifted || math.Abs(st.Share-0.1) > 1e-9) || !queues && !st.Lifted {
			t.Fatalf("queues %v: the window after the cut as slow: %+v, want the share before it, 0.1, lifted only where a lift does not queue", queues, st)
		}
		for i := range 5 {
			if st := step(4400 * time.Microsecond); st.Lifted != !queues || st.Share < 0.1-1e-9 {
				t.Fatalf("queues %v: window %d at 4.4 ms, under the noise floor: %+v, want no cut", queues, i, st)
			}
		}
		if st := step(7 * ms); st.Lifted || st.Share >= 0.1 {
			t.Fatalf("queues %v: a window at 7 ms, above the noise floor: %+v, want a cut", queues, st)
		}
	}
}

// TestConserveHeldAtMost: a cap that holds its neighbour back at the most
// share lifts on two ticks well within the target in a row, not on one: in the VM a tick at 60 %
// of qemu's capped disk looked fine while its burst bucket drained, and
// the lift it made cost the victim 160 ms reads a tick later (one pair in
// two of TestRealV2LatencyEffect, 2026-12-02). Mutation checked: the tick
// rule lifting there fails it.
func TestConserveHeldAtMost(t *testing.T) {
	t.Parallel()
	_, step := heldAtThird(t)
	var st State
	// Ticks from 5 % to the most, 60 %: seven raises (TestConserveSlowStart),
	// each on doubleTicks pooled ticks (TestDoubleNeedsPool).
	const climb = 7 * doubleTicks
	for i := range climb + mostTicks {
		st = step(nil)
		if st.Lifted {
			if st.Share != 1 || i < climb+mostTicks-1 {
				t.Fatalf("tick %d: lifted (%+v), want lifted only after %d ticks at the most share", i, st, mostTicks)
			}
			return
		}
	}
	t.Fatalf("after %d ticks at a third of the target, held at the most share: %+v, want lifted", climb+mostTicks, st)
}

// TestDoubleNeedsPool: a held cap's tick within half the target doubles
// the share only when the ticks pooled at that share, at least
// doubleTicks with it, are within half the target too: one lucky tick
// after one at the target does not double. Mutation checked: the tick
// rule doubling on the tick alone (liftDue without pooledWithin) fails it.
func TestDoubleNeedsPool(t *testing.T) {
	t.Parallel()
	_, step := heldAtThird(t)                                              // 3 ms target, 5 %
	slow := func(in *Input) { in.Hist = hist(2500*time.Microsecond, 100) } // between 0.8x and 1x the target: held
	if st := step(slow); st.Share != 0.05 {
		t.Fatalf("a tick near the target: %+v, want the share held at 5 %%", st)
	}
	if st := step(nil); st.Share != 0.05 {
		t.Fatalf("a tick at a third of the target after one at it, at one share: %+v, want the share held at 5 %%", st)
	}
	// A window (5 ticks) measured near the target ends that pool; the next
	// two ticks within half of it double.
	for range 3 {
		step(slow)
	}
	if st := step(nil); st.Share != 0.05 {
		t.Fatalf("the first tick of a new pool: %+v, want the share held at 5 %% (one tick)", st)
	}
	if st := step(nil); math.Abs(st.Share-0.1) > 1e-9 {
		t.Fatalf("two ticks pooled at a third of the target: %+v, want the share doubled to 10 %%", st)
	}
}

// heldAtThird is a work-conserving controller with a fixed 3 ms target
// and a step that feeds it the next second's tick of a cap holding its
// neighbour, the victims at a third of the target.
// mod, when not nil, changes the tick first.
func heldAtThird(t *testing.T) (*Controller, func(mod func(*Input)) State) {
	t.Helper()
	c, err := New(Config{Start: 0.05, Floor: 0.02, Max: 0.6, Conserve: true, Target: 3 * ms})
	if err != nil {
		t.Fatal(err)
	}
	at := t0
	return c, func(mod func(*Input)) State {
		at = at.Add(time.Second)
		in := capped(1 * ms)
		in.At = at
		if mod != nil {
			mod(&in)
		}
		return c.Step(in)
	}
}

// TestRefusedLift: the throttle's refusal of a lift (Input.Refused) is a
// failed lift: the share it came from, not lifted, and no lift again
// before the doubled wait.
func TestRefusedLift(t *testing.T) {
	t.Parallel()
	_, step := heldAtThird(t)
	var st State
	for range 20 {
		if st = step(nil); st.Lifted {
			break
		}
	}
	if !st.Lifted {
		t.Fatalf("not lifted after 20 ticks at a third of the target: %+v", st)
	}
	if st = step(func(in *Input) { in.Refused, in.Capped, in.Held = true, false, false }); st.Lifted || st.Share != 0.6 {
		t.Fatalf("refused lift: %+v, want not lifted, back at the most share 0.6 it came from", st)
	}
	for i := range int(2*LiftBackoff/time.Second) - 1 {
		if st = step(nil); st.Lifted {
			t.Fatalf("lifted again %d s after a refused lift, want not before the doubled wait %v", i+1, 2*LiftBackoff)
		}
	}
}

// TestConserveQueuesHeld: where the throttle predicts a lift would queue
// the let-go requests (Input.Queues), a cap holding its neighbour back at
// the most share is not lifted, however long the victims are well within
// the target; not held, it is. Mutation checked: ignoring Queues in
// liftDue lifts at the third tick at the most share.
func TestConserveQueuesHeld(t *testing.T) {
	t.Parallel()
	_, step := heldAtThird(t)
	for i := range 30 {
		if st := step(func(in *Input) { in.Queues = true }); st.Lifted || st.Share > 0.6 {
			t.Fatalf("tick %d: %+v, want held at most at 0.6 and never lifted", i, st)
		}
	}
	var st State
	for range WindowTicks + 1 { // the window still holds the held ticks
		if st = step(func(in *Input) { in.Queues, in.Held = true, false }); st.Lifted {
			return
		}
	}
	t.Fatalf("a cap nobody runs into, %d ticks at a third of the target: %+v, want lifted", WindowTicks+1, st)
}

// TestKneeBoundWindow: a tick well within the target that would double the
// share, where the knee of the last cut bounds the raise so the share
// does not move, does not start a new window: ticks alternating between a
// third of the target and 1.5x it make a window above the target, which
// is measured and decided on (here the cut bought nothing: undone and
// lifted, lift.go). Before, each good tick reset the window while the knee
// held (20 s): on the tmpfs loop device in the host scenario (2026-12-03)
// the controller measured no window for 10-15 s at a time, its share
// stuck at the knee, the web reader's per-second p99 alternating 0.3-1.9
// ms against a 500 us target, and a cut that bought nothing was never
// found. Mutation checked: the pool reset again on a bounded raise, no
// window measured within KneeHold.
func TestKneeBoundWindow(t *testing.T) {
	t.Parallel()
	c, err := New(Config{Start: 0.2, Floor: 0.02, Max: 0.6, Conserve: true, Target: 3 * ms})
	if err != nil {
		t.Fatal(err)
	}
	at := t0
	step := func(lat time.Duration) State {
		at = at.Add(time.Second)
		in := capped(lat)
		in.At, in.Max = at, 0.6
		return c.Step(in)
	}
	// A window at 4 ms (above the 3 ms target, under twice it): a cut
	// from the start share, its knee at 0.2.
	var st State
	for range WindowTicks {
		st = step(4 * ms)
	}
	if st.Share >= 0.2 {
		t.Fatalf("a window at 4 ms against a 3 ms target: %+v, want a cut from 0.2", st)
	}
	cutP99 := st.P99
	// Good and bad ticks in turn: the first good one raises to the knee's
	// bound (0.85 of 0.2); the window goes on through the ones after.
	for i := range 2 * WindowTicks {
		lat := time.Millisecond
		if i%2 == 1 {
			lat = 4500 * time.Microsecond
		}
		if st = step(lat); st.P99 != cutP99 {
			if st.P99 < 4*ms || st.Share == 0.17 {
				t.Fatalf("tick %d: %+v, want a window above the target (1 ms and 4.5 ms ticks) and a decision from the knee's 0.17", i, st)
			}
			return
		}
	}
	t.Fatalf("ticks alternating 1 ms and 4.5 ms against a 3 ms target: no window measured in %d ticks (%+v)", 2*WindowTicks, st)
}

// fixedConserving is a work-conserving controller with a fixed 3 ms
// target (no probe) deciding on every tick of MinSamples, and a stepper.
func fixedConserving(t *testing.T) func(in Input) State {
	t.Helper()
	c, err := New(Config{Start: 0.05, Floor: 0.02, Max: 0.6, Step: 0.01, Window: 1, Conserve: true, Target: 3 * ms})
	if err != nil {
		t.Fatal(err)
	}
	at := t0
	return func(in Input) State {
		at = at.Add(time.Second)
		in.At = at
		return c.Step(in)
	}
}

// TestConserveIdleLift: with nobody contended and the device shallow
// (Input.Shallow), a tick lifts the caps, and a contention then starts
// uncapped; a device not shallow stays armed at Start; a refused idle lift
// puts the share before it back and waits a failed lift's wait before the
// next. Mutation checked: without idleStep's lift, the first case fails.
func TestConserveIdleLift(t *testing.T) {
	t.Parallel()
	step := fixedConserving(t)
	if st := step(Input{}); st.Lifted || st.Share != 0.05 {
		t.Fatalf("idle, the device not known shallow: %+v, want armed at Start", st)
	}
	if st := step(Input{Shallow: true}); !st.Lifted || st.Share != 1 {
		t.Fatalf("idle beside a shallow neighbour: %+v, want lifted", st)
	}
	if st := step(contended(1*ms, 0.05)); !st.Lifted {
		t.Fatalf("a contention within the target after an idle lift: %+v, want still lifted", st)
	}
	if st := step(Input{Contended: true, Refused: true, Hist: hist(1*ms, 100)}); st.Lifted || st.Share != 0.05 {
		t.Fatalf("the idle lift refused: %+v, want the share before it (Start)", st)
	}
	for i := range 15 {
		if st := step(Input{Shallow: true}); st.Lifted {
			t.Fatalf("%d s after a refused lift, idle and shallow: %+v, want a failed lift's wait first", i+1, st)
		}
	}
	for range 10 {
		step(Input{Shallow: true})
	}
	if st := step(Input{Shallow: true}); !st.Lifted {
		t.Fatalf("past the wait, idle and shallow: %+v, want lifted", st)
	}
	// Idle-lifted before any target: a contention whose requests are
	// served alone stays lifted (they teach the target: learnAlone); one
	// without them is armed at Start for the probe, no wait counted.
	// Mutation checked: without the rule, the slow tick against no target
	// cuts with the longest wait.
	_, step, _ = conserving(t)
	step(Input{Shallow: true})
	in := contended(1*ms, 0.05)
	in.Alone = hist(1*ms, 80)
	if st := step(in); !st.Lifted {
		t.Fatalf("idle-lifted, no target yet, requests served alone: %+v, want still lifted", st)
	}
	if st := step(in); !st.Lifted || !near(st.Target, 3*ms) {
		t.Fatalf("two pools served alone at 1 ms: %+v, want lifted, a ~3 ms target", st)
	}
	c, step, _ := conserving(t)
	step(Input{Shallow: true})
	if st := step(contended(400*ms, 0.05)); st.Lifted || st.Share != 0.05 {
		t.Fatalf("idle-lifted, no target, nothing served alone: %+v, want armed at Start", st)
	}
	if c.lift.wait != LiftBackoff || !c.lift.cutAt.IsZero() {
		t.Fatalf("armed for the probe: wait %v, cut at %v; want no failed lift counted", c.lift.wait, c.lift.cutAt)
	}
	// Not work-conserving: no idle lift.
	c, err := New(Config{Start: 0.05, Floor: 0.02, Max: 0.6, Step: 0.01, Window: 1, Target: 3 * ms})
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Step(Input{At: t0, Shallow: true}); st.Lifted {
		t.Fatalf("not conserving, idle and shallow: %+v, want not lifted", st)
	}
}

// tail is a tick of 95 protected requests at 1 ms and 5 at 5 ms (p90 1
// ms, p99 5 ms: a window above a 3 ms target, no tick's contention), of
// which 60 at 1 ms were served alone, and the slow 5 too when slowAlone.
func tail(in Input, slowAlone bool) Input {
	in.Hist, in.Alone = hist(1*ms, 95), hist(1*ms, 60)
	slow := hist(5*ms, 5)
	in.Hist.Add(&slow)
	if slowAlone {
		in.Alone.Add(&slow)
	}
	return in
}

// TestConserveAloneFloor: a lifted window above the target whose slow
// requests the device served alone (nothing else in flight: noise no cap
// lowers), most of its requests served alone, cuts nothing; the same
// window with its slow requests among the others' cuts, and so does one
// with only a few served alone; a capped window is judged without them
// (a capped streamer's gaps leave a few served alone, slow too on a noisy
// disk, and held a cap with the victim at 6x idle). Mutation checked:
// without aloneFloor the first case cuts; without its majority rule, the
// third stays lifted.
func TestConserveAloneFloor(t *testing.T) {
	t.Parallel()
	step := fixedConserving(t)
	step(Input{Shallow: true})
	if st := step(tail(contended(0, 0.05), true)); !st.Lifted {
		t.Fatalf("lifted, a window at 5 ms against 3 ms, its slow requests served alone: %+v, want still lifted", st)
	}
	if st := step(tail(contended(0, 0.05), false)); st.Lifted || st.Share >= 1 {
		t.Fatalf("lifted, a window at 5 ms against 3 ms, its slow requests beside others: %+v, want cut", st)
	}
	step = fixedConserving(t)
	step(Input{Shallow: true})
	few := tail(contended(0, 0.05), true)
	few.Alone = hist(5*ms, 5)
	more := hist(1*ms, 10)
	few.Alone.Add(&more)
	if st := step(few); st.Lifted {
		t.Fatalf("lifted, a window at 5 ms against 3 ms, 15 of its 100 requests served alone: %+v, want cut", st)
	}
	step = fixedConserving(t)
	if st := step(tail(capped(0), true)); st.Share >= 0.05 {
		t.Fatalf("capped at 5 %%, a window at 5 ms against 3 ms, its slow requests served alone: %+v, want cut", st)
	}
}

// TestConserveDoubleChecked: the tick after a doubling of the slow start
// is its check: its p99 above the target (no tick's contention: p90
// within it) puts back the share it doubled from, and the knee bounds the
// next raise below the share that hurt; a check within the target lets
// the doubling stand. Mutation checked: without checkDouble the share
// stays at 0.1.
func TestConserveDoubleChecked(t *testing.T) {
	t.Parallel()
	step := fixedConserving(t)
	if st := step(capped(1 * ms)); math.Abs(st.Share-0.1) > 1e-9 {
		t.Fatalf("a held tick at a third of the target: %+v, want doubled to 0.1", st)
	}
	over := capped(0)
	over.Hist = hist(1*ms, 95)
	slow := hist(4*ms, 5)
	over.Hist.Add(&slow)
	if st := step(over); math.Abs(st.Share-0.05) > 1e-9 {
		t.Fatalf("the tick after the doubling at 4 ms p99 against 3 ms: %+v, want 0.05 back", st)
	}
	if st := step(capped(1 * ms)); st.Share > 0.085+1e-9 {
		t.Fatalf("a good tick after the undone doubling: %+v, want at most 0.85 of the 0.1 that hurt", st)
	}
	step = fixedConserving(t)
	step(capped(1 * ms))
	if st := step(capped(2 * ms)); st.Share < 0.1 {
		t.Fatalf("the tick after the doubling at 2 ms against 3 ms: %+v, want the doubling to stand (at least 0.1)", st)
	}
}

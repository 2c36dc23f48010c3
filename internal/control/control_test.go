package control

import (
	"math"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/iolat"
)

// hist is n requests of d each.
func hist(d time.Duration, n uint64) iolat.Hist {
	var h iolat.Hist
	h[iolat.Bucket(uint64(d))] = n
	return h
}

const ms = time.Millisecond

// near reports whether a and b are within 5 % (the histogram's
// resolution is a quarter of an octave; the quantile interpolates).
func near(a, b time.Duration) bool {
	return math.Abs(float64(a-b)) <= 0.15*float64(b)
}

var t0 = time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)

type tick struct {
	lat       time.Duration
	n         uint64
	capped    bool
	held      bool
	quiet     bool
	max       float64
	wantShare float64
	probing   bool
}

func TestStep(t *testing.T) {
	t.Parallel()
	// Window 1: every tick with MinSamples requests decides (the window
	// is TestWindow's).
	cfg := Config{Multiple: 3, Start: 0.05, Floor: 0.02, Max: 0.3, Step: 0.01, Window: 1}
	tests := []struct {
		name       string
		cfg        Config
		ticks      []tick
		wantTarget time.Duration // after the last tick (0: not checked)
	}{
		{
			name: "learns unloaded, then raises fast while far below the target",
			cfg:  cfg,
			ticks: []tick{
				{lat: 1 * ms, n: 100, quiet: true, wantShare: 0.05},
				{lat: 1 * ms, n: 100, capped: true, held: true, wantShare: 0.0625},
				{lat: 1 * ms, n: 100, capped: true, held: true, wantShare: 0.078125},
			},
			wantTarget: 3 * ms,
		},
		{
			name: "raises by Step between half and 0.8 of the target, holds above",
			cfg:  cfg,
			ticks: []tick{
				{lat: 1 * ms, n: 100, quiet: true, wantShare: 0.05},
				{lat: 2 * ms, n: 100, capped: true, held: true, wantShare: 0.06},
				{lat: 2800 * time.Microsecond, n: 100, capped: true, held: true, wantShare: 0.06},
			},
		},
		{
			name: "cuts above the target, deeper above twice, never below the floor",
			cfg:  cfg,
			ticks: []tick{
				{lat: 1 * ms, n: 100, quiet: true, wantShare: 0.05},
				{lat: 4 * ms, n: 100, capped: true, held: true, wantShare: 0.035},
				{lat: 10 * ms, n: 100, capped: true, held: true, wantShare: 0.02},
				{lat: 10 * ms, n: 100, capped: true, held: true, wantShare: 0.02},
			},
		},
		{
			name: "after a cut, raises stop below the share cut from (the knee)",
			cfg:  cfg,
			ticks: []tick{
				{lat: 1 * ms, n: 100, quiet: true, wantShare: 0.05},
				{lat: 2 * ms, n: 100, capped: true, held: true, wantShare: 0.06},
				{lat: 2 * ms, n: 100, capped: true, held: true, wantShare: 0.07},
				// Too much at 0.07: cut, the knee is 0.07.
				{lat: 4 * ms, n: 100, capped: true, held: true, wantShare: 0.049},
				// Raises up to 0.85 × 0.07 = 0.0595, then hold there
				// however low the latency.
				{lat: 2 * ms, n: 100, capped: true, held: true, wantShare: 0.059},
				{lat: 1 * ms, n: 100, capped: true, held: true, wantShare: 0.0595},
				{lat: 1 * ms, n: 100, capped: true, held: true, wantShare: 0.0595},
			},
		},
		{
			name: "a cap nobody runs into is not raised",
			cfg:  cfg,
			ticks: []tick{
				{lat: 1 * ms, n: 100, quiet: true, wantShare: 0.05},
				{lat: 1 * ms, n: 100, capped: true, wantShare: 0.05},
			},
		},
		{
			name: "never above Max",
			cfg:  Config{Multiple: 3, Start: 0.28, Floor: 0.02, Max: 0.3, Window: 1},
			ticks: []tick{
				{lat: 1 * ms, n: 100, quiet: true, wantShare: 0.28},
				{lat: 1 * ms, n: 100, capped: true, held: true, wantShare: 0.3},
			},
		},
		{
			name: "Input.Max: the levels capped now get at most their share; a share above it comes down",
			cfg:  Config{Multiple: 3, Start: 0.25, Floor: 0.02, Max: 0.6, Window: 1},
			ticks: []tick{
				{lat: 1 * ms, n: 100, quiet: true, wantShare: 0.25},
				{lat: 1 * ms, n: 100, capped: true, held: true, max: 0.3, wantShare: 0.3},
				{lat: 1 * ms, n: 100, capped: true, held: true, max: 0.2, wantShare: 0.2},
				{lat: 1 * ms, n: 100, capped: true, held: true, wantShare: 0.25},
			},
		},
		{
			name: "a loud neighbour uncapped is no unloaded sample",
			cfg:  cfg,
			ticks: []tick{
				{lat: 50 * ms, n: 100, wantShare: 0.05},
				// No baseline yet: a loaded tick probes.
				{lat: 1 * ms, n: 100, capped: true, held: true, wantShare: probeFrac * 0.02, probing: true},
			},
		},
		{
			name: "caps on from the start: probe below the floor, then back to the share",
			cfg:  cfg,
			ticks: []tick{
				{lat: 3 * ms, n: 100, capped: true, held: true, wantShare: probeFrac * 0.02, probing: true},
				// The probe's two ticks: the lower p99 is learned.
				{lat: 1 * ms, n: 100, capped: true, held: true, wantShare: probeFrac * 0.02, probing: true},
				{lat: 20 * ms, n: 100, capped: true, held: true, wantShare: 0.05},
				{lat: 2 * ms, n: 100, capped: true, held: true, wantShare: 0.06},
			},
			wantTarget: 3 * ms,
		},
		{
			name: "few requests are pooled until MinSamples, the slowest of them counts",
			cfg:  cfg,
			ticks: []tick{
				{lat: 1 * ms, n: 100, quiet: true, wantShare: 0.05},
				{lat: 1 * ms, n: 4, capped: true, held: true, wantShare: 0.05},
				{lat: 1 * ms, n: 4, capped: true, held: true, wantShare: 0.05},
				{lat: 8 * ms, n: 2, capped: true, held: true, wantShare: 0.025},
			},
		},
		{
			name: "a fixed target needs no probe",
			cfg:  Config{Start: 0.05, Floor: 0.02, Max: 0.3, Target: 10 * ms, Window: 1},
			ticks: []tick{
				{lat: 4 * ms, n: 100, capped: true, held: true, wantShare: 0.0625},
				{lat: 12 * ms, n: 100, capped: true, held: true, wantShare: 0.04375},
			},
			wantTarget: 10 * ms,
		},
		{
			name: "no requests: nothing moves",
			cfg:  cfg,
			ticks: []tick{
				{lat: 1 * ms, n: 100, quiet: true, wantShare: 0.05},
				{n: 0, capped: true, held: true, wantShare: 0.05},
				{n: 0, wantShare: 0.05},
			},
			wantTarget: 3 * ms,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			var st State
			for i, tk := range tc.ticks {
				st = c.Step(Input{At: t0.Add(time.Duration(i) * time.Second), Hist: hist(tk.lat, tk.n),
					Capped: tk.capped, Held: tk.held, Quiet: tk.quiet, Max: tk.max})
				if math.Abs(st.Share-tk.wantShare) > 1e-9 || st.Probing != tk.probing {
					t.Fatalf("tick %d (%s, %d requests): share %g probing %v, want %g probing %v (state %+v)",
						i, tk.lat, tk.n, st.Share, st.Probing, tk.wantShare, tk.probing, st)
				}
			}
			if tc.wantTarget != 0 && !near(st.Target, tc.wantTarget) {
				t.Errorf("target %s, want ~%s", st.Target, tc.wantTarget)
			}
		})
	}
}

// knee3ms returns a controller started at share start (floor 2 %, step
// 1 %, deciding every tick) that has learned 1 ms unloaded (a 3 ms target), a step that feeds
// it a loaded, held tick of 100 requests at lat dt after the last, and
// the clock the steps advance.
func knee3ms(t *testing.T, start float64) (*Controller, func(lat, dt time.Duration) State, *time.Time) {
	t.Helper()
	c, err := New(Config{Multiple: 3, Start: start, Floor: 0.02, Max: 0.3, Step: 0.01, Window: 1})
	if err != nil {
		t.Fatal(err)
	}
	at := t0
	c.Step(Input{At: at, Hist: hist(1*ms, 100), Quiet: true}) // learns 1 ms: target 3 ms
	step := func(lat, dt time.Duration) State {
		at = at.Add(dt)
		return c.Step(Input{At: at, Hist: hist(lat, 100), Capped: true, Held: true})
	}
	return c, step, &at
}

// TestKneeForgotten: a knee bounds the raises for KneeHold after its cut,
// then the share probes past it; a new cut sets a new knee.
func TestKneeForgotten(t *testing.T) {
	t.Parallel()
	c, step, atp := knee3ms(t, 0.05)
	if st := step(4*ms, time.Second); math.Abs(st.Share-0.035) > 1e-9 {
		t.Fatalf("cut from 0.05: share %g, want 0.035", st.Share)
	}
	// Held below 0.85 × 0.05 until KneeHold has passed since the cut.
	for i := 0; i < 5; i++ {
		if st := step(2*ms, 3*time.Second); st.Share > 0.0425+1e-9 {
			t.Fatalf("%s after the cut: share %g above the knee's 0.0425", atp.Sub(t0), st.Share)
		}
	}
	if st := step(2*ms, 10*time.Second); st.Share <= 0.0425+1e-9 {
		t.Fatalf("%s after the cut (KneeHold %s): share %g still at the knee", atp.Sub(t0), KneeHold, st.Share)
	}
	// A new cut sets a new knee at the share it came from.
	from := c.State().Share
	step(4*ms, time.Second)
	for i := 0; i < 5; i++ {
		if st := step(1*ms, time.Second); st.Share > kneeFrac*from+1e-9 {
			t.Fatalf("after a second cut from %g: share %g above %g", from, st.Share, kneeFrac*from)
		}
	}
	if st := c.State(); math.Abs(st.Share-kneeFrac*from) > 1e-9 {
		t.Errorf("share %g, want it back at %g after five fast raises", st.Share, kneeFrac*from)
	}
}

// TestKneeOneEvent: cuts a tick apart are one event, and the knee stays
// the share the first came from; a cut after kneeEvent sets its own.
func TestKneeOneEvent(t *testing.T) {
	t.Parallel()
	c, step, atp := knee3ms(t, 0.08)
	step(4*ms, time.Second) // 0.08 → 0.056
	step(4*ms, time.Second) // 0.056 → 0.0392, one event with the first
	var st State
	for i := 0; i < 5; i++ {
		st = step(1*ms, time.Second)
	}
	if want := kneeFrac * 0.08; math.Abs(st.Share-want) > 1e-9 {
		t.Fatalf("after two cuts a tick apart from 0.08 and 0.056, then five fast raises: share %g, want the first knee's %g", st.Share, want)
	}
	// A cut kneeEvent after the last is an event of its own: its knee is
	// the share it came from, lower than the first.
	*atp = atp.Add(kneeEvent)
	from := c.State().Share
	step(4*ms, time.Second)
	for i := 0; i < 5; i++ {
		st = step(1*ms, time.Second)
	}
	if want := kneeFrac * from; math.Abs(st.Share-want) > 1e-9 {
		t.Errorf("a later cut from %g: share %g after five fast raises, want its own knee's %g", from, st.Share, want)
	}
}

// TestBaselineAges: a lower unloaded measure is taken at once, a higher one
// by a tenth; a probe comes again after ProbeEvery of caps.
func TestBaselineAges(t *testing.T) {
	t.Parallel()
	c, err := New(Config{Multiple: 3, Start: 0.05, Floor: 0.02, Max: 0.3, ProbeEvery: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	at := t0
	step := func(in Input) State {
		at = at.Add(time.Second)
		in.At = at
		return c.Step(in)
	}
	step(Input{Hist: hist(2*ms, 100), Quiet: true})
	b2 := c.State().Baseline
	step(Input{Hist: hist(1*ms, 100), Quiet: true})
	b1 := c.State().Baseline
	if !near(b1, 1*ms) || !near(b2, 2*ms) {
		t.Fatalf("baselines %s then %s, want ~2ms then ~1ms", b2, b1)
	}
	step(Input{Hist: hist(2*ms, 100), Quiet: true})
	if b := c.State().Baseline; b <= b1 || b > b1+b1/5 {
		t.Fatalf("baseline after a higher sample %s, want a tenth of the way up from %s", b, b1)
	}
	// Loaded for ProbeEvery: a probe, then the share before it.
	probed := false
	for range 12 {
		st := step(Input{Hist: hist(1500*time.Microsecond, 100), Capped: true, Held: true})
		if st.Probing {
			probed = true
			if st.Share != probeFrac*0.02 {
				t.Fatalf("probe share %g, want a tenth of the floor", st.Share)
			}
			before := c.before
			if st = step(Input{Hist: hist(9*ms, 100), Capped: true, Held: true}); !st.Probing || st.Share != probeFrac*0.02 {
				t.Fatalf("the probe's first tick: %+v, want it still probing", st)
			}
			st = step(Input{Hist: hist(1*ms, 100), Capped: true, Held: true})
			if st.Probing || st.Share != before {
				t.Fatalf("after the probe: %+v, want share %g", st, before)
			}
			break
		}
	}
	if !probed {
		t.Fatal("no probe within 12 s of caps with ProbeEvery 10 s")
	}
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{Target: -1},
		{Multiple: 0.5},
		{Floor: 0.5, Max: 0.3},
		{Max: 1.5},
		{Step: 2},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v): no error", cfg)
		}
	}
}

// mix is the sum of hists.
func mix(hs ...iolat.Hist) iolat.Hist {
	var h iolat.Hist
	for i := range hs {
		h.Add(&hs[i])
	}
	return h
}

// TestWindow: with the default window a loaded decision pools ~500
// protected requests, so two slow reads in a tick (its p99, at 140
// requests) cut nothing; a tick whose p90 is above twice the target is cut
// at once; victims too few to fill the window decide after WindowTicks.
func TestWindow(t *testing.T) {
	t.Parallel()
	c, err := New(Config{Multiple: 3, Start: 0.05, Floor: 0.02, Max: 0.3, Step: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	at := t0
	step := func(h iolat.Hist) State {
		at = at.Add(time.Second)
		return c.Step(Input{At: at, Hist: h, Capped: true, Held: true})
	}
	c.Step(Input{At: at, Hist: hist(1*ms, 140), Quiet: true}) // learns 1 ms: target 3 ms
	if tg := c.State().Target; !near(tg, 3*ms) {
		t.Fatalf("target %s, want ~3ms", tg)
	}
	// Two reads at 8 ms in a tick of 140: that tick's p99 is 8 ms, above
	// twice the target, but its p90 is 1 ms. Per tick this was a deep cut.
	noisy := mix(hist(1*ms, 138), hist(8*ms, 2))
	if q := noisy.Quantile(0.99); q < 6*ms {
		t.Fatalf("the noisy tick's p99 %s: want it above twice the target for this test to mean anything", q)
	}
	if st := step(noisy); st.Share != 0.05 {
		t.Fatalf("a tick with two slow reads: share %g, want 0.05 held until the window is full", st.Share)
	}
	for i := 0; i < 2; i++ {
		if st := step(hist(1*ms, 140)); st.Share != 0.05 {
			t.Fatalf("window tick %d (%d requests pooled): share %g, want no decision yet", i+2, 140*(i+2), st.Share)
		}
	}
	// The fourth tick fills 560 >= 500: the window's p99 is 1 ms (2 slow of
	// 560), at most half the target: a fast raise.
	if st := step(hist(1*ms, 140)); math.Abs(st.Share-0.0625) > 1e-9 || !near(st.P99, 1*ms) {
		t.Fatalf("window full: share %g p99 %s, want a fast raise to 0.0625 on a ~1ms p99", st.Share, st.P99)
	}
	// An overload: a tenth of a tick's requests above twice the target is
	// cut at once, deeply, with one tick pooled of the new window.
	step(hist(1*ms, 140))
	over := mix(hist(1*ms, 120), hist(7*ms, 20))
	if st := step(over); math.Abs(st.Share-0.0625*deepCutFactor) > 1e-9 {
		t.Fatalf("a tick with its p90 at 7 ms (target 3 ms): share %g, want the deep cut to %g at once", st.Share, 0.0625*deepCutFactor)
	}
	// The cut started a new window: the next three ticks (420) decide
	// nothing, the fourth does.
	for i := 0; i < 3; i++ {
		if st := step(hist(1*ms, 140)); math.Abs(st.Share-0.03125) > 1e-9 {
			t.Fatalf("tick %d after the fast cut: share %g, want 0.03125 held", i+1, st.Share)
		}
	}
	if st := step(hist(1*ms, 140)); st.Share <= 0.03125 {
		t.Fatalf("a full window at 1 ms after the fast cut: share %g, want a raise", st.Share)
	}
	// Starved: a QD1 victim whose reads each wait 160 ms fits six in a
	// tick, fewer than MinSamples; their median far above twice the
	// target cuts at once all the same.
	before := c.State().Share
	if st := step(hist(160*ms, 6)); math.Abs(st.Share-before*deepCutFactor) > 1e-9 {
		t.Fatalf("six reads of 160 ms in a tick (target 3 ms), share %g: share %g, want the deep cut to %g", before, st.Share, before*deepCutFactor)
	}

	// Few victims (20 requests a tick): a decision after WindowTicks.
	c2, err := New(Config{Multiple: 3, Start: 0.05, Floor: 0.02, Max: 0.3, Step: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	at = t0
	c2.Step(Input{At: at, Hist: hist(1*ms, 100), Quiet: true})
	for i := 1; i <= WindowTicks; i++ {
		at = at.Add(time.Second)
		st := c2.Step(Input{At: at, Hist: hist(4*ms, 20), Capped: true, Held: true})
		switch {
		case i < WindowTicks && st.Share != 0.05:
			t.Fatalf("tick %d of %d requests: share %g, want no decision before %d ticks", i, 20*i, st.Share, WindowTicks)
		case i == WindowTicks && math.Abs(st.Share-0.05*cutFactor) > 1e-9:
			t.Fatalf("after %d ticks at 4 ms (target 3 ms): share %g, want a cut to %g", i, st.Share, 0.05*cutFactor)
		}
	}
}

// TestLearnAlone: a contention that begins where the protected requests are
// served alone (a moderate neighbour, idle most of the time) learns the
// target from them, with no probe; a trickle of them under a streamer puts
// no probe off; a pool too slow to fill is dropped. Mutations checked:
// learnAlone not called probes at the first loaded tick; the trickle rule
// removed never probes.
func TestLearnAlone(t *testing.T) {
	t.Parallel()
	cfg := Config{Multiple: 3, Start: 0.05, Floor: 0.02, Max: 0.6, Conserve: true}
	at := t0
	stepOf := func(c *Controller) func(in Input) State {
		return func(in Input) State {
			at = at.Add(time.Second)
			in.At = at
			return c.Step(in)
		}
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	step := stepOf(c)
	// Capped from the victim's first request; 90 of its 100 requests a
	// tick served alone at ~300 µs (the others beside the neighbour's).
	in := Input{Hist: hist(300*time.Microsecond, 100), Alone: hist(300*time.Microsecond, 90), Capped: true, Held: true, Contended: true}
	st := step(in)
	if st.Probing || st.Target != 0 {
		t.Fatalf("first tick of requests served alone: %+v, want no probe and no target yet (a pair of pools)", st)
	}
	st = step(in)
	if st.Probing || !near(st.Baseline, 300*time.Microsecond) || st.Target != DefaultMinTarget && !near(st.Target, 900*time.Microsecond) {
		t.Fatalf("second tick: %+v, want baseline ~300µs learned from the requests served alone, no probe", st)
	}
	if st.Share <= cfg.Start {
		t.Fatalf("second tick, p99 at a third of the target: share %g, want the slow start's doubling from %g", st.Share, cfg.Start)
	}
	for range 40 {
		if st = step(in); st.Probing {
			t.Fatalf("probed at %v while requests served alone kept coming: %+v", at, st)
		}
	}

	// A streamer: one request a tick served alone (the fastest) puts no
	// probe off, and learns nothing.
	c, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	step = stepOf(c)
	trickle := Input{Hist: hist(20*ms, 100), Alone: hist(100*time.Microsecond, 1), Capped: true, Held: true, Contended: true}
	if st = step(trickle); !st.Probing {
		t.Fatalf("a trickle served alone under a streamer: %+v, want the probe at the first loaded tick", st)
	}
	for range 8 {
		step(trickle)
	}
	if b := c.State().Baseline; b != 0 && b < time.Millisecond {
		t.Fatalf("baseline %v learned from a trickle of fast requests (the probe ticks were at 20ms)", b)
	}
}

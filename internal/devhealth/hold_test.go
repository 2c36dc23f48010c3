package devhealth

import (
	"testing"
	"time"
)

// TestHoldHysteresis: the hold engages as soon as the balance falls below
// the threshold, and is released only once the balance is 10 points above
// it and the hold has lasted 30 s; a balance hovering at the threshold
// does not flap; a device without a model, or a zero threshold, is never
// held.
func TestHoldHysteresis(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	type step struct {
		at      time.Duration
		balance float64
		modeled bool
		on      bool
		changed bool
	}
	m := func(at time.Duration, b float64, on, changed bool) step { return step{at, b, true, on, changed} }
	for _, tc := range []struct {
		name  string
		below float64
		steps []step
	}{
		{"engages below, not at", 0.3, []step{
			m(0, 1, false, false), m(time.Second, 0.31, false, false), m(2*time.Second, 0.3, false, false),
			m(3*time.Second, 0.299, true, true), m(4*time.Second, 0.1, true, false)}},
		{"hovering at the threshold does not flap", 0.3, []step{
			m(0, 0.29, true, true), m(time.Second, 0.31, true, false), m(2*time.Second, 0.29, true, false),
			m(40*time.Second, 0.35, true, false), m(41*time.Second, 0.29, true, false)}},
		{"released above threshold+0.1 after 30 s", 0.3, []step{
			m(0, 0.2, true, true), m(10*time.Second, 0.45, true, false), // too soon
			m(30*time.Second, 0.39, true, false), // not high enough
			m(31*time.Second, 0.4, false, true),
			m(32*time.Second, 0.35, false, false), // above the threshold: stays off
			m(33*time.Second, 0.29, true, true)}},
		{"a high threshold is released at a full bucket", 0.95, []step{
			m(0, 0.9, true, true), m(60*time.Second, 0.99, true, false), m(61*time.Second, 1, false, true)}},
		{"off: threshold 0", 0, []step{m(0, 0, false, false), m(time.Second, 0, false, false)}},
		{"no model", 0.5, []step{{0, 0, false, false, false}, {time.Second, 0, false, false, false}}},
		{"model gone while held", 0.5, []step{m(0, 0.1, true, true), {time.Second, 0.1, false, false, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := Hold{Below: tc.below}
			for i, s := range tc.steps {
				on, changed, why := h.Observe(Status{Modeled: s.modeled, Balance: s.balance}, t0.Add(s.at))
				if on != s.on || changed != s.changed {
					t.Fatalf("step %d (balance %.3f at +%s): on %v changed %v (%q), want on %v changed %v",
						i, s.balance, s.at, on, changed, why, s.on, s.changed)
				}
				if changed && why == "" {
					t.Fatalf("step %d: a change without a reason", i)
				}
				if got, since := h.On(); got != on || (changed && !since.Equal(t0.Add(s.at))) {
					t.Fatalf("step %d: On() = %v since %s", i, got, since)
				}
			}
		})
	}
}

// TestHoldOnTrackerNoFlapping runs a Hold on a Tracker's statuses through
// a drain, a long hold at the baseline with the balance flat around the
// threshold, and a refill: it engages once, stays engaged while the balance
// wanders, and is released once on the way back up.
func TestHoldOnTrackerNoFlapping(t *testing.T) {
	t.Parallel()
	model, err := Plain(Bucket{Baseline: 20, Burst: 200, Size: 6000}, Bucket{})
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTracker(model)
	h := Hold{Below: 0.5}
	at := time.Unix(1000, 0)
	changes := 0
	var engagedAt, releasedAt time.Duration
	run := func(secs int, iops func(i int) float64) {
		for i := 0; i < secs; i++ {
			at = at.Add(time.Second)
			r := iops(i)
			st, _ := tr.Observe(Sample{At: at, Secs: 1, IOs: uint64(r), BusyMs: 500, QueueMs: 500})
			on, changed, _ := h.Observe(st, at)
			if changed {
				changes++
				if on {
					engagedAt = at.Sub(time.Unix(1000, 0))
				} else {
					releasedAt = at.Sub(time.Unix(1000, 0))
				}
			}
		}
	}
	run(20, func(int) float64 { return 200 }) // 180 credits/s: below half after 17 s
	if on, _ := h.On(); !on || engagedAt < 16*time.Second || engagedAt > 18*time.Second {
		t.Fatalf("after draining 3600 of 6000 credits: on %v (engaged at %s), want engaged at ~17 s", on, engagedAt)
	}
	// Held: the device does its baseline, give or take a few I/Os.
	run(300, func(i int) float64 { return 20 + float64(i%7-3) })
	// Idle: credit comes back at 20/s; 10 points of the bucket take 30 s.
	run(120, func(int) float64 { return 0 })
	if on, _ := h.On(); on || changes != 2 {
		t.Fatalf("after the refill: on %v with %d changes, want released, 2 changes", on, changes)
	}
	if releasedAt < 330*time.Second || releasedAt > 380*time.Second {
		t.Fatalf("released at %s, want once the balance reached 60%% (~30-60 s into the refill)", releasedAt)
	}
}

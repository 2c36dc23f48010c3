package devhealth

import (
	"fmt"
	"time"
)

// The hold's hysteresis. A held device's worse levels spend at most the
// baseline, so its balance stays where it was caught, or refills once they
// do less: the hold is released only when the balance is holdMargin above
// the threshold and the hold has lasted holdMinOn, so a balance hovering
// at the threshold (the model's estimate moves with every sample) never
// flips the caps on and off.
const (
	holdMargin = 0.1
	holdMinOn  = 30 * time.Second
)

// Hold decides when a device's worse levels are held to its baseline: when
// the modelled burst balance falls below Below (a fraction of the bucket)
// the hold engages, so what credit is left goes to the better levels'
// interactive work; it is released once the balance is back above
// Below + 0.1 (at most a full bucket) and it has lasted 30 s. The zero Hold
// (Below 0) never engages. Pure: statuses and times come in as values.
type Hold struct {
	Below float64

	on    bool
	since time.Time
}

// On reports whether the hold is engaged, and since when.
func (h *Hold) On() (bool, time.Time) { return h.on, h.since }

// Release is the balance at or above which an engaged hold may end.
func (h *Hold) Release() float64 { return min(1, h.Below+holdMargin) }

// Observe folds in the device's status after a sample taken at now and
// returns whether the hold is engaged, whether that changed, and why.
// A device without a model (nothing says what its baseline is) is never
// held.
func (h *Hold) Observe(st Status, now time.Time) (on, changed bool, why string) {
	switch {
	case h.Below <= 0 || !st.Modeled:
		if h.on {
			h.on, h.since = false, now
			return false, true, "no burst model or hold threshold"
		}
	case !h.on && st.Balance < h.Below:
		h.on, h.since = true, now
		return true, true, fmt.Sprintf("burst balance %.0f%% below %.0f%%", 100*st.Balance, 100*h.Below)
	case h.on && st.Balance >= h.Release() && now.Sub(h.since) >= holdMinOn:
		h.on, h.since = false, now
		return false, true, fmt.Sprintf("burst balance back to %.0f%% (release at %.0f%%)", 100*st.Balance, 100*h.Release())
	}
	return h.on, false, ""
}

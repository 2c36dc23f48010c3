package policy

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// maxTransitions is the most one Observe can yield: a first sight (or a
// change of labels) and three drops in the same tick.
const maxTransitions = 4

var (
	// ErrTracked: Restore was given a workload the Engine already tracks.
	ErrTracked = errors.New("workload already tracked")
	// ErrInvalidState: Restore was given a level, pin or exemption that do
	// not go together.
	ErrInvalidState = errors.New("invalid workload state")
)

// Engine holds the level of every workload. It is not safe for concurrent
// use: one goroutine (the daemon loop) owns it.
type Engine struct {
	cfg    Config
	states map[string]*state
}

type state struct {
	id           string
	level        Level // LevelNone iff exempt
	pinned       bool
	exempt       bool
	bytesInLevel uint64
	totalBytes   uint64
	enteredAt    time.Time // zero: not known yet (restored without it)
	// usage is ModeRecent's count: bytes decayed with the time constant
	// Window, as of seenAt (zero: no observation yet, nothing to decay).
	usage     float64
	seenAt    time.Time
	labels    labelCache
	forgotten bool // dropped by Forget: Handles to it are stale
}

// Handle refers to one workload's state in an Engine, so a caller that
// observes the same workload every tick can skip the lookup by ID
// (ObserveHandle, ViewHandle). The zero Handle refers to none.
type Handle struct{ st *state }

// Lookup returns the Handle of workload id, the zero Handle when the
// Engine does not know it.
func (e *Engine) Lookup(id string) Handle {
	return Handle{e.states[id]}
}

// Valid reports whether h refers to a workload the Engine still tracks.
func (h Handle) Valid() bool { return h.st != nil && !h.st.forgotten }

// ObserveHandle is Observe for the workload h refers to. A zero or stale
// Handle (the workload was forgotten) falls back to Observe by id.
func (e *Engine) ObserveHandle(now time.Time, h Handle, id string, deltaBytes uint64, labels map[string]string) Decision {
	if !h.Valid() || h.st.id != id {
		return e.Observe(now, id, deltaBytes, labels)
	}
	return e.observe(now, h.st, true, deltaBytes, labels)
}

// ViewHandle is Get for the workload h refers to; false for a zero or
// stale Handle.
func (e *Engine) ViewHandle(h Handle) (View, bool) {
	if !h.Valid() {
		return View{}, false
	}
	return e.view(h.st), true
}

// New returns an Engine with no workloads, or the validation error of cfg.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Engine{cfg: cfg, states: make(map[string]*state)}, nil
}

// Config returns the configuration in force.
func (e *Engine) Config() Config { return e.cfg }

// Weight returns the weight of level l under the configuration in force, 0
// for LevelNone or an invalid level.
func (e *Engine) Weight(l Level) uint16 { return e.cfg.Weight(l) }

// Len returns the number of workloads tracked.
func (e *Engine) Len() int { return len(e.states) }

// Decision is the outcome of one Observe: where the workload is now, and
// what changed.
type Decision struct {
	Level  Level  // 1..4; LevelNone when Exempt
	Weight uint16 // weight of Level; 0 when Exempt
	Pinned bool   // held at Level by a ddiskqos.level label
	Exempt bool   // the actuator must leave the workload alone / restore it
	// LabelErr is non-nil while a ddiskqos.* label is not applied (a bad
	// value, or a level label next to exempt=true); a *LabelError or a
	// join of them.
	LabelErr error
	// LabelErrNew is true on the observation where LabelErr appears or
	// changes: log it then, not every tick.
	LabelErrNew bool

	n int
	t [maxTransitions]Transition
}

// Transitions returns what changed in this observation, in order, each
// To being the next From. Usually empty.
func (d *Decision) Transitions() []Transition { return d.t[:d.n:d.n] }

func (d *Decision) add(t Transition) {
	if d.n < len(d.t) { // always true: see maxTransitions
		d.t[d.n] = t
		d.n++
	}
}

// Observe accounts deltaBytes (bytes read plus written, all devices, since
// the previous Observe of id; the caller handles counter resets) to the
// workload id at time now, applies its labels, and returns its level.
// A workload not seen before is created at level 1 (or as its labels say).
// Observe never fails: labels that cannot be applied are reported in the
// Decision and ignored.
func (e *Engine) Observe(now time.Time, id string, deltaBytes uint64, labels map[string]string) Decision {
	st, known := e.states[id]
	if !known {
		st = &state{id: id}
		e.states[id] = st
	}
	return e.observe(now, st, known, deltaBytes, labels)
}

func (e *Engine) observe(now time.Time, st *state, known bool, deltaBytes uint64, labels map[string]string) Decision {
	var d Decision
	w, lerr, changed := st.labels.lookup(labels)
	d.LabelErr, d.LabelErrNew = lerr, changed && lerr != nil

	if !known {
		st.enteredAt = now
		switch {
		case w.exempt:
			st.exempt = true
			d.add(st.transition(LevelNone, ReasonExempt, now))
		case w.pin != LevelNone:
			d.add(st.transition(w.pin, ReasonPinned, now))
			st.level, st.pinned = w.pin, true
		default:
			d.add(st.transition(Level1, ReasonNew, now))
			st.level = Level1
		}
		e.charge(now, st, deltaBytes, &d)
	} else {
		if st.enteredAt.IsZero() || now.Before(st.enteredAt) {
			st.enteredAt = now
		}
		e.charge(now, st, deltaBytes, &d)
		applyLabels(now, st, w, &d)
		e.boost(now, st, &d)
	}

	d.Level, d.Pinned, d.Exempt = st.level, st.pinned, st.exempt
	d.Weight = e.cfg.Weight(st.level)
	return d
}

// transition is a Transition from st's current standing to level to.
func (st *state) transition(to Level, r Reason, now time.Time) Transition {
	return Transition{ID: st.id, From: st.level, To: to, Reason: r, BytesInLevel: st.bytesInLevel, At: now}
}

// moveTo puts st at level l with fresh counters.
func (st *state) moveTo(l Level, now time.Time) {
	st.level, st.bytesInLevel, st.enteredAt = l, 0, now
}

// charge counts delta against st's level, dropping it as many levels as
// the delta uses up, the excess of each level spilling into the next.
func (e *Engine) charge(now time.Time, st *state, delta uint64, d *Decision) {
	st.totalBytes = satAdd(st.totalBytes, delta)
	if e.cfg.Mode == ModeRecent {
		e.chargeRecent(now, st, delta, d)
		return
	}
	if st.exempt {
		return
	}
	for {
		used := satAdd(st.bytesInLevel, delta)
		a := e.cfg.Allowances[st.level-1]
		if st.pinned || st.level == Level4 || used < a {
			st.bytesInLevel = used
			return
		}
		// bytesInLevel <= a always holds here (Reconfigure and Restore
		// clamp it), so the level takes exactly a and the rest spills.
		delta = used - a
		st.bytesInLevel = a
		d.add(st.transition(st.level+1, ReasonAllowanceUsed, now))
		st.moveTo(st.level+1, now)
	}
}

// chargeRecent is charge under ModeRecent: st's usage decays for the time
// since its last observation, delta is added, and its level follows: down
// one level for each threshold the usage has reached (the allowances of the
// levels above summed), up one level for each threshold it has fallen
// below half of. The usage is capped at all four allowances summed, so a
// workload that stops is back at level 1 within about 5 Windows.
func (e *Engine) chargeRecent(now time.Time, st *state, delta uint64, d *Decision) {
	if !st.seenAt.IsZero() && now.After(st.seenAt) {
		st.usage *= math.Exp(-float64(now.Sub(st.seenAt)) / float64(e.cfg.Window))
	}
	st.seenAt = now // also when the clock stepped back: decay resumes from now
	st.usage = min(st.usage+float64(delta), e.cfg.threshold(Level4))
	switch {
	case st.exempt:
		return
	case st.pinned:
		st.bytesInLevel = satAdd(st.bytesInLevel, delta)
		return
	}
	for st.level < Level4 && st.usage >= e.cfg.threshold(st.level) {
		st.bytesInLevel = e.cfg.Allowances[st.level-1]
		d.add(st.transition(st.level+1, ReasonAllowanceUsed, now))
		st.moveTo(st.level+1, now)
	}
	for st.level > Level1 && st.usage < e.cfg.threshold(st.level-1)/2 {
		st.bytesInLevel = uint64(max(0, st.usage-e.cfg.threshold(st.level-2)))
		d.add(st.transition(st.level-1, ReasonUsageDecayed, now))
		st.moveTo(st.level-1, now)
	}
	st.bytesInLevel = uint64(max(0, st.usage-e.cfg.threshold(st.level-1)))
}

// applyLabels moves st to the standing its labels ask for.
func applyLabels(now time.Time, st *state, w want, d *Decision) {
	switch {
	case w.exempt:
		if st.exempt {
			return
		}
		d.add(st.transition(LevelNone, ReasonExempt, now))
		st.exempt, st.pinned = true, false
		st.moveTo(LevelNone, now)
	case st.exempt: // exemption removed
		st.exempt = false
		if w.pin != LevelNone {
			d.add(st.transition(w.pin, ReasonPinned, now))
			st.pinned = true
			st.moveTo(w.pin, now)
			return
		}
		d.add(st.transition(Level1, ReasonUnexempt, now))
		st.moveTo(Level1, now)
	case w.pin != LevelNone:
		if st.pinned && st.level == w.pin {
			return
		}
		d.add(st.transition(w.pin, ReasonPinned, now))
		st.pinned = true
		if st.level != w.pin {
			st.moveTo(w.pin, now)
		}
	case st.pinned: // pin removed
		d.add(st.transition(Level1, ReasonUnpinned, now))
		st.pinned = false
		st.moveTo(Level1, now)
	}
}

// boost returns st to level 1 when it has sat at level 4 for BoostAfter.
func (e *Engine) boost(now time.Time, st *state, d *Decision) {
	if e.cfg.Mode != ModePaper || st.exempt || st.pinned || st.level != Level4 || now.Sub(st.enteredAt) < e.cfg.BoostAfter {
		return
	}
	d.add(st.transition(Level1, ReasonBoost, now))
	st.moveTo(Level1, now)
}

// Forget drops the workload id (its container is gone) and reports whether
// it was tracked. Seen again, it is new.
func (e *Engine) Forget(id string) bool {
	st, ok := e.states[id]
	if ok {
		st.forgotten = true
	}
	delete(e.states, id)
	return ok
}

// View is a read-only picture of one workload.
type View struct {
	ID     string `json:"id"`
	Level  Level  `json:"level"` // LevelNone when exempt
	Pinned bool   `json:"pinned,omitempty"`
	Exempt bool   `json:"exempt,omitempty"`
	// BytesInLevel is what the workload has done since it entered Level.
	BytesInLevel uint64 `json:"bytes_in_level"`
	// Allowance is Level's allowance; at level 4, and when pinned, it does
	// not drop the workload. 0 when exempt.
	Allowance uint64 `json:"allowance"`
	// Weight is Level's weight; 0 when exempt.
	Weight uint16 `json:"weight"`
	// EnteredAt is when the workload entered Level (or its exemption).
	EnteredAt time.Time `json:"entered_at"`
	// TotalBytes is everything observed since the workload was first seen.
	TotalBytes uint64 `json:"total_bytes"`
	// Usage is ModeRecent's decayed count of bytes, which sets the level;
	// 0 under ModePaper.
	Usage uint64 `json:"usage,omitempty"`
}

func (e *Engine) view(st *state) View {
	var usage uint64
	if e.cfg.Mode == ModeRecent {
		usage = uint64(st.usage)
	}
	return View{
		ID: st.id, Level: st.level, Pinned: st.pinned, Exempt: st.exempt,
		BytesInLevel: st.bytesInLevel, Allowance: e.cfg.Allowance(st.level),
		Weight: e.cfg.Weight(st.level), EnteredAt: st.enteredAt, TotalBytes: st.totalBytes,
		Usage: usage,
	}
}

// Get returns the view of workload id, and whether it is tracked.
func (e *Engine) Get(id string) (View, bool) {
	st, ok := e.states[id]
	if !ok {
		return View{}, false
	}
	return e.view(st), true
}

// AppendViews appends the views of all workloads to dst, sorted by ID, and
// returns the result: a snapshot the API and the state file can use after
// the loop moved on.
func (e *Engine) AppendViews(dst []View) []View {
	start := len(dst)
	dst = slices.Grow(dst, len(e.states))
	for _, st := range e.states {
		dst = append(dst, e.view(st))
	}
	slices.SortFunc(dst[start:], func(a, b View) int { return strings.Compare(a.ID, b.ID) })
	return dst
}

// Totals counts the workloads.
type Totals struct {
	Workloads int            `json:"workloads"`
	PerLevel  [NumLevels]int `json:"per_level"` // index i: level i+1, pinned included
	Pinned    int            `json:"pinned"`
	Exempt    int            `json:"exempt"`
	Bytes     uint64         `json:"bytes"` // sum of TotalBytes, saturating
}

// Totals counts the workloads per level and standing; it walks them all.
func (e *Engine) Totals() Totals {
	t := Totals{Workloads: len(e.states)}
	for _, st := range e.states {
		t.Bytes = satAdd(t.Bytes, st.totalBytes)
		switch {
		case st.exempt:
			t.Exempt++
			continue
		case st.pinned:
			t.Pinned++
		}
		t.PerLevel[st.level-1]++
	}
	return t
}

// Restore adopts a workload from a saved View (the daemon's state file,
// written from AppendViews), so that a restart does not send every workload
// back to level 1. It uses ID, Level, Pinned, Exempt, BytesInLevel,
// EnteredAt and TotalBytes; Allowance and Weight are ignored. Bytes above
// the allowance of levels 1-3 are clamped to it (the workload drops at its
// next observation). A zero EnteredAt is set at the next observation. The
// labels seen at the next observation win over Pinned and Exempt; when they
// agree, that observation yields no transition.
func (e *Engine) Restore(v View) error {
	if _, ok := e.states[v.ID]; ok {
		return fmt.Errorf("restore %q: %w", v.ID, ErrTracked)
	}
	switch {
	case v.Exempt && v.Level != LevelNone:
		return fmt.Errorf("restore %q: exempt at level %v: %w", v.ID, v.Level, ErrInvalidState)
	case v.Exempt && v.Pinned:
		return fmt.Errorf("restore %q: both exempt and pinned: %w", v.ID, ErrInvalidState)
	case !v.Exempt && !v.Level.Valid():
		return fmt.Errorf("restore %q: level %v, want 1..4: %w", v.ID, v.Level, ErrInvalidState)
	}
	st := &state{
		id: v.ID, level: v.Level, pinned: v.Pinned, exempt: v.Exempt,
		bytesInLevel: v.BytesInLevel, totalBytes: v.TotalBytes, enteredAt: v.EnteredAt,
	}
	if v.Exempt {
		st.bytesInLevel = 0
	}
	st.usage = float64(v.Usage)
	if v.Usage == 0 && !v.Exempt {
		st.usage = e.cfg.threshold(v.Level-1) + float64(v.BytesInLevel) // a paper run's file
	}
	e.clamp(st)
	e.states[v.ID] = st
	return nil
}

// Reconfigure puts cfg in force (the daemon's SIGHUP reload) or, when it is
// invalid, returns its validation error and keeps the old one. Workloads
// keep their levels, pins and exemptions; bytes counted at levels 1-3 are
// clamped to the new allowance, so a workload that has already done more
// drops at its next observation. A shorter BoostAfter boosts at the next
// observation the level-4 workloads past it.
func (e *Engine) Reconfigure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	toRecent := cfg.Mode == ModeRecent && e.cfg.Mode != ModeRecent
	e.cfg = cfg
	for _, st := range e.states {
		if toRecent && !st.exempt {
			// The paper's count of the level becomes the usage, as if
			// done now: the level is kept until it decays.
			st.usage, st.seenAt = cfg.threshold(st.level-1)+float64(st.bytesInLevel), time.Time{}
		}
		e.clamp(st)
	}
	return nil
}

// clamp keeps the bytes of an unpinned workload at levels 1-3 within its
// level's allowance, the invariant charge relies on.
func (e *Engine) clamp(st *state) {
	if st.exempt || st.pinned || st.level == Level4 {
		return
	}
	st.bytesInLevel = min(st.bytesInLevel, e.cfg.Allowances[st.level-1])
}

// satAdd is a+b, or the largest uint64 when that overflows.
func satAdd(a, b uint64) uint64 {
	if b > math.MaxUint64-a {
		return math.MaxUint64
	}
	return a + b
}

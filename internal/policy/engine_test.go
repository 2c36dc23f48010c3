package policy

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// t0 is the fake clock's start; steps give times as offsets from it.
var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

const boost = DefaultBoostAfter

// step is one Observe of a scenario and what it must give.
type step struct {
	name    string
	at      time.Duration // since t0
	delta   uint64
	labels  map[string]string
	level   Level
	bytes   uint64 // BytesInLevel afterwards
	reasons []Reason
	pinned  bool
	exempt  bool
	// labelErr is a substring of Decision.LabelErr, "" for none.
	labelErr    string
	labelErrNew bool
}

func newEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

// run walks steps in order on workload id, each as a sub-test.
func run(t *testing.T, e *Engine, id string, steps []step) {
	t.Helper()
	for i, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			now := t0.Add(s.at)
			d := e.Observe(now, id, s.delta, s.labels)
			checkDecision(t, e, id, now, d)
			if d.Level != s.level || d.Pinned != s.pinned || d.Exempt != s.exempt {
				t.Errorf("level %v pinned %v exempt %v, want %v %v %v",
					d.Level, d.Pinned, d.Exempt, s.level, s.pinned, s.exempt)
			}
			var reasons []Reason
			for _, tr := range d.Transitions() {
				reasons = append(reasons, tr.Reason)
			}
			if !slices.Equal(reasons, s.reasons) {
				t.Errorf("reasons %v, want %v", reasons, s.reasons)
			}
			if v, _ := e.Get(id); v.BytesInLevel != s.bytes {
				t.Errorf("BytesInLevel %d (%.2f MiB), want %d (%.2f MiB)",
					v.BytesInLevel, float64(v.BytesInLevel)/MiB, s.bytes, float64(s.bytes)/MiB)
			}
			switch {
			case s.labelErr == "" && d.LabelErr != nil:
				t.Errorf("LabelErr = %v, want nil", d.LabelErr)
			case s.labelErr != "" && (d.LabelErr == nil || !strings.Contains(d.LabelErr.Error(), s.labelErr)):
				t.Errorf("LabelErr = %v, want it to contain %q", d.LabelErr, s.labelErr)
			}
			if d.LabelErrNew != s.labelErrNew {
				t.Errorf("LabelErrNew = %v, want %v", d.LabelErrNew, s.labelErrNew)
			}
		})
		if !ok {
			t.Fatalf("step %d %q failed; later steps depend on it", i, s.name)
		}
	}
}

// checkDecision checks what must hold after every Observe.
func checkDecision(t testing.TB, e *Engine, id string, now time.Time, d Decision) {
	t.Helper()
	if d.Exempt != (d.Level == LevelNone) || (!d.Exempt && !d.Level.Valid()) {
		t.Fatalf("level %v with exempt %v", d.Level, d.Exempt)
	}
	if d.Exempt && d.Pinned {
		t.Fatalf("both exempt and pinned")
	}
	if d.Weight != e.Weight(d.Level) {
		t.Fatalf("weight %d, want %d", d.Weight, e.Weight(d.Level))
	}
	trs := d.Transitions()
	if len(trs) > maxTransitions {
		t.Fatalf("%d transitions", len(trs))
	}
	for i, tr := range trs {
		if tr.ID != id || !tr.At.Equal(now) {
			t.Fatalf("transition %d %+v: wrong id or time", i, tr)
		}
		if i > 0 && tr.From != trs[i-1].To {
			t.Fatalf("transition %d from %v, previous to %v", i, tr.From, trs[i-1].To)
		}
	}
	if len(trs) > 0 && trs[len(trs)-1].To != d.Level {
		t.Fatalf("last transition to %v, decision level %v", trs[len(trs)-1].To, d.Level)
	}
	v, ok := e.Get(id)
	if !ok || v.Level != d.Level || v.Pinned != d.Pinned || v.Exempt != d.Exempt || v.Weight != d.Weight {
		t.Fatalf("view %+v disagrees with decision %+v", v, d)
	}
	if !d.Pinned && d.Level.Valid() && d.Level < Level4 && v.BytesInLevel >= v.Allowance {
		t.Fatalf("level %v holds %d bytes, allowance %d", d.Level, v.BytesInLevel, v.Allowance)
	}
}

func TestPaperWalk(t *testing.T) {
	t.Parallel()
	e := newEngine(t, DefaultConfig())
	run(t, e, "web", []step{
		{name: "new at level 1", level: Level1, reasons: []Reason{ReasonNew}},
		{name: "3 MiB drops to 2", at: time.Second, delta: 3 * MiB, level: Level2, bytes: 1 * MiB,
			reasons: []Reason{ReasonAllowanceUsed}},
		{name: "10 MiB in all drops to 3", at: 2 * time.Second, delta: 7 * MiB, level: Level3, bytes: 0,
			reasons: []Reason{ReasonAllowanceUsed}},
		{name: "31 MiB at 3 stays", at: 3 * time.Second, delta: 31 * MiB, level: Level3, bytes: 31 * MiB},
		{name: "42 MiB in all drops to 4", at: 4 * time.Second, delta: 1 * MiB, level: Level4,
			reasons: []Reason{ReasonAllowanceUsed}},
		{name: "floor: 500 MiB more stays at 4", at: 10 * time.Second, delta: 500 * MiB, level: Level4, bytes: 500 * MiB},
		{name: "not boosted just before BoostAfter", at: 4*time.Second + boost - 1, level: Level4, bytes: 500 * MiB},
		{name: "boosted at BoostAfter", at: 4*time.Second + boost, delta: 1 * MiB, level: Level1,
			reasons: []Reason{ReasonBoost}},
		{name: "after the boost bytes count at 1", at: 5*time.Second + boost, delta: 1 * MiB, level: Level1, bytes: 1 * MiB},
	})
}

func TestOneTickToFloor(t *testing.T) {
	t.Parallel()
	e := newEngine(t, DefaultConfig())
	d := e.Observe(t0, "bulk", 300*MiB, nil)
	checkDecision(t, e, "bulk", t0, d)
	want := []Transition{
		{ID: "bulk", From: LevelNone, To: Level1, Reason: ReasonNew, At: t0},
		{ID: "bulk", From: Level1, To: Level2, Reason: ReasonAllowanceUsed, BytesInLevel: 2 * MiB, At: t0},
		{ID: "bulk", From: Level2, To: Level3, Reason: ReasonAllowanceUsed, BytesInLevel: 8 * MiB, At: t0},
		{ID: "bulk", From: Level3, To: Level4, Reason: ReasonAllowanceUsed, BytesInLevel: 32 * MiB, At: t0},
	}
	if got := d.Transitions(); !reflect.DeepEqual(got, want) {
		t.Errorf("transitions\n got %+v\nwant %+v", got, want)
	}
	v, _ := e.Get("bulk")
	want4 := View{ID: "bulk", Level: Level4, BytesInLevel: 258 * MiB, Allowance: 128 * MiB, Weight: 100,
		EnteredAt: t0, TotalBytes: 300 * MiB}
	if v != want4 {
		t.Errorf("view %+v, want %+v", v, want4)
	}
	// Exactly used up drops, with nothing spilled.
	d = e.Observe(t0, "exact", 2*MiB, nil)
	if v, _ := e.Get("exact"); d.Level != Level2 || v.BytesInLevel != 0 {
		t.Errorf("exactly 2 MiB: level %v bytes %d, want 2 and 0", d.Level, v.BytesInLevel)
	}
}

func TestBoostCountsFromEnteringLevel4(t *testing.T) {
	t.Parallel()
	e := newEngine(t, DefaultConfig())
	h := time.Hour
	run(t, e, "db", []step{
		{name: "new", level: Level1, reasons: []Reason{ReasonNew}},
		{name: "an hour at level 1", at: h, delta: 1 * MiB, level: Level1, bytes: 1 * MiB},
		{name: "burst to 4", at: h + time.Second, delta: 41 * MiB, level: Level4,
			reasons: []Reason{ReasonAllowanceUsed, ReasonAllowanceUsed, ReasonAllowanceUsed}},
		{name: "no boost 1s before", at: h + boost, level: Level4},
		{name: "boost", at: h + time.Second + boost, level: Level1, reasons: []Reason{ReasonBoost}},
		// The boost restarts the cycle: 42 MiB take it back to 4 and the
		// clock starts again there.
		{name: "back to 4", at: h + 2*time.Second + boost, delta: 42 * MiB, level: Level4,
			reasons: []Reason{ReasonAllowanceUsed, ReasonAllowanceUsed, ReasonAllowanceUsed}},
		{name: "no second boost before another BoostAfter", at: h + time.Second + 2*boost, level: Level4},
		{name: "second boost", at: h + 2*time.Second + 2*boost, level: Level1, reasons: []Reason{ReasonBoost}},
	})
}

func TestPinUnpin(t *testing.T) {
	t.Parallel()
	pin := func(l string) map[string]string { return map[string]string{LabelLevel: l, "other": "x"} }
	e := newEngine(t, DefaultConfig())
	run(t, e, "batch", []step{
		{name: "new pinned at 3", labels: pin("3"), level: Level3, pinned: true, reasons: []Reason{ReasonPinned}},
		{name: "pinned does not drop", at: time.Second, delta: 1 << 30, labels: pin("3"), level: Level3, pinned: true, bytes: 1 << 30},
		{name: "repin at 1", at: 2 * time.Second, labels: pin("1"), level: Level1, pinned: true, reasons: []Reason{ReasonPinned}},
		{name: "repin at 4", at: 3 * time.Second, delta: 5 * MiB, labels: pin("4"), level: Level4, pinned: true,
			reasons: []Reason{ReasonPinned}},
		{name: "pinned at 4 is not boosted", at: time.Hour, labels: pin("4"), level: Level4, pinned: true},
		// The delta was done while pinned: it does not drop the workload
		// once the pin is gone.
		{name: "unpin starts at 1", at: time.Hour + time.Second, delta: 100 * MiB, level: Level1,
			reasons: []Reason{ReasonUnpinned}},
		{name: "managed again", at: time.Hour + 2*time.Second, delta: 3 * MiB, level: Level2, bytes: 1 * MiB,
			reasons: []Reason{ReasonAllowanceUsed}},
		{name: "pin at current level keeps bytes", at: time.Hour + 3*time.Second, delta: 1 * MiB, labels: pin("2"),
			level: Level2, pinned: true, bytes: 2 * MiB, reasons: []Reason{ReasonPinned}},
		{name: "bad value unpins", at: time.Hour + 4*time.Second, labels: pin("9"), level: Level1,
			reasons: []Reason{ReasonUnpinned}, labelErr: `ddiskqos.level="9"`, labelErrNew: true},
	})

	// The transitions of a pin carry From and the bytes done there.
	e = newEngine(t, DefaultConfig())
	e.Observe(t0, "w", 5*MiB, nil)
	d := e.Observe(t0.Add(time.Second), "w", 0, pin("4"))
	want := Transition{ID: "w", From: Level2, To: Level4, Reason: ReasonPinned, BytesInLevel: 3 * MiB, At: t0.Add(time.Second)}
	if got := d.Transitions(); len(got) != 1 || got[0] != want {
		t.Errorf("transitions %+v, want [%+v]", got, want)
	}
}

func TestExempt(t *testing.T) {
	t.Parallel()
	ex := map[string]string{LabelExempt: "true"}
	e := newEngine(t, DefaultConfig())
	run(t, e, "infra", []step{
		{name: "new exempt", labels: ex, exempt: true, reasons: []Reason{ReasonExempt}},
		{name: "exempt is left alone", at: time.Hour, delta: 1 << 30, labels: ex, exempt: true},
		{name: "exempt=false starts at 1", at: 2 * time.Hour, labels: map[string]string{LabelExempt: "false"},
			level: Level1, reasons: []Reason{ReasonUnexempt}},
		{name: "drops", at: 2*time.Hour + time.Second, delta: 5 * MiB, level: Level2, bytes: 3 * MiB,
			reasons: []Reason{ReasonAllowanceUsed}},
		{name: "exempt again", at: 3 * time.Hour, labels: map[string]string{LabelExempt: "1"}, exempt: true,
			reasons: []Reason{ReasonExempt}},
		{name: "exempt wins over a pin", at: 4 * time.Hour, labels: map[string]string{LabelExempt: "TRUE", LabelLevel: "2"},
			exempt: true, labelErr: "takes precedence", labelErrNew: true},
		{name: "unexempt to a pin", at: 5 * time.Hour, labels: map[string]string{LabelLevel: "2"},
			level: Level2, pinned: true, reasons: []Reason{ReasonPinned}},
		{name: "exempt from a pin", at: 6 * time.Hour, labels: ex, exempt: true, reasons: []Reason{ReasonExempt}},
	})
	if tot := e.Totals(); tot.Exempt != 1 || tot.Workloads != 1 || tot.PerLevel != [4]int{} {
		t.Errorf("totals %+v", tot)
	}
}

func TestBadLabels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		labels map[string]string
		level  Level
		pinned bool
		exempt bool
		errs   []string // substrings, one per error
	}{
		{"none", nil, Level1, false, false, nil},
		{"unrelated", map[string]string{"ddiskqos.levels": "2"}, Level1, false, false, nil},
		{"level 1", map[string]string{LabelLevel: "1"}, Level1, true, false, nil},
		{"level 4", map[string]string{LabelLevel: "4"}, Level4, true, false, nil},
		{"level 0", map[string]string{LabelLevel: "0"}, Level1, false, false, []string{`ddiskqos.level="0" not applied: want "1", "2", "3" or "4"`}},
		{"level 5", map[string]string{LabelLevel: "5"}, Level1, false, false, []string{`"5"`}},
		{"level 01", map[string]string{LabelLevel: "01"}, Level1, false, false, []string{`"01"`}},
		{"level space", map[string]string{LabelLevel: " 2"}, Level1, false, false, []string{`" 2"`}},
		{"level word", map[string]string{LabelLevel: "two"}, Level1, false, false, []string{`"two"`}},
		{"level empty", map[string]string{LabelLevel: ""}, Level1, false, false, []string{`ddiskqos.level=""`}},
		{"exempt yes", map[string]string{LabelExempt: "yes"}, Level1, false, false, []string{`ddiskqos.exempt="yes" not applied: want "true" or "false"`}},
		{"exempt bare", map[string]string{LabelExempt: ""}, Level1, false, false, []string{`ddiskqos.exempt=""`}},
		{"exempt t", map[string]string{LabelExempt: "t"}, LevelNone, false, true, nil},
		{"exempt false and pin", map[string]string{LabelExempt: "false", LabelLevel: "3"}, Level3, true, false, nil},
		{"both bad", map[string]string{LabelExempt: "maybe", LabelLevel: "9"}, Level1, false, false,
			[]string{`ddiskqos.exempt="maybe"`, `ddiskqos.level="9"`}},
		{"bad exempt, good pin", map[string]string{LabelExempt: "maybe", LabelLevel: "2"}, Level2, true, false,
			[]string{`ddiskqos.exempt="maybe"`}},
		{"conflict", map[string]string{LabelExempt: "true", LabelLevel: "2"}, LevelNone, false, true,
			[]string{`ddiskqos.level="2" not applied: ddiskqos.exempt is true and takes precedence`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, DefaultConfig())
			d := e.Observe(t0, "w", 0, tt.labels)
			checkDecision(t, e, "w", t0, d)
			if d.Level != tt.level || d.Pinned != tt.pinned || d.Exempt != tt.exempt {
				t.Errorf("level %v pinned %v exempt %v, want %v %v %v", d.Level, d.Pinned, d.Exempt, tt.level, tt.pinned, tt.exempt)
			}
			if (d.LabelErr != nil) != (len(tt.errs) > 0) || d.LabelErrNew != (len(tt.errs) > 0) {
				t.Fatalf("LabelErr %v new %v, want %q", d.LabelErr, d.LabelErrNew, tt.errs)
			}
			if d.LabelErr == nil {
				return
			}
			errs := []error{d.LabelErr}
			if j, ok := d.LabelErr.(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap()
			}
			if len(errs) != len(tt.errs) {
				t.Fatalf("errors %v, want %d", errs, len(tt.errs))
			}
			for i, err := range errs {
				var le *LabelError
				if !errors.As(err, &le) || !strings.Contains(err.Error(), tt.errs[i]) {
					t.Errorf("error %d %q: want a *LabelError containing %q", i, err, tt.errs[i])
				}
			}
		})
	}
}

func TestLabelErrReportedOnce(t *testing.T) {
	t.Parallel()
	bad := func(v string) map[string]string { return map[string]string{LabelLevel: v} }
	e := newEngine(t, DefaultConfig())
	run(t, e, "w", []step{
		{name: "first sight", labels: bad("x"), level: Level1, reasons: []Reason{ReasonNew}, labelErr: `"x"`, labelErrNew: true},
		{name: "same again", at: 1, labels: bad("x"), level: Level1, labelErr: `"x"`},
		{name: "a copy of the map", at: 2, labels: map[string]string{LabelLevel: "x", "a": "b"}, level: Level1, labelErr: `"x"`},
		{name: "another bad value", at: 3, labels: bad("y"), level: Level1, labelErr: `"y"`, labelErrNew: true},
		{name: "fixed", at: 4, labels: bad("1"), level: Level1, pinned: true, reasons: []Reason{ReasonPinned}},
		{name: "bad again", at: 5, labels: bad("y"), level: Level1, reasons: []Reason{ReasonUnpinned}, labelErr: `"y"`, labelErrNew: true},
		{name: "removed", at: 6, level: Level1},
	})
}

func TestReconfigure(t *testing.T) {
	t.Parallel()
	e := newEngine(t, DefaultConfig())
	e.Observe(t0, "l1", 1*MiB+512<<10, nil)                            // 1.5 MiB at 1
	e.Observe(t0, "l2", 2*MiB+4*MiB, nil)                              // 4 MiB at 2
	e.Observe(t0, "l4", 200*MiB, nil)                                  // at 4 since t0
	e.Observe(t0, "pin", 5*MiB, map[string]string{LabelLevel: "1"})    // pinned, 5 MiB at 1
	e.Observe(t0, "ex", 5*MiB, map[string]string{LabelExempt: "true"}) // exempt
	bad := DefaultConfig()
	bad.Weights[0] = 1
	if err := e.Reconfigure(bad); err == nil || !strings.Contains(err.Error(), "Weights[0]=1") {
		t.Fatalf("Reconfigure(bad) = %v", err)
	}
	if e.Config() != DefaultConfig() {
		t.Fatal("a rejected config was applied")
	}

	cfg := DefaultConfig()
	cfg.Allowances[0] = 1 * MiB // l1 already did 1.5 MiB
	cfg.Weights = [4]uint16{800, 400, 200, 50}
	cfg.BoostAfter = 10 * time.Second
	if err := e.Reconfigure(cfg); err != nil {
		t.Fatalf("Reconfigure: %v", err)
	}
	// Levels are kept until the next observation.
	for id, l := range map[string]Level{"l1": Level1, "l2": Level2, "l4": Level4, "pin": Level1, "ex": LevelNone} {
		if v, _ := e.Get(id); v.Level != l || v.Weight != cfg.Weight(l) {
			t.Errorf("%s after Reconfigure: %+v, want level %v", id, v, l)
		}
	}
	if v, _ := e.Get("l1"); v.BytesInLevel != 1*MiB {
		t.Errorf("l1 bytes %d, want clamped to 1 MiB", v.BytesInLevel)
	}
	now := t0.Add(10 * time.Second)
	tests := []struct {
		id      string
		labels  map[string]string
		level   Level
		reasons []Reason
	}{
		{"l1", nil, Level2, []Reason{ReasonAllowanceUsed}},
		{"l2", nil, Level2, nil},
		{"l4", nil, Level1, []Reason{ReasonBoost}},
		{"pin", map[string]string{LabelLevel: "1"}, Level1, nil},
		{"ex", map[string]string{LabelExempt: "true"}, LevelNone, nil},
	}
	for _, tt := range tests {
		d := e.Observe(now, tt.id, 0, tt.labels)
		checkDecision(t, e, tt.id, now, d)
		var reasons []Reason
		for _, tr := range d.Transitions() {
			reasons = append(reasons, tr.Reason)
		}
		if d.Level != tt.level || !slices.Equal(reasons, tt.reasons) || d.Weight != cfg.Weight(tt.level) {
			t.Errorf("%s: level %v weight %d reasons %v, want %v %d %v", tt.id, d.Level, d.Weight, reasons,
				tt.level, cfg.Weight(tt.level), tt.reasons)
		}
	}
	if d := e.Observe(now, "l1", 0, nil); len(d.Transitions()) != 0 {
		t.Errorf("clamped workload dropped twice: %+v", d.Transitions())
	}
}

func TestRestore(t *testing.T) {
	t.Parallel()
	old := newEngine(t, DefaultConfig())
	labels := map[string]map[string]string{
		"a": nil, "b": nil, "c": nil,
		"p": {LabelLevel: "3"}, "x": {LabelExempt: "true"},
	}
	old.Observe(t0, "a", 1*MiB, labels["a"])
	old.Observe(t0, "b", 20*MiB, labels["b"])
	old.Observe(t0, "c", 100*MiB, labels["c"])
	old.Observe(t0, "p", 7, labels["p"])
	old.Observe(t0, "x", 7, labels["x"])
	saved := old.AppendViews(nil)
	if ids := []string{saved[0].ID, saved[1].ID, saved[2].ID, saved[3].ID, saved[4].ID}; !slices.Equal(ids, []string{"a", "b", "c", "p", "x"}) {
		t.Fatalf("AppendViews not sorted: %v", ids)
	}

	e := newEngine(t, DefaultConfig())
	for _, v := range saved {
		if err := e.Restore(v); err != nil {
			t.Fatalf("Restore(%+v): %v", v, err)
		}
	}
	if got := e.AppendViews(nil); !reflect.DeepEqual(got, saved) {
		t.Errorf("restored\n%+v\nwant\n%+v", got, saved)
	}
	// Same labels: no transitions; the boost clock runs from the saved time.
	now := t0.Add(time.Second)
	for _, v := range saved {
		d := e.Observe(now, v.ID, 0, labels[v.ID])
		checkDecision(t, e, v.ID, now, d)
		if len(d.Transitions()) != 0 {
			t.Errorf("%s: transitions after restore: %+v", v.ID, d.Transitions())
		}
	}
	if d := e.Observe(t0.Add(boost), "c", 0, nil); d.Level != Level1 {
		t.Errorf("restored level-4 workload not boosted BoostAfter after its saved entry: %v", d.Level)
	}
	// Labels changed while the daemon was down win.
	if d := e.Observe(now, "p", 0, nil); d.Level != Level1 || d.Transitions()[0].Reason != ReasonUnpinned {
		t.Errorf("pin removed while down: %+v", d)
	}

	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			name string
			v    View
			want error
		}{
			{"tracked", View{ID: "a", Level: Level1}, ErrTracked},
			{"level 0", View{ID: "n", Level: LevelNone}, ErrInvalidState},
			{"level 5", View{ID: "n", Level: 5}, ErrInvalidState},
			{"exempt with level", View{ID: "n", Level: Level2, Exempt: true}, ErrInvalidState},
			{"exempt and pinned", View{ID: "n", Exempt: true, Pinned: true}, ErrInvalidState},
		}
		for _, tt := range tests {
			if err := e.Restore(tt.v); !errors.Is(err, tt.want) {
				t.Errorf("%s: Restore = %v, want %v", tt.name, err, tt.want)
			}
		}
		if _, ok := e.Get("n"); ok {
			t.Error("a rejected Restore added a workload")
		}
	})

	t.Run("clamped and undated", func(t *testing.T) {
		e := newEngine(t, DefaultConfig())
		if err := e.Restore(View{ID: "big", Level: Level2, BytesInLevel: 1 << 40}); err != nil {
			t.Fatal(err)
		}
		if v, _ := e.Get("big"); v.BytesInLevel != 8*MiB {
			t.Errorf("bytes %d, want clamped to 8 MiB", v.BytesInLevel)
		}
		d := e.Observe(t0, "big", 0, nil)
		if d.Level != Level3 || len(d.Transitions()) != 1 {
			t.Errorf("%+v, want one drop to 3", d)
		}
		if err := e.Restore(View{ID: "old4", Level: Level4}); err != nil {
			t.Fatal(err)
		}
		if d := e.Observe(t0, "old4", 0, nil); d.Level != Level4 {
			t.Errorf("zero EnteredAt boosted at once: %v", d.Level)
		}
		if d := e.Observe(t0.Add(boost), "old4", 0, nil); d.Level != Level1 {
			t.Errorf("not boosted BoostAfter after its first observation: %v", d.Level)
		}
	})
}

func TestForget(t *testing.T) {
	t.Parallel()
	e := newEngine(t, DefaultConfig())
	e.Observe(t0, "w", 100*MiB, nil)
	if !e.Forget("w") || e.Forget("w") || e.Len() != 0 {
		t.Fatal("Forget did not forget once")
	}
	if _, ok := e.Get("w"); ok {
		t.Fatal("Get after Forget")
	}
	d := e.Observe(t0.Add(time.Second), "w", 0, nil)
	if d.Level != Level1 || len(d.Transitions()) != 1 || d.Transitions()[0].Reason != ReasonNew {
		t.Errorf("after Forget: %+v, want new at 1", d)
	}
}

func TestClockSteppedBack(t *testing.T) {
	t.Parallel()
	e := newEngine(t, DefaultConfig())
	run(t, e, "w", []step{
		{name: "to 4", at: time.Hour, delta: 42 * MiB, level: Level4,
			reasons: []Reason{ReasonNew, ReasonAllowanceUsed, ReasonAllowanceUsed, ReasonAllowanceUsed}},
		{name: "clock back a day", at: -24 * time.Hour, level: Level4},
		{name: "boost counts from the step", at: -24*time.Hour + boost, level: Level1, reasons: []Reason{ReasonBoost}},
	})
}

func TestSaturation(t *testing.T) {
	t.Parallel()
	e := newEngine(t, DefaultConfig())
	d := e.Observe(t0, "w", math.MaxUint64, nil)
	d2 := e.Observe(t0, "w", math.MaxUint64, nil)
	v, _ := e.Get("w")
	if d.Level != Level4 || d2.Level != Level4 || v.BytesInLevel != math.MaxUint64 || v.TotalBytes != math.MaxUint64 {
		t.Errorf("huge deltas: %+v", v)
	}
	e.Observe(t0, "v", math.MaxUint64, nil)
	if tot := e.Totals(); tot.Bytes != math.MaxUint64 || tot.PerLevel[3] != 2 {
		t.Errorf("totals %+v", tot)
	}
}

// The level reached does not depend on how the bytes are cut into ticks.
func TestTickIndependence(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for _, total := range []uint64{0, 1, 2*MiB - 1, 2 * MiB, 10 * MiB, 41*MiB + 7, 42 * MiB, 300 * MiB} {
		one := newEngine(t, DefaultConfig())
		one.Observe(t0, "w", total, nil)
		want, _ := one.Get("w")
		for range 20 {
			e := newEngine(t, DefaultConfig())
			left := total
			e.Observe(t0, "w", 0, nil)
			for left > 0 {
				d := min(left, 1+r.Uint64N(5*MiB))
				e.Observe(t0, "w", d, nil)
				left -= d
			}
			if got, _ := e.Get("w"); got != want {
				t.Fatalf("total %d in ticks: %+v, in one: %+v", total, got, want)
			}
		}
	}
}

func TestViewsAndTotals(t *testing.T) {
	t.Parallel()
	e := newEngine(t, DefaultConfig())
	e.Observe(t0, "c", 0, nil)
	e.Observe(t0, "a", 3*MiB, nil)
	e.Observe(t0, "b", 0, map[string]string{LabelLevel: "2"})
	e.Observe(t0, "d", 1, map[string]string{LabelExempt: "true"})
	vs := e.AppendViews([]View{{ID: "keep"}})
	var ids []string
	for _, v := range vs {
		ids = append(ids, v.ID)
	}
	if !slices.Equal(ids, []string{"keep", "a", "b", "c", "d"}) {
		t.Errorf("ids %v", ids)
	}
	want := Totals{Workloads: 4, PerLevel: [4]int{1, 2, 0, 0}, Pinned: 1, Exempt: 1, Bytes: 3*MiB + 1}
	if got := e.Totals(); got != want {
		t.Errorf("Totals %+v, want %+v", got, want)
	}
	if v := vs[4]; v.Level != LevelNone || v.Allowance != 0 || v.Weight != 0 || !v.Exempt {
		t.Errorf("exempt view %+v", v)
	}
	if v := vs[1]; v.Allowance != 8*MiB || v.Weight != 500 || v.BytesInLevel != 1*MiB || !v.EnteredAt.Equal(t0) {
		t.Errorf("view %+v", v)
	}
}

func TestStrings(t *testing.T) {
	t.Parallel()
	for l, want := range map[Level]string{LevelNone: "none", Level1: "1", Level4: "4", 7: "invalid(7)"} {
		if l.String() != want {
			t.Errorf("Level(%d) = %q, want %q", uint8(l), l, want)
		}
	}
	for r, want := range map[Reason]string{ReasonNew: "new", ReasonAllowanceUsed: "allowance-used", ReasonBoost: "boost",
		ReasonPinned: "pinned", ReasonUnpinned: "unpinned", ReasonExempt: "exempt", ReasonUnexempt: "unexempt",
		0: "reason(0)", 99: "reason(99)"} {
		b, _ := r.MarshalText()
		if r.String() != want || string(b) != want {
			t.Errorf("Reason(%d) = %q, want %q", uint8(r), r, want)
		}
	}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	e := newEngine(t, DefaultConfig())
	labels := map[string]string{"com.docker.compose.service": "db", LabelLevel: "x"}
	now := t0
	e.Observe(now, "w", 0, labels)
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Second)
		d := e.Observe(now, "w", 1*MiB, labels)
		for range d.Transitions() {
		}
	})
	if allocs != 0 {
		t.Errorf("Observe allocates %v times in the steady state", allocs)
	}
}

// TestHandleMatchesID: observing through a Handle is observing by ID, and
// a Handle of a forgotten workload is stale (it falls back to the ID,
// which makes the workload new again).
func TestHandleMatchesID(t *testing.T) {
	t.Parallel()
	byID, byHandle := newEngine(t, DefaultConfig()), newEngine(t, DefaultConfig())
	t0 := time.Unix(1000, 0)
	if h := byHandle.Lookup("w"); h.Valid() {
		t.Fatal("handle of an unknown workload is valid")
	}
	var h Handle
	for i, delta := range []uint64{0, 3 * MiB, 7 * MiB, 40 * MiB, 0, 1} {
		now := t0.Add(time.Duration(i) * time.Second)
		want := byID.Observe(now, "w", delta, nil)
		got := byHandle.ObserveHandle(now, h, "w", delta, nil)
		if !h.Valid() {
			h = byHandle.Lookup("w")
		}
		if got.Level != want.Level || got.Weight != want.Weight || len(got.Transitions()) != len(want.Transitions()) {
			t.Fatalf("step %d: handle %+v, id %+v", i, got, want)
		}
		gv, _ := byHandle.ViewHandle(h)
		wv, _ := byID.Get("w")
		if gv != wv {
			t.Fatalf("step %d: view by handle %+v, by id %+v", i, gv, wv)
		}
	}
	byHandle.Forget("w")
	if h.Valid() {
		t.Fatal("handle still valid after Forget")
	}
	if _, ok := byHandle.ViewHandle(h); ok {
		t.Fatal("view of a forgotten workload")
	}
	d := byHandle.ObserveHandle(t0.Add(time.Hour), h, "w", 0, nil)
	if tr := d.Transitions(); d.Level != Level1 || len(tr) != 1 || tr[0].Reason != ReasonNew {
		t.Fatalf("stale handle: %+v, want the workload new at level 1", d)
	}
}

package throttle

import (
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// TestOneFile: on v1 a cap in force changes one limit file a write, the
// reads' first; a new cap and a lift go at once.
func TestOneFile(t *testing.T) {
	l := func(rb, wb, rio, wio uint64) cgroupfs.Limits {
		return cgroupfs.Limits{RBps: rb, WBps: wb, RIOps: rio, WIOps: wio}
	}
	for _, c := range []struct {
		name            string
		cur, want, next cgroupfs.Limits
	}{
		{"raise: read bytes first", l(100, 100, 10, 10), l(200, 200, 20, 20), l(200, 100, 10, 10)},
		{"then read requests", l(200, 100, 10, 10), l(200, 200, 20, 20), l(200, 100, 20, 10)},
		{"then write bytes", l(200, 100, 20, 10), l(200, 200, 20, 20), l(200, 200, 20, 10)},
		{"then write requests", l(200, 200, 20, 10), l(200, 200, 20, 20), l(200, 200, 20, 20)},
		{"a cut too", l(200, 200, 20, 20), l(50, 50, 5, 5), l(50, 200, 20, 20)},
		{"a field's rule removed", l(200, 0, 20, 20), l(200, 0, 0, 20), l(200, 0, 0, 20)},
		{"a field's rule added", l(200, 0, 20, 20), l(200, 50, 20, 20), l(200, 50, 20, 20)},
		{"unchanged", l(200, 200, 20, 20), l(200, 200, 20, 20), l(200, 200, 20, 20)},
		{"new cap at once", cgroupfs.Limits{}, l(50, 50, 5, 5), l(50, 50, 5, 5)},
		{"lift at once", l(50, 50, 5, 5), cgroupfs.Limits{}, cgroupfs.Limits{}},
	} {
		if got := oneFile(c.cur, c.want); got != c.next {
			t.Errorf("%s: oneFile(%+v, %+v) = %+v, want %+v", c.name, c.cur, c.want, got, c.next)
		}
	}
}

// TestRamp: a raise goes up by the step, never past what is wanted; a lift
// goes up by the step until lifted; a new cap, a lower one and a field
// without a step are written at once.
func TestRamp(t *testing.T) {
	l := func(b, io uint64) cgroupfs.Limits { return cgroupfs.Limits{RBps: b, WBps: b, RIOps: io, WIOps: io} }
	step := l(10, 2)
	for _, c := range []struct {
		name            string
		cur, want, next cgroupfs.Limits
		lifted          bool
	}{
		{"raise by the step", l(100, 10), l(200, 40), l(110, 12), false},
		{"raise to what is wanted", l(195, 39), l(200, 40), l(200, 40), false},
		{"lift ramps", l(100, 10), cgroupfs.Limits{}, l(110, 12), false},
		{"lift done", l(100, 10), cgroupfs.Limits{}, cgroupfs.Limits{}, true},
		{"new cap at once", cgroupfs.Limits{}, l(50, 5), l(50, 5), false},
		{"lower at once", l(100, 10), l(50, 5), l(50, 5), false},
		{"bytes up, requests down", l(100, 10), l(300, 5), l(110, 5), false},
	} {
		if got := ramp(c.cur, c.want, step, c.lifted); got != c.next {
			t.Errorf("%s: ramp(%+v, %+v) = %+v, want %+v", c.name, c.cur, c.want, got, c.next)
		}
	}
	if got := ramp(l(100, 10), l(300, 30), cgroupfs.Limits{}, false); got != l(300, 30) {
		t.Errorf("no step (capacity unknown): %+v, want the cap wanted at once", got)
	}
	if !raising(l(100, 10), cgroupfs.Limits{}) || !raising(l(100, 10), l(100, 20)) || raising(l(100, 10), l(50, 10)) || raising(cgroupfs.Limits{}, l(50, 5)) {
		t.Error("raising: want true for a lift and a raise of any field, false for a cut and a new cap")
	}
	if s := rampStep(1000, 100, 2); s != l(10, 1) {
		t.Errorf("rampStep(1000, 100, 2) = %+v, want 2 %% split in two", s)
	}
	if s := rampStep(0, 100, 1); !s.IsZero() {
		t.Errorf("rampStep without a capacity = %+v, want none", s)
	}
}

package control

import (
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/iolat"
)

// TestDeviceInput: a tick's input counts the small requests of protected
// workloads as the measure and every other byte as the rest; Begin starts
// it again.
func TestDeviceInput(t *testing.T) {
	t.Parallel()
	small := iolat.Delta{Count: 10, Bytes: 10 * 4096, Hist: tickHist(time.Millisecond, 10)}
	large := iolat.Delta{Count: 2, Bytes: 2 << 20, Hist: tickHist(time.Millisecond, 2)}
	cases := []struct {
		name       string
		dl         iolat.Delta
		protected  bool
		prot, rest uint64
		n          uint64
	}{
		{"small protected", small, true, 10 * 4096, 0, 10},
		{"small other", small, false, 0, 10 * 4096, 0},
		{"large protected", large, true, 0, 2 << 20, 0},
		{"issued only", iolat.Delta{Bytes: 4096}, true, 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var d Device
			d.Begin()
			d.Add(&c.dl, c.protected)
			if d.prot != c.prot || d.rest != c.rest || d.hist.Count() != c.n {
				t.Fatalf("prot %d rest %d requests %d, want %d %d %d", d.prot, d.rest, d.hist.Count(), c.prot, c.rest, c.n)
			}
			d.Begin()
			if d.prot != 0 || d.rest != 0 || d.hist.Count() != 0 {
				t.Fatal("Begin kept the last tick's input")
			}
		})
	}
}

// TestDeviceStep: the controller is made at the first Step from the
// config asked for then, once; a bad config turns the device off; Stop
// does too, and an off device has no state.
func TestDeviceStep(t *testing.T) {
	t.Parallel()
	asked := 0
	cfg := func() Config { asked++; return Config{Start: 0.5} }
	var d Device
	if _, ok := d.State(); ok {
		t.Fatal("a state before the first Step")
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		d.Begin()
		d.Add(&iolat.Delta{Count: 10, Bytes: 10 * 4096, Hist: tickHist(time.Millisecond, 10)}, true)
		in, out, err := d.Step(t0.Add(time.Duration(i)*time.Second), Throttle{Capped: true, Max: 0.9}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !in.Quiet || !in.Capped || in.Max != 0.9 || in.Hist.Count() != 10 || out.Share <= 0 {
			t.Fatalf("step %d: input %+v, output %+v", i, in, out)
		}
	}
	if asked != 1 {
		t.Fatalf("config asked for %d times, want once", asked)
	}
	if _, ok := d.State(); !ok {
		t.Fatal("no state after a Step")
	}
	d.Stop()
	if _, ok := d.State(); ok || !d.Off() {
		t.Fatal("a stopped device still steered")
	}
	var bad Device
	if _, _, err := bad.Step(t0, Throttle{}, func() Config { return Config{Multiple: 0.5} }); err == nil || !bad.Off() {
		t.Fatalf("a bad config: err %v, off %v; want an error and off", err, bad.Off())
	}
}

// tickHist is n requests of latency d as the sensor hands them in a tick.
func tickHist(d time.Duration, n uint32) iolat.TickHist {
	var h iolat.TickHist
	h[iolat.Bucket(uint64(d))] = n
	return h
}

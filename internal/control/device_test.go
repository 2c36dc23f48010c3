package control

import (
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
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

// TestSet: a delta goes to its device's input by its device number, a
// device not in the list is not charged, and protected is asked only of
// small requests; another list length starts over.
func TestSet(t *testing.T) {
	t.Parallel()
	a, b := cgroupfs.Dev{Major: 7, Minor: 1}, cgroupfs.Dev{Major: 253, Minor: 0}
	var s Set
	s.Begin([]cgroupfs.Dev{a, b})
	delta := func(dev cgroupfs.Dev, n, bytes uint64) *iolat.Delta {
		dl := &iolat.Delta{Key: iolat.Key{Dev: dev}, Count: n, Bytes: bytes}
		dl.Hist[iolat.Bucket(uint64(time.Millisecond))] = uint32(n)
		return dl
	}
	var asked []int
	prot := func(i int) bool { asked = append(asked, i); return true }
	s.Add(delta(b, 20, 20*4096), prot)
	s.Add(delta(cgroupfs.Dev{Major: 8}, 20, 20*4096), prot)
	s.Add(delta(a, 5, 5<<20), prot) // large: the measure is small requests
	if len(asked) != 1 || asked[0] != 1 {
		t.Fatalf("protected asked for devices %v, want [1] (b's small requests only)", asked)
	}
	if got := s.Device(1).hist.Count(); got != 20 || s.Device(0).hist.Count() != 0 {
		t.Fatalf("protected requests: a %d, b %d; want 0 and 20", s.Device(0).hist.Count(), got)
	}
	if s.Device(0).rest != 5<<20 {
		t.Fatalf("a's other bytes %d, want %d", s.Device(0).rest, 5<<20)
	}
	if _, ok := s.State(2); ok {
		t.Fatal("State of a device beyond the list: ok")
	}
	s.Begin([]cgroupfs.Dev{a})
	if s.Len() != 1 || s.Device(0).rest != 0 {
		t.Fatalf("after Begin on one device: Len %d, rest %d; want 1 and 0", s.Len(), s.Device(0).rest)
	}
}

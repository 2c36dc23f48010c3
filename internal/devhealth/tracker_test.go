package devhealth

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/devsensor"
)

// sim is a device with a credit bucket (qemu's and EBS's shape), driven by
// a demand of depth requests always in flight (0: idle) for a second at a
// time. It returns the sample a stat-file reader would see.
type sim struct {
	b      Bucket
	bal    float64
	ioSize uint64
	now    time.Time
	// latency of one request at the device when it is not throttled, s.
	svc float64
}

func (d *sim) second(depth float64) Sample {
	d.now = d.now.Add(time.Second)
	if depth == 0 {
		d.bal = math.Min(d.b.Size, d.bal+d.b.Baseline)
		return Sample{At: d.now, Secs: 1}
	}
	// What the demand asks for (depth/svc), capped by the burst while
	// credit lasts and by the baseline after.
	want := depth / d.svc
	capRate := d.b.Burst
	if d.bal <= 0 {
		capRate = d.b.Baseline
	}
	rate := math.Min(want, capRate)
	// The bucket can run out inside this second.
	if rate > d.b.Baseline && d.bal < (rate-d.b.Baseline) {
		f := d.bal / (rate - d.b.Baseline)
		rate = f*rate + (1-f)*d.b.Baseline
	}
	d.bal = math.Max(0, math.Min(d.b.Size, d.bal-(rate-d.b.Baseline)))
	ios := uint64(math.Round(rate))
	return Sample{At: d.now, Secs: 1, IOs: ios, Bytes: ios * d.ioSize, BusyMs: 1000, QueueMs: uint64(depth * 1000)}
}

func gp2Like() (*sim, Model) {
	b := Bucket{Baseline: 40, Burst: 400, Size: 400 * 40}
	return &sim{b: b, bal: b.Size, ioSize: 4096, now: time.Unix(1e9, 0), svc: 0.002}, Model{Name: "plain", IOPS: b}
}

// TestDetectorFindsExhaustion: a burst, then a floor under the same demand:
// the detector (no model) says exhausted within 10 s of the bucket running
// dry, and not before.
func TestDetectorFindsExhaustion(t *testing.T) {
	t.Parallel()
	d, _ := gp2Like()
	tr := NewTracker(Model{})
	emptyAt := time.Time{}
	var firedAt time.Time
	for i := 0; i < 120; i++ {
		s := d.second(8)
		if emptyAt.IsZero() && d.bal <= 0 {
			emptyAt = s.At
		}
		st, changed := tr.Observe(s)
		if changed && st.State == Exhausted {
			firedAt = s.At
			if emptyAt.IsZero() {
				t.Fatalf("exhausted at %v before the bucket ran dry: %s", s.At, st.Reason)
			}
			if !strings.Contains(st.Reason, "throttled by the device") {
				t.Errorf("reason %q", st.Reason)
			}
			if st.FloorIOPS < 35 || st.FloorIOPS > 45 {
				t.Errorf("floor %.1f IOPS, want ~40", st.FloorIOPS)
			}
		}
	}
	if firedAt.IsZero() {
		t.Fatalf("never exhausted; bucket dry at %v, status %+v", emptyAt, tr.Status())
	}
	if lag := firedAt.Sub(emptyAt); lag > 10*time.Second {
		t.Errorf("detected %v after the bucket ran dry, want within 10s", lag)
	}
	t.Logf("bucket dry at +%v, detected %v later", emptyAt.Sub(time.Unix(1e9, 0)), firedAt.Sub(emptyAt))
}

// TestDetectorRecovers: exhausted, then demand stops (credit accrues) →
// recovering, then back to normal after a quiet minute.
func TestDetectorRecovers(t *testing.T) {
	t.Parallel()
	d, _ := gp2Like()
	tr := NewTracker(Model{})
	var states []State
	obs := func(depth float64, n int) {
		for i := 0; i < n; i++ {
			if st, ch := tr.Observe(d.second(depth)); ch {
				states = append(states, st.State)
			}
		}
	}
	obs(8, 80)
	obs(0, 100)
	obs(8, 5) // the refilled bucket bursts again: no new floor
	want := []State{Exhausted, Recovering, Normal}
	if len(states) != len(want) {
		t.Fatalf("states %v, want %v", states, want)
	}
	for i := range want {
		if states[i] != want[i] {
			t.Fatalf("states %v, want %v", states, want)
		}
	}
}

// TestDetectorNoFalseFloor: rates that drop for reasons of the workload are
// not a throttle: demand falls (device no longer busy), or the workload
// goes from 8 requests in flight to 1 (the rate drops 8x, each request
// waits no longer).
func TestDetectorNoFalseFloor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		after func(d *sim) Sample
	}{
		{"demand falls", func(d *sim) Sample {
			s := d.second(8)
			s.IOs /= 10
			s.Bytes /= 10
			s.BusyMs, s.QueueMs = 100, 200
			return s
		}},
		{"queue depth 8 to 1", func(d *sim) Sample { return d.second(1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, _ := gp2Like()
			d.b.Size = 1e12 // never runs out
			d.bal = d.b.Size
			d.svc = 0.04 // 8 in flight: 200 IOPS, under the burst
			tr := NewTracker(Model{})
			for i := 0; i < 20; i++ {
				tr.Observe(d.second(8))
			}
			for i := 0; i < 60; i++ {
				if st, _ := tr.Observe(tc.after(d)); st.State != Normal {
					t.Fatalf("second %d: %s: %s", i, st.State, st.Reason)
				}
			}
		})
	}
}

// TestModelTimeToEmpty: with the model configured, the time-to-empty
// estimate over the last minute before the bucket runs dry is within 20 %
// of the truth, the device is draining, and the balance is 0 once empty.
func TestModelTimeToEmpty(t *testing.T) {
	t.Parallel()
	b := Bucket{Baseline: 100, Burst: 3000, Size: 400000} // ~138 s of burst
	d := &sim{b: b, bal: b.Size, ioSize: 16384, now: time.Unix(1e9, 0), svc: 0.001}
	tr := NewTracker(Model{IOPS: b})
	type est struct {
		at  time.Time
		tte float64
	}
	var ests []est
	var emptyAt time.Time
	sawDraining := false
	for i := 0; i < 200 && emptyAt.IsZero(); i++ {
		s := d.second(8)
		st, _ := tr.Observe(s)
		sawDraining = sawDraining || st.State == Draining
		ests = append(ests, est{s.At, st.TimeToEmpty})
		if d.bal <= 0 {
			emptyAt = s.At
		}
	}
	if emptyAt.IsZero() {
		t.Fatal("bucket never ran dry")
	}
	if !sawDraining {
		t.Error("never draining")
	}
	worst := 0.0
	for _, e := range ests {
		left := emptyAt.Sub(e.at).Seconds()
		if left > 60 || left < 5 {
			continue
		}
		if r := math.Abs(e.tte-left) / left; r > worst {
			worst = r
		}
	}
	if worst > 0.2 {
		t.Errorf("time-to-empty off by %.0f%% in the last minute", 100*worst)
	}
	for i := 0; i < 10; i++ {
		tr.Observe(d.second(8))
	}
	if st := tr.Status(); st.State != Exhausted || st.Balance != 0 {
		t.Errorf("after the burst: %s, balance %.3f (%s)", st.State, st.Balance, st.Reason)
	}
}

func TestPresets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		size      int64
		iops      Bucket
		bytesBase float64
		burstFor  float64 // seconds of full burst, approx
		err       string
	}{
		{name: "aws-gp2", size: 100 << 30, iops: Bucket{300, 3000, 5.4e6}, burstFor: 2000},
		{name: "aws-gp2", size: 10 << 30, iops: Bucket{100, 3000, 5.4e6}, burstFor: 1862},
		{name: "aws-gp2", size: 2000 << 30, iops: Bucket{6000, 6000, 5.4e6}, burstFor: 0},
		{name: "aws-st1", size: 1 << 40, bytesBase: 40 << 20, burstFor: float64(1<<40) / (210 << 20)},
		{name: "azure-premium-p1-p20", size: 128 << 30, iops: Bucket{500, 3500, 3000 * 1800}, bytesBase: 100e6, burstFor: 1800},
		{name: "azure-premium-p1-p20", size: 1 << 40, err: "P1–P20"},
		{name: "gcp-pd", size: 1 << 30, err: "unknown preset"},
		{name: "aws-gp2", size: 0, err: "must be positive"},
	} {
		m, err := Preset(tc.name, tc.size)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %d: err %v, want %q", tc.name, tc.size, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.iops != (Bucket{}) && m.IOPS != tc.iops {
			t.Errorf("%s %d: iops %+v, want %+v", tc.name, tc.size, m.IOPS, tc.iops)
		}
		if tc.bytesBase != 0 && m.Bytes.Baseline != tc.bytesBase {
			t.Errorf("%s: bytes baseline %v, want %v", tc.name, m.Bytes.Baseline, tc.bytesBase)
		}
		bf := math.Max(m.IOPS.BurstFor(), m.Bytes.BurstFor())
		if math.Abs(bf-tc.burstFor) > 1 {
			t.Errorf("%s %d: full burst lasts %.0fs, want %.0fs", tc.name, tc.size, bf, tc.burstFor)
		}
	}
}

func TestParseModel(t *testing.T) {
	t.Parallel()
	size := func(s string) (int64, error) {
		if s == "100G" {
			return 100 << 30, nil
		}
		return 0, &parseErr{s}
	}
	m, err := ParseModel("aws-gp2:100G", size)
	if err != nil || m.IOPS.Baseline != 300 {
		t.Errorf("aws-gp2:100G: %+v %v", m, err)
	}
	m, err = ParseModel("iops=40/400/16000, bps=1e6/4e6/1e8", size)
	if err != nil || m.IOPS != (Bucket{40, 400, 16000}) || m.Bytes != (Bucket{1e6, 4e6, 1e8}) {
		t.Errorf("plain: %+v %v", m, err)
	}
	for _, bad := range []string{"", "aws-gp2:huge", "iops=1/2", "iops=a/2/3", "iops=400/40/100", "iops=-1/2/3", "foo=1/2/3", "iops=1/NaN/3"} {
		if _, err := ParseModel(bad, size); err == nil || !strings.Contains(err.Error(), "burst model") {
			t.Errorf("%q: err %v, want one naming the burst model", bad, err)
		}
	}
}

type parseErr struct{ s string }

func (e *parseErr) Error() string { return "bad size " + e.s }

// TestOwnCapsAreNoFloor: the floor shape (a burst, then a steady rate at a
// tenth while busy, each request waiting longer) in three cases. When the
// daemon's own caps held a workload back through it, the device stays
// normal (the daemon imposed that rate); with caps in force that the
// workload stayed under (the device, not the cap, set the pace) it is
// exhausted as before; and held back only at the start of the floor, it is
// exhausted once the window no longer holds that sample.
func TestOwnCapsAreNoFloor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		caps     func(i int) devsensor.Caps // for the i-th second of the floor
		want     State
		afterSec int // with want Exhausted: not before this second of the floor
	}{
		{"held back throughout", func(int) devsensor.Caps {
			return devsensor.Caps{CappedSecs: 1, HeldSecs: 0.9, Bytes: 40 * 4096, IOs: 40}
		}, Normal, 0},
		{"capped, never at the cap", func(int) devsensor.Caps {
			return devsensor.Caps{CappedSecs: 1, Bytes: 400 * 4096, IOs: 400}
		}, Exhausted, 0},
		{"held back for the first 3 s", func(i int) devsensor.Caps {
			if i < 3 {
				return devsensor.Caps{CappedSecs: 1, HeldSecs: 1, IOs: 40}
			}
			return devsensor.Caps{}
		}, Exhausted, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := NewTracker(Model{})
			at := time.Unix(1e9, 0)
			sample := func(iops, depth uint64, caps devsensor.Caps) Status {
				at = at.Add(time.Second)
				st, _ := tr.Observe(Sample{At: at, Secs: 1, IOs: iops, Bytes: iops * 4096, BusyMs: 1000, QueueMs: depth * 1000, Caps: caps})
				return st
			}
			for range 10 {
				sample(400, 2, devsensor.Caps{})
			}
			var st Status
			firedAt := -1
			for i := range 30 {
				st = sample(40, 8, c.caps(i))
				if st.State == Exhausted && firedAt < 0 {
					firedAt = i
				}
				if got := st.CapIOPS; got != c.caps(i).IOs {
					t.Fatalf("second %d: cap %.0f IOPS in the status, want %.0f", i, got, c.caps(i).IOs)
				}
			}
			switch {
			case c.want == Normal && firedAt >= 0:
				t.Fatalf("exhausted at second %d of a floor the daemon's caps held: %s", firedAt, tr.Status().Reason)
			case c.want == Normal && !st.HeldByCaps:
				t.Fatalf("status %+v: not held by caps", st)
			case c.want == Exhausted && firedAt < c.afterSec:
				t.Fatalf("exhausted at second %d, want at or after %d (state %s)", firedAt, c.afterSec, st.State)
			}
		})
	}
}

// TestStackedDeviceNoFloor: the same gp2-like floor seen on a stacked
// device (StackedOn: a loop device over a file on a disk) is not judged a
// burst balance of its own: the disk below is where it would be.
func TestStackedDeviceNoFloor(t *testing.T) {
	t.Parallel()
	d, _ := gp2Like()
	tr := NewTracker(Model{})
	tr.StackedOn()
	for i := 0; i < 120; i++ {
		if st, _ := tr.Observe(d.second(8)); st.State == Exhausted {
			t.Fatalf("a stacked device judged exhausted at %v: %s", st.Since, st.Reason)
		}
	}
}

package actuate

import (
	"math"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// TestCapCalc: the cap arithmetic, case by case.
func TestCapCalc(t *testing.T) {
	shares := [4]float64{1, 0.6, 0.45, 0.3}
	base := capCalc{cfg: Throttle{Shares: shares, Min: 1 << 20}, slice: sliceNonRotational, top: 1, bps: 1000 << 20, iops: 1000}
	lim := func(bps, iops uint64) cgroupfs.Limits {
		return cgroupfs.Limits{RBps: bps, WBps: bps, RIOps: iops, WIOps: iops}
	}
	mib := uint64(1 << 20)
	for _, c := range []struct {
		name string
		calc func(capCalc) capCalc
		ms   []capIn
		want []cgroupfs.Limits
	}{
		{"no better level active: nobody capped", func(c capCalc) capCalc { c.top = 0; return c },
			[]capIn{{4, true}, {2, true}}, []cgroupfs.Limits{{}, {}}},
		{"one level-4 stream: its share of the capacity", nil,
			[]capIn{{4, true}}, []cgroupfs.Limits{lim(300*mib, 300)}},
		{"two active at level 4 split it", nil,
			[]capIn{{4, true}, {4, true}}, []cgroupfs.Limits{lim(150*mib, 150), lim(150*mib, 150)}},
		{"an idle one does not count in the split", nil,
			[]capIn{{4, true}, {4, false}}, []cgroupfs.Limits{lim(300*mib, 300), lim(300*mib, 300)}},
		{"levels 2 and 4 active: shares scaled to the largest (0.6)", nil,
			[]capIn{{2, true}, {4, true}}, []cgroupfs.Limits{lim(uint64(0.4*float64(1000*mib)), 400), lim(uint64(0.2*float64(1000*mib)), 200)}},
		{"level 2 active at the top: level 2 free, level 3 capped", func(c capCalc) capCalc { c.top = 2; return c },
			[]capIn{{2, true}, {3, true}}, []cgroupfs.Limits{{}, lim(uint64(0.45*float64(1000*mib)), 450)}},
		{"a level of share 1 is not managed", func(c capCalc) capCalc { c.cfg.Shares[1] = 1; return c },
			[]capIn{{2, true}}, []cgroupfs.Limits{{}}},
		{"MaxBurst bounds the share: 5 ms of a 20 ms slice", func(c capCalc) capCalc { c.cfg.MaxBurst = 5 * time.Millisecond; return c },
			[]capIn{{4, true}}, []cgroupfs.Limits{lim(250*mib, 250)}},
		{"never below Min bytes/s and the IOPS floor", func(c capCalc) capCalc { c.bps, c.iops = 2*float64(mib), 20; return c },
			[]capIn{{4, true}}, []cgroupfs.Limits{lim(mib, throttleMinIOPS)}},
		{"capacity unknown: no cap", func(c capCalc) capCalc { c.bps, c.iops = 0, 0; return c },
			[]capIn{{4, true}}, []cgroupfs.Limits{{}}},
		{"IOPS unknown: bytes alone", func(c capCalc) capCalc { c.iops = 0; return c },
			[]capIn{{4, true}}, []cgroupfs.Limits{{RBps: 300 * mib, WBps: 300 * mib}}},
		{"ceiling without a better level: held levels share it, IOPS alone",
			func(c capCalc) capCalc { c.top = 0; c.ceil = Ceiling{From: 3, IOPS: 100}; return c },
			[]capIn{{2, true}, {3, true}, {4, true}}, []cgroupfs.Limits{{}, {RIOps: 50, WIOps: 50}, {RIOps: 50, WIOps: 50}}},
		{"ceiling lowers a share's cap", func(c capCalc) capCalc { c.ceil = Ceiling{From: 2, IOPS: 100, Bps: 10 * float64(mib)}; return c },
			[]capIn{{4, true}}, []cgroupfs.Limits{lim(10*mib, 100)}},
		{"ceiling above the share's cap changes nothing", func(c capCalc) capCalc { c.ceil = Ceiling{From: 2, IOPS: 10000}; return c },
			[]capIn{{4, true}}, []cgroupfs.Limits{lim(300*mib, 300)}},
		{"ceiling's floor: 2 IOPS, 4 KiB/s", func(c capCalc) capCalc { c.top = 0; c.ceil = Ceiling{From: 2, IOPS: 1, Bps: 100}; return c },
			[]capIn{{4, true}}, []cgroupfs.Limits{lim(ceilingMinBps, ceilingMinIOPS)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			calc := base
			if c.calc != nil {
				calc = c.calc(calc)
			}
			got := calc.caps(c.ms, nil)
			if len(got) != len(c.want) {
				t.Fatalf("%d limits, want %d", len(got), len(c.want))
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("workload %d (level %d): %+v, want %+v", i, c.ms[i].level, got[i], c.want[i])
				}
			}
		})
	}
}

// TestCapacityEstimate: the capacity follows the device's best windows,
// and a slowdown only when the device stayed busy, every request in flight
// longer, and no cap of the throttle was in force over the window.
func TestCapacityEstimate(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const w = 200 * time.Millisecond
	// step is one window's device activity: bytes, requests, busy ms, mean
	// requests in flight while busy; capped says a cap was in force.
	type step struct {
		mib, ios, busyMs, depth uint64
		dt                      time.Duration
		capped                  bool
	}
	type want struct{ mibps, iops float64 }
	for _, c := range []struct {
		name  string
		steps []step
		want  want
	}{
		{"a window not yet closed measures nothing", []step{{100, 100, 100, 1, w / 2, false}}, want{0, 0}},
		{"the best window sets it; a lighter one after does not lower it", []step{{100, 1000, 200, 1, w, false}, {20, 200, 40, 1, w, false}}, want{500, 5000}},
		{"a busy device, each request 4x longer, uncapped: followed",
			[]step{{100, 1000, 200, 1, w, false}, {50, 500, 200, 2, w, false}}, want{0.8*500 + 0.2*250, 0.8*5000 + 0.2*2500}},
		{"the same while a cap was in force: not followed",
			[]step{{100, 1000, 200, 1, w, false}, {50, 500, 200, 2, w, true}}, want{500, 5000}},
		{"less demand (shallower, requests no slower): not followed",
			[]step{{100, 1000, 200, 4, w, false}, {50, 500, 200, 2, w, false}}, want{500, 5000}},
		{"idle half the window: not followed",
			[]step{{100, 1000, 200, 1, w, false}, {50, 500, 100, 4, w, false}}, want{500, 5000}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cp capacity
			var s cgroupfs.BlockStat
			now := t0
			cp.observe(s, now, time.Time{})
			var cappedAt time.Time
			for _, st := range c.steps {
				s.ReadSectors += st.mib << 20 / 512
				s.ReadIOs += st.ios
				s.IOTicksMs += st.busyMs
				s.TimeInQueueMs += st.busyMs * st.depth
				now = now.Add(st.dt)
				if st.capped {
					cappedAt = now.Add(-st.dt / 2)
				}
				cp.observe(s, now, cappedAt)
			}
			if math.Abs(cp.bps/(1<<20)-c.want.mibps) > 0.01 || math.Abs(cp.iops-c.want.iops) > 0.01 {
				t.Errorf("capacity %.2f MiB/s %.2f IOPS, want %.2f and %.2f", cp.bps/(1<<20), cp.iops, c.want.mibps, c.want.iops)
			}
		})
	}
	// A counter that went backwards (the device attached again) counts
	// from zero, never as a huge rate.
	var cp capacity
	cp.observe(cgroupfs.BlockStat{ReadSectors: 1 << 30, ReadIOs: 1 << 20}, t0, time.Time{})
	cp.observe(cgroupfs.BlockStat{ReadSectors: 2048, ReadIOs: 10}, t0.Add(time.Second), time.Time{})
	if cp.bps != 1<<20 || cp.iops != 10 {
		t.Errorf("after a reset: %.0f B/s %.0f IOPS, want 1 MiB/s and 10", cp.bps, cp.iops)
	}
}

// TestHeldBack: a capped workload ran at its cap when it moved at least
// heldFrac of what the cap allowed, in either unit.
func TestHeldBack(t *testing.T) {
	for _, c := range []struct {
		bytes, ios, allowB, allowIO float64
		want                        bool
	}{
		{90, -1, 100, 0, true},    // at its bytes cap
		{50, -1, 100, 0, false},   // well under it
		{10, 95, 100, 100, true},  // at its IOPS cap, small requests
		{10, 50, 100, 100, false}, // under both
		{10, -1, 100, 100, false}, // requests unknown: bytes alone say no
		{1000, 0, 0, 0, false},    // uncapped
		{80, 79, 100, 100, true},  // exactly heldFrac of bytes
		{0, 100, 0, 100, true},    // IOPS cap alone
	} {
		if got := heldBack(c.bytes, c.ios, c.allowB, c.allowIO); got != c.want {
			t.Errorf("heldBack(%v, %v, %v, %v) = %v, want %v", c.bytes, c.ios, c.allowB, c.allowIO, got, c.want)
		}
	}
}

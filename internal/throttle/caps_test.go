package throttle

import (
	"math"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// TestCapCalc: the cap arithmetic, case by case.
func TestCapCalc(t *testing.T) {
	shares := [4]float64{1, 0.6, 0.45, 0.3}
	mib := uint64(1 << 20)
	base := capCalc{cfg: Config{Shares: shares, Min: 1 << 20}, slice: throttleSlice, top: 1, bps: 1000 << 20, iops: 1000,
		light: DefaultLight}
	lim := func(bps, iops uint64) cgroupfs.Limits {
		return cgroupfs.Limits{RBps: bps, WBps: bps, RIOps: iops, WIOps: iops}
	}
	// A stream moving half the device, a light reader (400 KB/s, a
	// request in flight now and then), an idle workload.
	stream := func(level int) capIn { return capIn{level: level, active: true, rate: 500 << 20, depth: 1} }
	light := func(level int) capIn { return capIn{level: level, active: true, rate: 400 << 10, depth: 0.02} }
	idle := func(level int) capIn { return capIn{level: level} }
	// MaxBurst's share of a slice, computed as the code does (5 ms / 100 ms
	// in float64 is a hair under 0.05).
	burst := (5 * time.Millisecond).Seconds() / throttleSlice.Seconds()
	// The share threshold: 5 % of 1000 MiB/s.
	edge := 0.05 * float64(1000<<20)
	for _, c := range []struct {
		name string
		calc func(capCalc) capCalc
		ms   []capIn
		want []cgroupfs.Limits
	}{
		{"no better level active: nobody capped", func(c capCalc) capCalc { c.top = 0; return c },
			[]capIn{stream(4), stream(2)}, []cgroupfs.Limits{{}, {}}},
		{"one level-4 stream: its share of the capacity", nil,
			[]capIn{stream(4)}, []cgroupfs.Limits{lim(300*mib, 300)}},
		{"lifted (a steered share of 1): no level cap", func(c capCalc) capCalc { c.share = 1; return c },
			[]capIn{stream(4), stream(3)}, []cgroupfs.Limits{{}, {}}},
		{"lifted: a Ceiling still bounds", func(c capCalc) capCalc {
			c.share, c.ceil = 1, Ceiling{From: 3, Bps: 100 << 20, IOPS: 100}
			return c
		}, []capIn{stream(4)}, []cgroupfs.Limits{lim(100*mib, 100)}},
		{"a light level-2 reader beside a level-1 one: nobody capped", nil,
			[]capIn{light(2)}, []cgroupfs.Limits{{}}},
		{"a light reader at level 4 beside a level-1 one: not capped either", nil,
			[]capIn{light(4)}, []cgroupfs.Limits{{}}},
		{"a streamer beside a light level-2 (the best active level): streamer capped, reader not",
			func(c capCalc) capCalc { c.top = 2; return c },
			[]capIn{light(2), stream(4)}, []cgroupfs.Limits{{}, lim(300*mib, 300)}},
		{"a light level-2 beside a streamer and a level-1: the streamer keeps its whole share", nil,
			[]capIn{light(2), stream(4)}, []cgroupfs.Limits{{}, lim(300*mib, 300)}},
		{"two streamers at level 4 split it", nil,
			[]capIn{stream(4), stream(4)}, []cgroupfs.Limits{lim(150*mib, 150), lim(150*mib, 150)}},
		{"two streamers, levels 3 and 4, the level-3 one the best active: level 4 capped below it",
			func(c capCalc) capCalc { c.top = 3; return c },
			[]capIn{stream(3), stream(4)}, []cgroupfs.Limits{{}, lim(300*mib, 300)}},
		{"an idle one is not capped and does not count in the split", nil,
			[]capIn{stream(4), idle(4)}, []cgroupfs.Limits{lim(300*mib, 300), {}}},
		{"levels 2 and 4 streaming: shares scaled to the largest (0.6)", nil,
			[]capIn{stream(2), stream(4)}, []cgroupfs.Limits{lim(uint64(0.4*float64(1000*mib)), 400), lim(uint64(0.2*float64(1000*mib)), 200)}},
		{"share exactly at the threshold: heavy", nil,
			[]capIn{{level: 4, active: true, rate: edge}}, []cgroupfs.Limits{lim(300*mib, 300)}},
		{"share just below the threshold: light", nil,
			[]capIn{{level: 4, active: true, rate: edge - 1}}, []cgroupfs.Limits{{}}},
		{"a higher threshold (Light 0.1) frees a 5 % workload", func(c capCalc) capCalc { c.light = 0.1; return c },
			[]capIn{{level: 4, active: true, rate: edge}}, []cgroupfs.Limits{{}}},
		{"few bytes but a deep queue (4 in flight): heavy", nil,
			[]capIn{{level: 4, active: true, rate: 1 << 20, depth: deepInFlight}}, []cgroupfs.Limits{lim(300*mib, 300)}},
		{"few bytes, just under the depth: light", nil,
			[]capIn{{level: 4, active: true, rate: 1 << 20, depth: deepInFlight - 0.01}}, []cgroupfs.Limits{{}}},
		{"held back by its cap, its own rate low: stays heavy", nil,
			[]capIn{{level: 4, active: true, rate: 1 << 20, held: true}}, []cgroupfs.Limits{lim(300*mib, 300)}},
		{"heavy lately, idle now (a stream between files): stays capped", nil,
			[]capIn{{level: 4, lately: true}}, []cgroupfs.Limits{lim(300*mib, 300)}},
		{"level 2 at the top: level 2 free, level 3 capped", func(c capCalc) capCalc { c.top = 2; return c },
			[]capIn{stream(2), stream(3)}, []cgroupfs.Limits{{}, lim(uint64(0.45*float64(1000*mib)), 450)}},
		{"a level of share 1 is not managed", func(c capCalc) capCalc { c.cfg.Shares[1] = 1; return c },
			[]capIn{stream(2)}, []cgroupfs.Limits{{}}},
		{"MaxBurst bounds the share: 5 ms of the 100 ms slice", func(c capCalc) capCalc { c.cfg.MaxBurst = 5 * time.Millisecond; return c },
			[]capIn{stream(4)}, []cgroupfs.Limits{lim(uint64(burst*float64(1000*mib)), throttleMinIOPS)}},
		{"steered to 20 %: MaxBurst no longer bounds it, the level's 30 % does not either",
			func(c capCalc) capCalc { c.cfg.MaxBurst, c.share = 5*time.Millisecond, 0.2; return c },
			[]capIn{stream(4)}, []cgroupfs.Limits{lim(uint64(0.2*float64(1000*mib)), 200)}},
		{"steered above the level's share: the steered share (a slow start past the levels)", func(c capCalc) capCalc { c.share = 0.5; return c },
			[]capIn{stream(4)}, []cgroupfs.Limits{lim(500*mib, 500)}},
		{"steered to 15 % with levels 2 and 4 streaming: their sum is 15 %, in the levels' proportion",
			func(c capCalc) capCalc { c.share = 0.15; return c },
			[]capIn{stream(2), stream(4)}, []cgroupfs.Limits{lim(uint64(0.1*float64(1000*mib)), 100), lim(uint64(0.05*float64(1000*mib)), 50)}},
		{"never below Min bytes/s and the IOPS floor", func(c capCalc) capCalc { c.bps, c.iops = 2*float64(mib), 20; return c },
			[]capIn{stream(4)}, []cgroupfs.Limits{lim(mib, throttleMinIOPS)}},
		{"capacity unknown: no cap", func(c capCalc) capCalc { c.bps, c.iops = 0, 0; return c },
			[]capIn{stream(4)}, []cgroupfs.Limits{{}}},
		{"IOPS unknown: bytes alone", func(c capCalc) capCalc { c.iops = 0; return c },
			[]capIn{stream(4)}, []cgroupfs.Limits{{RBps: 300 * mib, WBps: 300 * mib}}},
		{"ceiling without a better level: held levels share it, IOPS alone, light or heavy",
			func(c capCalc) capCalc { c.top = 0; c.ceil = Ceiling{From: 3, IOPS: 100}; return c },
			[]capIn{stream(2), light(3), stream(4)}, []cgroupfs.Limits{{}, {RIOps: 50, WIOps: 50}, {RIOps: 50, WIOps: 50}}},
		{"ceiling lowers a share's cap", func(c capCalc) capCalc { c.ceil = Ceiling{From: 2, IOPS: 100, Bps: 10 * float64(mib)}; return c },
			[]capIn{stream(4)}, []cgroupfs.Limits{lim(10*mib, 100)}},
		{"ceiling above the share's cap changes nothing", func(c capCalc) capCalc { c.ceil = Ceiling{From: 2, IOPS: 10000}; return c },
			[]capIn{stream(4)}, []cgroupfs.Limits{lim(300*mib, 300)}},
		{"ceiling's floor: 2 IOPS, 4 KiB/s", func(c capCalc) capCalc { c.top = 0; c.ceil = Ceiling{From: 2, IOPS: 1, Bps: 100}; return c },
			[]capIn{stream(4)}, []cgroupfs.Limits{lim(ceilingMinBps, ceilingMinIOPS)}},
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
// TestLevelCapped: the level rule's judgement holds whether or not a
// steered share of 1 lifts the caps (the controller's input Contended).
func TestLevelCapped(t *testing.T) {
	c := capCalc{cfg: Config{Shares: [4]float64{1, 0.6, 0.45, 0.3}}, slice: throttleSlice, top: 1, bps: 1000 << 20, light: DefaultLight}
	stream := capIn{level: 4, active: true, rate: 500 << 20, depth: 1}
	for _, share := range []float64{0, 0.1, 1} {
		c.share = share
		if !c.levelCapped(stream) {
			t.Errorf("share %g: a level-4 stream beside level 1 not level-capped", share)
		}
	}
	c.top = 0
	if c.levelCapped(stream) {
		t.Error("nobody better active: level-capped")
	}
}

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
		{"a paced stream busy a quarter of the window: the rate while busy",
			[]step{{10, 10, 50, 1, w, false}}, want{200, 200}},
		{"the paced stream with a cap in force (a burst device's bucket full): the window's rate only",
			[]step{{10, 10, 50, 1, w, true}}, want{50, 50}},
		{"busy too little to judge (io_ticks in jiffies): the window's rate only",
			[]step{{1, 1, 10, 1, w, false}}, want{5, 5}},
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
		{77, 77, 100, 100, true},  // a re-armed cap's delivery (host scenario: 0.76-0.78)
		{65, 65, 100, 100, false}, // under heldFrac in both
		{10, 95, 100, 100, true},  // at its IOPS cap, small requests
		{10, 50, 100, 100, false}, // under both
		{10, -1, 100, 100, false}, // requests unknown: bytes alone say no
		{1000, 0, 0, 0, false},    // uncapped
		{70, 69, 100, 100, true},  // exactly heldFrac of bytes
		{0, 100, 0, 100, true},    // IOPS cap alone
	} {
		if got := heldBack(c.bytes, c.ios, c.allowB, c.allowIO); got != c.want {
			t.Errorf("heldBack(%v, %v, %v, %v) = %v, want %v", c.bytes, c.ios, c.allowB, c.allowIO, got, c.want)
		}
	}
}

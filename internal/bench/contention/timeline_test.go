package contention

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// TestTimeline: each snapshot sampled becomes the second that ended when
// it was taken; the victims' requests land in the second they were due.
func TestTimeline(t *testing.T) {
	t.Parallel()
	snap := &snapshot.Snapshot{
		Devices: []snapshot.Device{{Name: "loop7", Dev: "7:7", TopActiveLevel: 1, CappedShare: 0.1,
			LatencyTarget: 0.0015, ProtectedP99: 0.0009, CapacityBps: 5e8, CapacityIOPS: 800}},
		Workloads: []*snapshot.Workload{
			{Cgroup: "bench/streamer-1", Level: 4, ReadBps: 1e8, ReadIOs: 1000,
				Applied: []snapshot.Applied{{Device: "loop7", Dev: "7:7", ReadBps: 5e7, ReadIOPS: 80}}},
			{Cgroup: "bench/web-2", Level: 2},
			{Cgroup: "bench/light2-4", Level: 1},
			{Cgroup: "bench/light1-3", Level: 3},
		},
	}
	tl := &timeline{acquire: snapshot.Fixed(func() *snapshot.Snapshot { return snap }), dev: "7:7", stop: make(chan struct{})}
	v := time.Unix(1000, 0)
	// The streamer's read_ios move 1.7 s × 500/s, then 0.9 s × 100/s.
	tl.sample(v.Add(-500 * time.Millisecond)) // the warm-up's last second
	snap.Workloads[0].ReadIOs += 850
	tl.sample(v.Add(1200 * time.Millisecond)) // second 0
	snap.Workloads[0].ReadIOs += 90
	tl.sample(v.Add(2100 * time.Millisecond)) // second 1
	// web at 4/s: second 0 holds 100..400, second 1 900 and 50; light
	// tenants at 1/s, the second started 1.5 s after the web reader: its
	// one request falls in second 1.
	web := []float64{100, 200, 300, 400, 900, 50}
	light := [][]float64{{10, 5000}, {20}}
	got := tl.finish(v, web, 4, light, []time.Duration{0, 1500 * time.Millisecond}, 1, 500)
	if len(got) != 3 {
		t.Fatalf("%d seconds, want 3: %+v", len(got), got)
	}
	if got[0].T != -2 || got[0].WebP99Us != 0 || got[1].T != 0 || got[2].T != 1 {
		t.Errorf("seconds %v %v %v, want -2 (no victims) 0 1", got[0].T, got[1].T, got[2].T)
	}
	s := got[1]
	if s.TopLevel != 1 || s.Share != 0.1 || s.TargetUs != 1500 || s.ProtectedUs != 900 ||
		s.StreamerLvl != 4 || s.StreamerCap != 5e7 || s.StreamerBps != 1e8 || s.WebLevel != 2 ||
		!slices.Equal(s.LightLevels, []int{1, 3}) {
		t.Errorf("daemon's side of second 0: %+v", s)
	}
	if got[0].StreamerIOPS != 0 || math.Abs(s.StreamerIOPS-500) > 1e-6 || math.Abs(got[2].StreamerIOPS-100) > 1e-6 || s.StreamerCapIOPS != 80 ||
		s.CapacityBps != 5e8 || s.CapacityIOPS != 800 {
		t.Errorf("streamer's requests: %v (first sample: no rate) %v %v /s, want 500 and 100; cap %v/s, want 80; capacity %v B/s %v/s",
			got[0].StreamerIOPS, s.StreamerIOPS, got[2].StreamerIOPS, s.StreamerCapIOPS, s.CapacityBps, s.CapacityIOPS)
	}
	if s.WebP99Us != 400 || s.WebMaxUs != 400 || s.LightMaxUs != 10 || s.VictimsSlow != 0 {
		t.Errorf("victims in second 0: %+v", s)
	}
	if s := got[2]; s.WebMaxUs != 900 || s.LightMaxUs != 5000 || s.VictimsSlow != 2 {
		t.Errorf("victims in second 1: %+v (want web max 900, light max 5000, 2 above 500)", s)
	}
}

package devsensor

import "testing"

func TestPeriodSlowed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		p      Period
		refMs  float64
		busy   bool
		slowed bool
	}{
		{"idle", Period{Secs: 1}, 1, false, false},
		{"no period", Period{}, 0, false, false},
		{"busy, as fast as at best", Period{Secs: 1, IOs: 1000, BusyMs: 1000, QueueMs: 1000}, 1, true, false},
		{"busy, each request 1.5x longer", Period{Secs: 1, IOs: 1000, BusyMs: 950, QueueMs: 1500}, 1, true, true},
		{"busy, each request 1.49x longer", Period{Secs: 1, IOs: 1000, BusyMs: 950, QueueMs: 1490}, 1, true, false},
		{"busy at 0.9 exactly, slower", Period{Secs: 0.2, IOs: 10, BusyMs: 180, QueueMs: 400}, 2, true, true},
		{"89 % busy, much slower", Period{Secs: 1, IOs: 10, BusyMs: 890, QueueMs: 1000}, 1, false, false},
		{"busy, no reference yet", Period{Secs: 1, IOs: 10, BusyMs: 1000, QueueMs: 10}, 0, true, true},
		{"busy, nothing completed, no reference", Period{Secs: 1, BusyMs: 1000, QueueMs: 1000}, 0, true, true},
		{"busy, nothing completed, a reference", Period{Secs: 1, BusyMs: 1000, QueueMs: 1000}, 1, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.Busy(); got != c.busy {
				t.Errorf("Busy() = %v, want %v (util %.3f)", got, c.busy, c.p.Util())
			}
			if got := c.p.Slowed(c.refMs); got != c.slowed {
				t.Errorf("Slowed(%g) = %v, want %v (latency %.3f ms)", c.refMs, got, c.slowed, c.p.LatencyMs())
			}
		})
	}
}

package snapshot

import "testing"

// TestErrorCauses: every cause has its own word, so the daemon's counts
// and the metrics' labels cannot collide; a value outside the list is
// "unknown", never a declared word.
func TestErrorCauses(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range ErrorCauses() {
		s := c.String()
		if s == "" || s == "unknown" || seen[s] {
			t.Errorf("cause %d: word %q empty, unknown or repeated", c, s)
		}
		seen[s] = true
	}
	if len(seen) != int(NumErrorCauses) {
		t.Errorf("%d causes listed, want %d", len(seen), NumErrorCauses)
	}
	if s := NumErrorCauses.String(); s != "unknown" {
		t.Errorf("out-of-range cause: %q, want unknown", s)
	}
}

// TestLatencySummary: the worst p99 over disks and directions, in-flight
// summed, and no record without latency.
func TestLatencySummary(t *testing.T) {
	t.Parallel()
	w := &Workload{Latency: []WorkloadLatency{
		{Device: "sda", Read: OpLatency{P99: 0.002, InFlight: 1}, Write: OpLatency{P99: 0.009, InFlight: 2}},
		{Device: "sdb", Read: OpLatency{P99: 0.004, InFlight: 3}},
	}}
	if p99, n, ok := w.LatencySummary(); p99 != 0.009 || n != 6 || !ok {
		t.Errorf("summary %g %d %v, want 0.009 6 true", p99, n, ok)
	}
	if _, _, ok := (&Workload{}).LatencySummary(); ok {
		t.Error("no latency: ok")
	}
}

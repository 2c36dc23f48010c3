package view

import (
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// TestLatencyCells: the P99 and IN-FLIGHT cells of status and top.
func TestLatencyCells(t *testing.T) {
	t.Parallel()
	lat := func(ls ...snapshot.WorkloadLatency) snapshot.Workload { return snapshot.Workload{Latency: ls} }
	for _, c := range []struct {
		w         snapshot.Workload
		p99, infl string
	}{
		{snapshot.Workload{}, "-", "-"},
		{lat(snapshot.WorkloadLatency{Read: snapshot.OpLatency{InFlight: 2}}), "idle", "2"},
		{lat(snapshot.WorkloadLatency{Read: snapshot.OpLatency{P99: 0.000853}}, snapshot.WorkloadLatency{Write: snapshot.OpLatency{P99: 0.0012, InFlight: 1}}), "1.2ms", "1"},
		{lat(snapshot.WorkloadLatency{Read: snapshot.OpLatency{P99: 0.035}}), "35ms", "0"},
		{lat(snapshot.WorkloadLatency{Read: snapshot.OpLatency{P99: 0.000853}}), "853µs", "0"},
		{lat(snapshot.WorkloadLatency{Read: snapshot.OpLatency{P99: 2.1}}), "2.1s", "0"},
	} {
		if p, n := p99(&c.w), inFlight(&c.w); p != c.p99 || n != c.infl {
			t.Errorf("%+v: P99 %q IN-FLIGHT %q, want %q %q", c.w.Latency, p, n, c.p99, c.infl)
		}
	}
}

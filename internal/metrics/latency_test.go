package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// TestLatencyCollector: per device, operation and level one histogram of
// the snapshot's cumulative counts and one bytes counter; the sensor's
// availability and its lost requests; only the availability (0) when it
// is unavailable; nothing without a latency stage or with it off.
func TestLatencyCollector(t *testing.T) {
	t.Parallel()
	snap := &snapshot.Snapshot{Latency: &snapshot.Latency{Available: true, Buckets: []float64{0.001, 0.01}, Uncounted: 4,
		Series: []snapshot.LatencySeries{
			{Device: "sda", Dev: "8:0", Operation: "read", Level: "1", Requests: 10, Bytes: 40960, Sum: 0.02, Counts: []uint64{6, 9}},
			{Device: "sda", Dev: "8:0", Operation: "read", Level: "other", Requests: 2, Bytes: 8192, Sum: 0.5, Counts: []uint64{0, 0}},
		}}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newLatencyCollector(snapshot.Fixed(func() *snapshot.Snapshot { return snap })))
	want := `
# HELP ddiskqos_io_bytes_total Bytes of the requests completed on the device by the workloads at the level (eBPF, as io_latency_seconds).
# TYPE ddiskqos_io_bytes_total counter
ddiskqos_io_bytes_total{device="sda",level="1",operation="read"} 40960
ddiskqos_io_bytes_total{device="sda",level="other",operation="read"} 8192
# HELP ddiskqos_io_latency_available 1 while the I/O latency sensor (eBPF) runs, 0 when it is unavailable (ddiskqos check says why: latency.ebpf); absent when it is off by configuration (latency: off).
# TYPE ddiskqos_io_latency_available gauge
ddiskqos_io_latency_available 1
# HELP ddiskqos_io_latency_lost_requests_total Requests the I/O latency sensor could not account: reason uncounted (its table of cgroups full), untimed (its table of requests in flight full), missed (block events the kernel skipped it for: an interrupt while it ran).
# TYPE ddiskqos_io_latency_lost_requests_total counter
ddiskqos_io_latency_lost_requests_total{reason="missed"} 0
ddiskqos_io_latency_lost_requests_total{reason="uncounted"} 4
ddiskqos_io_latency_lost_requests_total{reason="untimed"} 0
# HELP ddiskqos_io_latency_seconds Time of the requests completed on the device by the workloads at the level, from the request's allocation (or issue) to its completion, measured in the kernel (eBPF); level other: cgroups that are no workload.
# TYPE ddiskqos_io_latency_seconds histogram
ddiskqos_io_latency_seconds_bucket{device="sda",level="1",operation="read",le="0.001"} 6
ddiskqos_io_latency_seconds_bucket{device="sda",level="1",operation="read",le="0.01"} 9
ddiskqos_io_latency_seconds_bucket{device="sda",level="1",operation="read",le="+Inf"} 10
ddiskqos_io_latency_seconds_sum{device="sda",level="1",operation="read"} 0.02
ddiskqos_io_latency_seconds_count{device="sda",level="1",operation="read"} 10
ddiskqos_io_latency_seconds_bucket{device="sda",level="other",operation="read",le="0.001"} 0
ddiskqos_io_latency_seconds_bucket{device="sda",level="other",operation="read",le="0.01"} 0
ddiskqos_io_latency_seconds_bucket{device="sda",level="other",operation="read",le="+Inf"} 2
ddiskqos_io_latency_seconds_sum{device="sda",level="other",operation="read"} 0.5
ddiskqos_io_latency_seconds_count{device="sda",level="other",operation="read"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	snap.Latency = &snapshot.Latency{Reason: "no BTF"}
	if n := testutil.CollectAndCount(newLatencyCollector(snapshot.Fixed(func() *snapshot.Snapshot { return snap }))); n != 1 {
		t.Errorf("unavailable: %d series, want 1 (available 0)", n)
	}
	snap.Latency = &snapshot.Latency{Off: true, Reason: "off by configuration (latency: off)"}
	if n := testutil.CollectAndCount(newLatencyCollector(snapshot.Fixed(func() *snapshot.Snapshot { return snap }))); n != 0 {
		t.Errorf("off by configuration: %d series, want none (an alert on available 0 would fire for a choice)", n)
	}
	snap.Latency = nil
	if n := testutil.CollectAndCount(newLatencyCollector(snapshot.Fixed(func() *snapshot.Snapshot { return snap }))); n != 0 {
		t.Errorf("no latency stage: %d series, want none", n)
	}
}

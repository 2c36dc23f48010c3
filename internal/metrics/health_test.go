package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

func TestHealthCollector(t *testing.T) {
	t.Parallel()
	tte, blocked := 42.5, uint64(3)
	snap := &snapshot.Snapshot{At: time.Unix(1e9, 0),
		Workloads: []*snapshot.Workload{{ID: "a", Name: "stalled", DTasks: 2}, {ID: "b", Name: "fine"}},
		Health: &snapshot.Health{BlockedTasks: &blocked,
			Devices: []snapshot.DeviceHealth{{Name: "vdb", State: "draining", IOPS: 100, Bps: 409600, Util: 0.5, QueueDepth: 1.5,
				ReadIOs: 1000, WriteIOs: 20, ReadBytes: 4096000, WriteBytes: 81920, IOTime: 12.5, IOTimeWeighted: 31.25,
				Model: &snapshot.BurstModel{Name: "plain", Balance: 0.25, DrainIOPS: 80, SecondsToEmpty: &tte},
				Hold:  &snapshot.BurstHold{Held: true, Below: 0.3, Release: 0.4, FromLevel: 2, CapIOPS: 20}}},
			Probe: &snapshot.SyncProbe{Path: "/var/tmp/p", Count: 3, Sum: 0.012, Buckets: []float64{0.001, 0.01}, Counts: []uint64{1, 2}, Pending: 0.5}}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newHealthCollector(snapshot.Fixed(func() *snapshot.Snapshot { return snap })))
	want := `
# HELP ddiskqos_device_burst_seconds_to_empty Seconds until the modelled burst bucket is empty at the present drain; absent while not draining.
# TYPE ddiskqos_device_burst_seconds_to_empty gauge
ddiskqos_device_burst_seconds_to_empty{device="vdb"} 42.5
# HELP ddiskqos_device_burst_hold 1 while the device's worse levels are held to its baseline because its modelled burst balance ran low, else 0 (devices with a model and the hold configured).
# TYPE ddiskqos_device_burst_hold gauge
ddiskqos_device_burst_hold{device="vdb"} 1
# HELP ddiskqos_host_blocked_tasks Tasks of the host in uninterruptible sleep waiting for I/O (/proc/stat procs_blocked).
# TYPE ddiskqos_host_blocked_tasks gauge
ddiskqos_host_blocked_tasks 3
# HELP ddiskqos_workload_dstate_tasks Tasks of the workload in uninterruptible sleep (D state) when last looked at; only workloads with some.
# TYPE ddiskqos_workload_dstate_tasks gauge
ddiskqos_workload_dstate_tasks{id="a",name="stalled"} 2
# HELP ddiskqos_sync_write_probe_seconds Latency of the sync-write probe: 4 KiB written with O_DSYNC to the configured file.
# TYPE ddiskqos_sync_write_probe_seconds histogram
ddiskqos_sync_write_probe_seconds_bucket{path="/var/tmp/p",le="0.001"} 1
ddiskqos_sync_write_probe_seconds_bucket{path="/var/tmp/p",le="0.01"} 2
ddiskqos_sync_write_probe_seconds_bucket{path="/var/tmp/p",le="+Inf"} 3
ddiskqos_sync_write_probe_seconds_sum{path="/var/tmp/p"} 0.012
ddiskqos_sync_write_probe_seconds_count{path="/var/tmp/p"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ddiskqos_device_burst_seconds_to_empty", "ddiskqos_device_burst_hold",
		"ddiskqos_host_blocked_tasks", "ddiskqos_workload_dstate_tasks", "ddiskqos_sync_write_probe_seconds"); err != nil {
		t.Error(err)
	}
	states := `
# HELP ddiskqos_device_health_state Health of the device from its own counters: 1 for the state it is in (normal, draining, exhausted: a steady floor while busy, recovering), 0 for the others.
# TYPE ddiskqos_device_health_state gauge
ddiskqos_device_health_state{device="vdb",state="draining"} 1
ddiskqos_device_health_state{device="vdb",state="exhausted"} 0
ddiskqos_device_health_state{device="vdb",state="normal"} 0
ddiskqos_device_health_state{device="vdb",state="recovering"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(states), "ddiskqos_device_health_state"); err != nil {
		t.Error(err)
	}
	// The device's own counters are counters (rate() gives the last
	// tick's gauges they replace), per operation as the workloads' are.
	disk := `
# HELP ddiskqos_device_disk_io_bytes_total Bytes the device read or wrote, from its own counters (/sys/block/<dev>/stat: every process's I/O, not only the workloads').
# TYPE ddiskqos_device_disk_io_bytes_total counter
ddiskqos_device_disk_io_bytes_total{device="vdb",operation="read"} 4.096e+06
ddiskqos_device_disk_io_bytes_total{device="vdb",operation="write"} 81920
# HELP ddiskqos_device_disk_io_operations_total Requests the device completed, from its own counters (/sys/block/<dev>/stat: every process's I/O, not only the workloads').
# TYPE ddiskqos_device_disk_io_operations_total counter
ddiskqos_device_disk_io_operations_total{device="vdb",operation="read"} 1000
ddiskqos_device_disk_io_operations_total{device="vdb",operation="write"} 20
# HELP ddiskqos_device_disk_io_time_seconds_total Time the device had I/O in flight (io_ticks); its rate is the utilisation.
# TYPE ddiskqos_device_disk_io_time_seconds_total counter
ddiskqos_device_disk_io_time_seconds_total{device="vdb"} 12.5
# HELP ddiskqos_device_disk_io_time_weighted_seconds_total Time the device had I/O in flight weighted by the requests in flight (time_in_queue); its rate is the mean queue depth.
# TYPE ddiskqos_device_disk_io_time_weighted_seconds_total counter
ddiskqos_device_disk_io_time_weighted_seconds_total{device="vdb"} 31.25
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(disk), "ddiskqos_device_disk_io_bytes_total", "ddiskqos_device_disk_io_operations_total",
		"ddiskqos_device_disk_io_time_seconds_total", "ddiskqos_device_disk_io_time_weighted_seconds_total"); err != nil {
		t.Error(err)
	}
	snap.Health = nil
	if n := testutil.CollectAndCount(newHealthCollector(snapshot.Fixed(func() *snapshot.Snapshot { return snap }))); n != 1 {
		t.Errorf("without health: %d series, want the one D-state workload", n)
	}
}

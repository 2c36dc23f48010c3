package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// healthCollector sends the storage-health series of the newest snapshot:
// per device (label device) its state, its own counters (requests and
// bytes completed, time busy, that time weighted by the queue: rate()
// gives the IOPS, throughput, utilisation and mean queue depth) and,
// with a burst model, the balance, drain and time to empty; the host's
// blocked tasks; the sync-write probe as a histogram; per workload the
// tasks in D state (only workloads that have some: a 0 for each of
// 10,000 idle containers would be noise).
type healthCollector struct {
	current snapshot.Acquirer

	state, ops, bytes, ioTime, ioTimeWeighted, balance, drain, tte, hold, blocked, probe, probePending, dtasks *prometheus.Desc
}

var healthStates = []string{"normal", "draining", "exhausted", "recovering"}

func newHealthCollector(current snapshot.Acquirer) *healthCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
	}
	return &healthCollector{current: current,
		state: d("device_health_state",
			"Health of the device from its own counters: 1 for the state it is in (normal, draining, exhausted: a steady floor while busy, recovering), 0 for the others.",
			"device", "state"),
		ops: d("device_disk_io_operations_total",
			"Requests the device completed, from its own counters (/sys/block/<dev>/stat: every process's I/O, not only the workloads').", "device", "operation"),
		bytes: d("device_disk_io_bytes_total",
			"Bytes the device read or wrote, from its own counters (/sys/block/<dev>/stat: every process's I/O, not only the workloads').", "device", "operation"),
		ioTime: d("device_disk_io_time_seconds_total",
			"Time the device had I/O in flight (io_ticks); its rate is the utilisation.", "device"),
		ioTimeWeighted: d("device_disk_io_time_weighted_seconds_total",
			"Time the device had I/O in flight weighted by the requests in flight (time_in_queue); its rate is the mean queue depth.", "device"),
		balance: d("device_burst_balance_ratio", "Modelled burst-credit balance, 0..1 of the bucket that runs out first (devices with a burst model).", "device"),
		drain: d("device_burst_drain_per_second",
			"Modelled net burst credit spent per second, in I/Os (unit iops) or bytes (unit bytes); negative while refilling.", "device", "unit"),
		tte: d("device_burst_seconds_to_empty",
			"Seconds until the modelled burst bucket is empty at the present drain; absent while not draining.", "device"),
		hold: d("device_burst_hold",
			"1 while the device's worse levels are held to its baseline because its modelled burst balance ran low, else 0 (devices with a model and the hold configured).",
			"device"),
		blocked: d("host_blocked_tasks", "Tasks of the host in uninterruptible sleep waiting for I/O (/proc/stat procs_blocked)."),
		probe: d("sync_write_probe_seconds",
			"Latency of the sync-write probe: 4 KiB written with O_DSYNC to the configured file.", "path"),
		probePending: d("sync_write_probe_pending_seconds",
			"How long the probe's write in progress has waited; 0 when none is (a hung write shows here).", "path"),
		dtasks: d("workload_dstate_tasks",
			"Tasks of the workload in uninterruptible sleep (D state) when last looked at; only workloads with some.", "id", "name"),
	}
}

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.ops, c.bytes, c.ioTime, c.ioTimeWeighted, c.balance, c.drain, c.tte, c.hold, c.blocked, c.probe, c.probePending, c.dtasks} {
		ch <- d
	}
}

func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	s, release := c.current()
	defer release()
	if s == nil {
		return
	}
	const (
		gauge   = prometheus.GaugeValue
		counter = prometheus.CounterValue
	)
	for _, w := range s.Workloads {
		if w.DTasks > 0 {
			ch <- prometheus.MustNewConstMetric(c.dtasks, gauge, float64(w.DTasks), validUTF8(w.ID), validUTF8(w.Name))
		}
	}
	h := s.Health
	if h == nil {
		return
	}
	for i := range h.Devices {
		d := &h.Devices[i]
		name := validUTF8(d.Name)
		for _, st := range healthStates {
			v := 0.0
			if st == d.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, gauge, v, name, st)
		}
		ch <- prometheus.MustNewConstMetric(c.ops, counter, float64(d.ReadIOs), name, "read")
		ch <- prometheus.MustNewConstMetric(c.ops, counter, float64(d.WriteIOs), name, "write")
		ch <- prometheus.MustNewConstMetric(c.bytes, counter, float64(d.ReadBytes), name, "read")
		ch <- prometheus.MustNewConstMetric(c.bytes, counter, float64(d.WriteBytes), name, "write")
		ch <- prometheus.MustNewConstMetric(c.ioTime, counter, d.IOTime, name)
		ch <- prometheus.MustNewConstMetric(c.ioTimeWeighted, counter, d.IOTimeWeighted, name)
		if m := d.Model; m != nil {
			ch <- prometheus.MustNewConstMetric(c.balance, gauge, m.Balance, name)
			ch <- prometheus.MustNewConstMetric(c.drain, gauge, m.DrainIOPS, name, "iops")
			ch <- prometheus.MustNewConstMetric(c.drain, gauge, m.DrainBps, name, "bytes")
			if m.SecondsToEmpty != nil {
				ch <- prometheus.MustNewConstMetric(c.tte, gauge, *m.SecondsToEmpty, name)
			}
		}
		if hd := d.Hold; hd != nil {
			v := 0.0
			if hd.Held {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.hold, gauge, v, name)
		}
	}
	if h.BlockedTasks != nil {
		ch <- prometheus.MustNewConstMetric(c.blocked, gauge, float64(*h.BlockedTasks))
	}
	if p := h.Probe; p != nil {
		buckets := make(map[float64]uint64, len(p.Buckets))
		for i, b := range p.Buckets {
			buckets[b] = p.Counts[i]
		}
		path := validUTF8(p.Path)
		ch <- prometheus.MustNewConstHistogram(c.probe, p.Count, p.Sum, buckets, path)
		ch <- prometheus.MustNewConstMetric(c.probePending, gauge, p.Pending, path)
	}
}

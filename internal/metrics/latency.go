package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// latencyCollector sends the I/O latency sensor's series of the newest
// snapshot: per device, operation and level (0..4, or other: cgroups that
// are no workload) the histogram of the requests' times and their bytes,
// and whether the sensor runs. Per level, not per workload: at 10,000
// workloads a histogram each would be 10,000 × 2 × 25 series; per level it
// is at most devices × 2 operations × 6 levels histograms.
type latencyCollector struct {
	current snapshot.Acquirer

	latency, bytes, up, lost *prometheus.Desc
}

func newLatencyCollector(current snapshot.Acquirer) *latencyCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
	}
	return &latencyCollector{current: current,
		latency: d("io_latency_seconds",
			"Time of the requests completed on the device by the workloads at the level, from the request's allocation (or issue) to its completion, measured in the kernel (eBPF); level other: cgroups that are no workload.",
			"device", labelOperation, "level"),
		bytes: d("io_bytes_total",
			"Bytes of the requests completed on the device by the workloads at the level (eBPF, as io_latency_seconds).",
			"device", labelOperation, "level"),
		up: d("io_latency_available",
			"1 while the I/O latency sensor (eBPF) runs, 0 when it is unavailable (ddiskqos check says why: latency.ebpf); absent when it is off by configuration (latency: off)."),
		lost: d("io_latency_lost_requests_total",
			"Requests the I/O latency sensor could not account: reason uncounted (its table of cgroups full), untimed (its table of requests in flight full), missed (block events the kernel skipped it for: an interrupt while it ran).",
			"reason"),
	}
}

func (c *latencyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.latency, c.bytes, c.up, c.lost} {
		ch <- d
	}
}

func (c *latencyCollector) Collect(ch chan<- prometheus.Metric) {
	s, release := c.current()
	defer release()
	if s == nil || s.Latency == nil || s.Latency.Off {
		return // no stage, or off by configuration: not a sensor that failed
	}
	l := s.Latency
	up := 0.0
	if l.Available {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
	if !l.Available {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.lost, prometheus.CounterValue, float64(l.Uncounted), "uncounted")
	ch <- prometheus.MustNewConstMetric(c.lost, prometheus.CounterValue, float64(l.Untimed), "untimed")
	ch <- prometheus.MustNewConstMetric(c.lost, prometheus.CounterValue, float64(l.Missed), "missed")
	for i := range l.Series {
		se := &l.Series[i]
		if len(se.Counts) != len(l.Buckets) {
			continue // not made by the daemon
		}
		buckets := make(map[float64]uint64, len(l.Buckets))
		for j, b := range l.Buckets {
			buckets[b] = se.Counts[j]
		}
		dev, op, lv := validUTF8(se.Device), validUTF8(se.Operation), validUTF8(se.Level)
		ch <- prometheus.MustNewConstHistogram(c.latency, se.Requests, se.Sum, buckets, dev, op, lv)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(se.Bytes), dev, op, lv)
	}
}

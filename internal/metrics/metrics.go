// Package metrics is the daemon's Prometheus face: the few metrics the loop
// updates as it runs (tick duration, errors, level changes) and a collector
// that turns the newest snapshot into per-workload and per-device series at
// scrape time.
//
// Nothing here is updated per workload per tick: that would be a label
// lookup per series per workload each tick, for series read once a scrape.
// The snapshot already holds every number, so the collector reads it only
// when Prometheus asks.
package metrics

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

const namespace = "ddiskqos"

// levelLabels are the label values of levels 0..4, so hot paths format no
// integers.
var levelLabels = [...]string{"0", "1", "2", "3", "4"}

func levelLabel(l int) string {
	if l >= 0 && l < len(levelLabels) {
		return levelLabels[l]
	}
	return strconv.Itoa(l)
}

// Metrics holds the metrics the daemon loop updates. Its methods are safe
// for concurrent use; a nil *Metrics ignores every call, so code under test
// can run without one.
type Metrics struct {
	tick         prometheus.Histogram
	errors       [snapshot.NumErrorCauses]prometheus.Counter
	levelChanges *prometheus.CounterVec
	sensed       [3]prometheus.Counter // read, kernel, skipped
}

// New registers on reg the process and Go collectors, the loop's own
// metrics and a collector that reads current() at each scrape for the
// host-wide snapshot series (workloads per level, devices, host PSI).
// The per-workload series (ddiskqos_workload_*) are not on reg: serve
// reg with Handler, which adds them. current may return nil before the
// first tick; the snapshot series are then absent.
func New(reg prometheus.Registerer, current snapshot.Acquirer) (*Metrics, error) {
	if current == nil {
		return nil, fmt.Errorf("metrics: current snapshot func is nil")
	}
	m := &Metrics{
		tick: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "tick_duration_seconds",
			Help:      "Time one daemon tick took: sense, decide, actuate.",
			// 100µs (a few containers) .. 2s (10,000 containers on a slow disk).
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2},
		}),
		levelChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "level_changes_total",
			Help:      "Workload level changes by old level, new level and reason (0 is exempt).",
		}, []string{"from", "to", "reason"}),
	}
	// Every cause the daemon can count is declared here, at zero, so a
	// rate() over them works before the first error.
	errors := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "scan_errors_total",
		Help:      "Errors of the daemon loop by cause (" + causeList() + ").",
	}, []string{"cause"})
	for _, c := range snapshot.ErrorCauses() {
		m.errors[c] = errors.WithLabelValues(c.String())
	}
	sensed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "sense_workloads_total",
		Help:      "Workloads per tick whose counter files were read (read), whose reading was taken from the I/O latency sensor's kernel maps instead (kernel), or skipped because they have been quiet (adaptive polling), summed over ticks.",
	}, []string{"result"})
	m.sensed = [3]prometheus.Counter{sensed.WithLabelValues("read"), sensed.WithLabelValues("kernel"), sensed.WithLabelValues("skipped")}
	for _, c := range []prometheus.Collector{
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
		m.tick,
		errors,
		sensed,
		m.levelChanges,
		// The per-workload families are not registered: Handler writes
		// them straight from the snapshot.
		newCollector(current, onlyHost),
		newHealthCollector(current),  // health.go
		newLatencyCollector(current), // latency.go
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	return m, nil
}

// ObserveTick records how long one tick took.
func (m *Metrics) ObserveTick(d time.Duration) {
	if m == nil {
		return
	}
	m.tick.Observe(d.Seconds())
}

// ObserveSense records one tick's sensing: how many workloads' counter
// files were read, how many readings were taken from the kernel's maps
// instead, and how many were skipped because they have been quiet.
func (m *Metrics) ObserveSense(read, kernel, skipped int) {
	if m == nil {
		return
	}
	// A counter's Add panics on a negative value: a caller's bad count
	// must cost a sample, never the daemon.
	for i, n := range [...]int{read, kernel, skipped} {
		if n > 0 {
			m.sensed[i].Add(float64(n))
		}
	}
}

// Error counts one error of the daemon loop. A cause outside
// snapshot.ErrorCauses (none can be made but by conversion) is dropped.
func (m *Metrics) Error(cause snapshot.ErrorCause) {
	if m == nil || cause >= snapshot.NumErrorCauses {
		return
	}
	m.errors[cause].Inc()
}

// causeList is the causes for the help text: "sense, actuate, ...".
func causeList() string {
	var b strings.Builder
	for i, c := range snapshot.ErrorCauses() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.String())
	}
	return b.String()
}

// LevelChange counts one workload moving from one level to another (0 is
// exempt). reason is a short, fixed word: the policy's reason (new,
// allowance-used, boost, pinned, unpinned, exempt, unexempt).
func (m *Metrics) LevelChange(from, to int, reason string) {
	if m == nil {
		return
	}
	m.levelChanges.WithLabelValues(levelLabel(from), levelLabel(to), reason).Inc()
}

// WatchSource registers on reg, for the workload source called name, the
// counter ddiskqos_source_errors_total{source=name} read from errors (how
// often the source lost its backend, e.g. the Docker engine) and the gauge
// ddiskqos_source_up{source=name}, 1 while healthy() and 0 otherwise. Both
// are read at scrape time; the functions must be safe for concurrent use.
func WatchSource(reg prometheus.Registerer, name string, errors func() uint64, healthy func() bool) error {
	labels := prometheus.Labels{"source": name}
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: namespace, Name: "source_errors_total", ConstLabels: labels,
			Help: "Times the workload source could not reach its backend (the Docker engine lost or refusing).",
		}, func() float64 { return float64(errors()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace, Name: "source_up", ConstLabels: labels,
			Help: "1 while the workload source reaches its backend, 0 while it is degraded (see /healthz).",
		}, func() float64 {
			if healthy() {
				return 1
			}
			return 0
		}),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics: register source %s: %w", name, err)
		}
	}
	return nil
}

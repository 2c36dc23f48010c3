package metrics

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// Collector turns the newest snapshot into series at scrape time. Make one
// with NewCollector; New registers one for you.
type Collector struct {
	current snapshot.Acquirer
	part    part

	info, workloads, byLevel, lastTick                  *prometheus.Desc
	wlLevel, wlBytes, wlIOs, wlInLevel, wlWeight        *prometheus.Desc
	wlWaiting, wlStalled, wlCap                         *prometheus.Desc
	devInfo, devTopLevel, devBytes, devCap, devCapacity *prometheus.Desc
	devTarget, devP99, devShare                         *prometheus.Desc
	hostWaiting, hostStalled                            *prometheus.Desc
}

// NewCollector returns a collector reading current() on every Collect,
// released before Collect returns. current may return nil (before the
// first tick): no snapshot series then.
func NewCollector(current snapshot.Acquirer) *Collector {
	return newCollector(current, allSeries)
}

// part is which of the snapshot's series a Collector sends.
type part uint8

const (
	allSeries     part = iota
	onlyHost           // no ddiskqos_workload_* family (New: the handler writes those)
	onlyWorkloads      // only the ddiskqos_workload_* families
)

// Help texts of the per-workload families, shared by the Collector and
// the text writer (workloadtext.go).
const (
	helpWlLevel    = "Level of the workload, 1 (best served) .. 4; 0 when exempt."
	helpWlBytes    = "Bytes the workload read or wrote since the daemon began tracking it."
	helpWlIOs      = "I/O operations the workload did since the daemon began tracking it."
	helpWlInLevel  = "Bytes the workload moved since it entered its current level (counted against the level's allowance)."
	helpWlWeight   = "I/O weight (10..1000) the workload's level maps to; 0 when exempt."
	helpWlWaiting  = "Time at least one of the workload's tasks waited on I/O (cgroup io.pressure, some)."
	helpWlStalled  = "Time all of the workload's tasks stalled on I/O at once (cgroup io.pressure, full)."
	helpWlCap      = "Byte-rate cap the throttle has in force on the workload on a device it used, at the last tick; only workloads capped now carry the series."
	labelOperation = "operation"
)

func newCollector(current snapshot.Acquirer, p part) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
	}
	return &Collector{
		current: current,
		part:    p,
		info: d("info",
			"The daemon's configuration: workload source, actuator, cgroup mode, dry run; always 1.",
			"source", "actuator", "cgroup_mode", "dry_run"),
		workloads: d("workloads", "Workloads (containers or cgroups) the daemon tracks."),
		byLevel: d("workloads_by_level",
			"Workloads per level; level 0 is exempt, 1 the best served, 4 the bulk level.", "level"),
		lastTick: d("last_tick_timestamp_seconds",
			"Unix time the last published tick ended."),
		wlLevel:   d("workload_level", helpWlLevel, "id", "name"),
		wlBytes:   d("workload_io_bytes_total", helpWlBytes, "id", "name", labelOperation),
		wlIOs:     d("workload_io_operations_total", helpWlIOs, "id", "name", labelOperation),
		wlInLevel: d("workload_level_used_bytes", helpWlInLevel, "id", "name"),
		wlWeight:  d("workload_weight", helpWlWeight, "id", "name"),
		wlWaiting: d("workload_pressure_io_waiting_seconds_total", helpWlWaiting, "id", "name"),
		wlStalled: d("workload_pressure_io_stalled_seconds_total", helpWlStalled, "id", "name"),
		wlCap:     d("workload_cap_bytes_per_second", helpWlCap, "id", "name", "device", labelOperation),
		devInfo: d("device_info",
			"A block device the daemon actuates on, with its scheduler and the mechanism in use; always 1.",
			"device", "major", "minor", "scheduler", "mechanism", "weights_effective"),
		devTopLevel: d("device_top_active_level",
			"Best level that did I/O on the device in the last tick; 0 when idle.", "device"),
		devBytes: d("device_io_bytes_total",
			"Bytes the managed workloads read or wrote on the device since the daemon started.", "device", labelOperation),
		devCap: d("device_level_cap_bytes_per_second",
			"Sum of the byte-rate caps the throttle had in force on the level's workloads on the device at the last tick; absent while the level is not capped.",
			"device", "level", labelOperation),
		devCapacity: d("device_capacity_bytes_per_second",
			"The device's byte rate as the throttle estimates it from the device's own counters (what the caps are shares of); absent before it measured or without a throttle.",
			"device"),
		devTarget: d("device_latency_target_seconds",
			"The p99 the latency controller holds the device's protected requests to (learned: 2x their unloaded p99, at least 500 µs, or latency_target); absent without the controller or before it learned.",
			"device"),
		devP99: d("device_protected_p99_seconds",
			"The last p99 of the device's protected requests (small requests of workloads no cap held) the latency controller measured; absent without the controller.",
			"device"),
		devShare: d("device_capped_share_ratio",
			"Share of the device's capacity the latency controller gives the capped workloads together (0..1); absent without the controller (the throttle's fixed share then).",
			"device"),
		hostWaiting: d("host_pressure_io_waiting_seconds_total",
			"Time at least one task of the host waited on I/O (/proc/pressure/io, some)."),
		hostStalled: d("host_pressure_io_stalled_seconds_total",
			"Time all non-idle tasks of the host stalled on I/O at once (/proc/pressure/io, full)."),
	}
}

// Describe sends every descriptor the collector may emit.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	if c.part != onlyWorkloads {
		for _, d := range []*prometheus.Desc{c.info, c.workloads, c.byLevel, c.lastTick,
			c.devInfo, c.devTopLevel, c.devBytes, c.devCap, c.devCapacity, c.devTarget, c.devP99, c.devShare, c.hostWaiting, c.hostStalled} {
			ch <- d
		}
	}
	if c.part != onlyHost {
		for _, d := range []*prometheus.Desc{c.wlLevel, c.wlBytes, c.wlIOs, c.wlInLevel, c.wlWeight, c.wlWaiting, c.wlStalled, c.wlCap} {
			ch <- d
		}
	}
}

// Collect reads the current snapshot once and sends its series.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s, release := c.current()
	defer release()
	if s == nil {
		return
	}
	if c.part != onlyHost {
		// Emit workloads in ID order: the registry sorts each family by
		// label values (id first), and sorting already-sorted input is
		// linear.
		for _, i := range idOrder(s) {
			c.collectWorkload(ch, s.Workloads[i])
		}
	}
	if c.part == onlyWorkloads {
		return
	}
	const (
		gauge   = prometheus.GaugeValue
		counter = prometheus.CounterValue
	)
	ch <- prometheus.MustNewConstMetric(c.info, gauge, 1,
		validUTF8(s.Source), validUTF8(s.Actuator), validUTF8(s.CgroupMode), strconv.FormatBool(s.DryRun))
	ch <- prometheus.MustNewConstMetric(c.workloads, gauge, float64(len(s.Workloads)))
	for l, n := range s.Levels {
		ch <- prometheus.MustNewConstMetric(c.byLevel, gauge, float64(n), levelLabels[l])
	}
	if !s.At.IsZero() {
		ch <- prometheus.MustNewConstMetric(c.lastTick, gauge, float64(s.At.UnixNano())/1e9)
	}
	caps := levelCaps(s)
	for i := range s.Devices {
		d := &s.Devices[i]
		name := validUTF8(d.Name)
		major, minor, _ := strings.Cut(validUTF8(d.Dev), ":")
		ch <- prometheus.MustNewConstMetric(c.devInfo, gauge, 1,
			name, major, minor, validUTF8(d.Scheduler), validUTF8(d.Mechanism), strconv.FormatBool(d.WeightsEffective))
		ch <- prometheus.MustNewConstMetric(c.devTopLevel, gauge, float64(d.TopActiveLevel), name)
		ch <- prometheus.MustNewConstMetric(c.devBytes, counter, float64(d.ReadBytes), name, valRead)
		ch <- prometheus.MustNewConstMetric(c.devBytes, counter, float64(d.WriteBytes), name, valWrite)
		if d.CapacityBps > 0 {
			ch <- prometheus.MustNewConstMetric(c.devCapacity, gauge, d.CapacityBps, name)
		}
		if d.LatencyTarget > 0 {
			ch <- prometheus.MustNewConstMetric(c.devTarget, gauge, d.LatencyTarget, name)
		}
		if d.ProtectedP99 > 0 {
			ch <- prometheus.MustNewConstMetric(c.devP99, gauge, d.ProtectedP99, name)
		}
		if d.CappedShare > 0 {
			ch <- prometheus.MustNewConstMetric(c.devShare, gauge, d.CappedShare, name)
		}
		lcs := caps[d.Name]
		if lcs == nil {
			continue
		}
		for l, lc := range lcs {
			if lc.read > 0 {
				ch <- prometheus.MustNewConstMetric(c.devCap, gauge, float64(lc.read), name, levelLabel(l), valRead)
			}
			if lc.write > 0 {
				ch <- prometheus.MustNewConstMetric(c.devCap, gauge, float64(lc.write), name, levelLabel(l), valWrite)
			}
		}
	}
	if p := s.HostPressure; p != nil {
		ch <- prometheus.MustNewConstMetric(c.hostWaiting, counter, usToSeconds(p.SomeTotal))
		ch <- prometheus.MustNewConstMetric(c.hostStalled, counter, usToSeconds(p.FullTotal))
	}
}

// levelCap is the sum of the byte-rate caps in force on one level's
// workloads on one device.
type levelCap struct{ read, write uint64 }

// levelCaps sums the throttle's caps in force per device and level. Only
// throttled workloads have any, so the map stays empty on weight
// mechanisms; the walk is over each workload's few Applied entries.
func levelCaps(s *snapshot.Snapshot) map[string]*[len(levelLabels)]levelCap {
	var caps map[string]*[len(levelLabels)]levelCap
	for _, w := range s.Workloads {
		if w.Level < 0 || w.Level >= len(levelLabels) {
			continue
		}
		for _, a := range w.Applied {
			if !a.Throttled {
				continue
			}
			if caps == nil {
				caps = map[string]*[len(levelLabels)]levelCap{}
			}
			lc := caps[a.Device]
			if lc == nil {
				lc = new([len(levelLabels)]levelCap)
				caps[a.Device] = lc
			}
			lc[w.Level].read += a.ReadBps
			lc[w.Level].write += a.WriteBps
		}
	}
	return caps
}

// Static label pairs shared by every workload's series.
var (
	labelID, labelName, labelOp = "id", "name", labelOperation
	valRead, valWrite           = "read", "write"

	pairRead  = &dto.LabelPair{Name: &labelOp, Value: &valRead}
	pairWrite = &dto.LabelPair{Name: &labelOp, Value: &valWrite}
)

// workloadSeries holds every series of one workload in one allocation:
// the id and name label pairs are built once and shared by its nine
// series, where MustNewConstMetric would build and sort them nine times.
type workloadSeries struct {
	id, name   string
	idPair     dto.LabelPair
	namePair   dto.LabelPair
	labels     [8]*dto.LabelPair // [id name] [id name read] [id name write]
	samples    [9]sample
	numSamples int
}

func (c *Collector) collectWorkload(ch chan<- prometheus.Metric, w *snapshot.Workload) {
	// Label values must be UTF-8 or the registry rejects the series; a
	// cgroup directory name need not be.
	ws := &workloadSeries{id: validUTF8(w.ID), name: validUTF8(w.Name)}
	ws.idPair = dto.LabelPair{Name: &labelID, Value: &ws.id}
	ws.namePair = dto.LabelPair{Name: &labelName, Value: &ws.name}
	l := &ws.labels
	id, name := &ws.idPair, &ws.namePair
	*l = [8]*dto.LabelPair{id, name, id, name, pairRead, id, name, pairWrite}
	plain, read, write := l[0:2], l[2:5], l[5:8]

	add := func(d *prometheus.Desc, counter bool, v float64, labels []*dto.LabelPair) {
		smp := &ws.samples[ws.numSamples]
		ws.numSamples++
		smp.desc, smp.counter, smp.value, smp.labels = d, counter, v, labels
		ch <- smp
	}
	add(c.wlLevel, false, float64(w.Level), plain)
	add(c.wlBytes, true, float64(w.ReadBytes), read)
	add(c.wlBytes, true, float64(w.WriteBytes), write)
	add(c.wlIOs, true, float64(w.ReadIOs), read)
	add(c.wlIOs, true, float64(w.WriteIOs), write)
	add(c.wlInLevel, false, float64(w.BytesInLevel), plain)
	add(c.wlWeight, false, float64(w.Weight), plain)
	if p := w.Pressure; p != nil {
		add(c.wlWaiting, true, usToSeconds(p.SomeTotal), plain)
		add(c.wlStalled, true, usToSeconds(p.FullTotal), plain)
	}
	for _, cp := range capsOf(w) {
		ch <- prometheus.MustNewConstMetric(c.wlCap, prometheus.GaugeValue, float64(cp.bps), ws.id, ws.name, cp.device, cp.op)
	}
}

// workloadCap is one series of ddiskqos_workload_cap_bytes_per_second.
type workloadCap struct {
	device, op string
	bps        uint64
}

// capsOf is the caps in force on w: per device it used (Applied.Used)
// and direction with a cap, none for every other workload. What bounds
// the series at 10,000 workloads: a workload carries them only while
// the throttle caps it on a disk it does I/O on — a demoted stream while
// a better level is active there — so an idle host has none, and a busy
// one a few per capped stream, not one per workload and device.
func capsOf(w *snapshot.Workload) []workloadCap {
	var out []workloadCap
	for _, a := range w.Applied {
		if !a.Throttled || !a.Used {
			continue
		}
		dev := validUTF8(a.Device)
		if a.ReadBps > 0 {
			out = append(out, workloadCap{dev, valRead, a.ReadBps})
		}
		if a.WriteBps > 0 {
			out = append(out, workloadCap{dev, valWrite, a.WriteBps})
		}
	}
	return out
}

// sample is one gauge or counter whose label pairs (sorted by name, as
// the exposition wants them) are shared with other samples. The registry
// and the encoders only read them.
type sample struct {
	desc    *prometheus.Desc
	labels  []*dto.LabelPair
	value   float64
	counter bool
	// Exactly one is handed out, so Write allocates nothing.
	asCounter dto.Counter
	asGauge   dto.Gauge
}

func (s *sample) Desc() *prometheus.Desc { return s.desc }

func (s *sample) Write(m *dto.Metric) error {
	m.Label = s.labels
	if s.counter {
		s.asCounter.Value = &s.value
		m.Counter = &s.asCounter
	} else {
		s.asGauge.Value = &s.value
		m.Gauge = &s.asGauge
	}
	return nil
}

// idOrder is the indexes of s.Workloads sorted by ID, then Name: the
// order of the exposition's per-workload series (labels id, name).
func idOrder(s *snapshot.Snapshot) []int32 {
	order := make([]int32, len(s.Workloads))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		wa, wb := s.Workloads[a], s.Workloads[b]
		if c := strings.Compare(wa.ID, wb.ID); c != 0 {
			return c
		}
		return strings.Compare(wa.Name, wb.Name)
	})
	return order
}

func usToSeconds(us uint64) float64 { return float64(us) / 1e6 }

// validUTF8 returns s unchanged (no allocation) when it is valid UTF-8.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

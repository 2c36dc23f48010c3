package daemon

import (
	"cmp"
	"slices"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// publish builds and stores the snapshot of this tick.
//
// A workload whose record did not change since the last tick (most of
// them: idle, or read only every few ticks) is published as the same
// *snapshot.Workload again: readers may hold the previous snapshot, so a
// published record is never modified; a changed workload gets a new one.
// The records that moved and the slice of pointers are taken from those
// that earlier ticks replaced and no reader can see any more (reuse.go),
// so a tick on a busy host allocates little.
func (d *Daemon) publish(at time.Time, dt float64, took time.Duration) {
	s := &snapshot.Snapshot{At: at, Tick: d.tick, Interval: d.opts.Interval, TickDuration: took,
		Source: d.opts.Source.Name(), Actuator: d.opts.ActuatorName, DryRun: d.opts.Actuator.DryRun,
		CgroupMode: d.opts.CgroupMode, Workloads: d.rt.Workloads(len(d.work))}
	devs := d.act.Devices()
	if len(d.devStrs) != len(devs) {
		d.devStrs = make([]string, len(devs))
		for i, dv := range devs {
			d.devStrs[i] = dv.Dev.String()
		}
	}
	for _, t := range d.order {
		if w := d.record(t, devs); w != nil {
			s.Levels[w.Level]++
			s.Workloads = append(s.Workloads, w)
		}
	}
	// d.order is sorted by name, then id: so are the workloads.
	dio := d.sen.DeviceBytes()
	for i, dv := range devs {
		sd := snapshot.Device{Name: dv.Name, Dev: d.devStrs[i], Scheduler: dv.Scheduler, Mechanism: dv.Mechanisms(),
			WeightsEffective: dv.Weighted(),
			ReadBps:          float64(dio[i].Read) / dt, WriteBps: float64(dio[i].Bytes-dio[i].Read) / dt,
			ReadBytes: dio[i].ReadTotal, WriteBytes: dio[i].WriteTotal}
		if i < len(d.devStatus) { // what the last Apply found in force; none before the first
			st := d.devStatus[i]
			sd.TopActiveLevel, sd.CapacityBps, sd.CapacityIOPS = st.TopActive, st.CapacityBps, st.CapacityIOPS
		}
		if cs, ok := d.controlState(i); ok {
			sd.LatencyTarget, sd.ProtectedP99, sd.CappedShare = cs.Target.Seconds(), cs.P99.Seconds(), cs.Share
		}
		s.Devices = append(s.Devices, sd)
	}
	slices.SortFunc(s.Devices, func(a, b snapshot.Device) int { return cmp.Compare(a.Name, b.Name) })
	for cause, n := range d.errCounts {
		if n > 0 {
			s.Errors = append(s.Errors, snapshot.ErrorCount{Cause: snapshot.ErrorCause(cause).String(), Count: n})
		}
	}
	slices.SortFunc(s.Errors, func(a, b snapshot.ErrorCount) int { return cmp.Compare(a.Cause, b.Cause) })
	if err := d.store.Err(); err != nil {
		s.StateError = err.Error()
	}
	// A source that can lose its backend (the Docker engine) says so.
	if h, ok := d.opts.Source.(interface{ Health() string }); ok {
		s.SourceError = h.Health()
	}
	if d.opts.HostPressure != "" {
		s.HostPressure = d.hostPSI.Read()
	}
	s.Health = d.hl.Snapshot()
	s.Latency = d.lat.Snapshot()
	if old, _ := d.rd.Store(s); old != nil {
		d.rt.RetireList(old.Workloads)
	}
}

// record is t's record for this tick's snapshot: the one published before
// while nothing in it changed, else a new one; nil when the policy does not
// know t.
func (d *Daemon) record(t *tracked, devs []actuate.Device) *snapshot.Workload {
	id := t.w.ID
	v, ok := d.pol.ViewHandle(t.ph)
	if !ok {
		if v, ok = d.pol.Get(id); !ok {
			return nil
		}
	}
	sw := snapshot.Workload{ID: id, Name: t.w.Name, Cgroup: t.w.Cgroup, Labels: t.w.Labels,
		Level: int(v.Level), Pinned: v.Pinned, Exempt: v.Exempt, BytesInLevel: v.BytesInLevel,
		Allowance: v.Allowance, LevelSince: v.EnteredAt, Weight: int(v.Weight),
		ReadBytes: t.c.RBytes, WriteBytes: t.c.WBytes, ReadIOs: t.c.RIOs, WriteIOs: t.c.WIOs,
		ReadBps: t.c.RBps, WriteBps: t.c.WBps, Pressure: t.c.Pressure, DTasks: int(t.dstate)}
	if t.dec.labelErr != nil {
		sw.LabelError = t.dec.labelErr.Error()
	}
	sw.Latency = d.lat.WorkloadLatency(t.ino)
	apps := d.appScratch[:0]
	applied, ok := t.ah.Applied()
	if !ok {
		applied = d.act.Applied(id)
	}
	for _, ap := range applied {
		a := snapshot.Applied{Device: ap.Device.Name, Dev: d.devString(devs, ap.Device.Dev), Mechanism: ap.Device.Mechanisms(),
			ReadBps: ap.Limits.RBps, WriteBps: ap.Limits.WBps, ReadIOPS: ap.Limits.RIOps, WriteIOPS: ap.Limits.WIOps, Throttled: !ap.Limits.IsZero(), Knobs: ap.Knobs, Used: t.c.Used(ap.Device.Dev)}
		if ap.Device.Weighted() {
			a.Weight = int(ap.Weight)
		}
		if ap.Err != nil {
			a.Error = ap.Err.Error()
		}
		apps = append(apps, a)
	}
	d.appScratch = apps
	sw.Applied = apps // the scratch: a published record gets its own copy
	if t.pub != nil && !t.labelsNew && t.pub.Same(&sw) {
		return t.pub
	}
	sw.Applied = nil
	switch {
	case t.pub != nil && slices.Equal(apps, t.pub.Applied):
		// A busy workload's counters move every tick, what is in force
		// on its devices rarely: share the published (never modified)
		// entries rather than copy them per tick.
		sw.Applied = t.pub.Applied
	case len(apps) == 1 && !apps[0].Throttled && apps[0].Error == "":
		sw.Applied = d.appShared.Of(apps[0])
	case len(apps) > 0:
		sw.Applied = slices.Clone(apps)
	}
	pub := d.rt.Record()
	*pub = sw
	if t.pub != nil {
		d.rt.RetireRecord(t.pub, pub)
	}
	t.pub, t.labelsNew = pub, false
	return pub
}

// devString is dev as MAJ:MIN, without formatting it again when it is one
// of the actuated devices.
func (d *Daemon) devString(devs []actuate.Device, dev cgroupfs.Dev) string {
	for i := range devs {
		if devs[i].Dev == dev {
			return d.devStrs[i]
		}
	}
	return dev.String()
}

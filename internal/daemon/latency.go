package daemon

import (
	"time"

	"github.com/ddiskqos/ddiskqos/internal/iolat"
	"github.com/ddiskqos/ddiskqos/internal/sensor/latency"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/throttle"
)

// latWork is the latency stage's input: the tracked workloads with a known
// inode, in d.order, and their stage records (latWs, rebuilt when latStale,
// their levels set every tick).
type latWork struct {
	ts    []*tracked
	ws    []latency.Workload
	stale bool
}

// initLatency opens the latency stage (internal/sensor/latency), hands its
// bio counters to the actuator's throttles, and makes it the activity
// source when no other was given.
func (d *Daemon) initLatency() {
	d.lat = latency.Open(d.opts.Latency, d.log, d.rt.LatencyList)
	d.latw.stale = true
	// The throttles' fast loop then reads a map entry per demoted workload
	// instead of its counter file, and knows a better level's I/O without
	// reading the parents (internal/throttle/bios.go).
	if u, ok := d.act.(bioUser); ok {
		if b := d.lat.Bios(); b != nil {
			u.SetBios(b)
			d.log.Info("throttle: the demoted workloads' bytes counted in the kernel (bio counters), not read from their files")
		}
	}
	if d.opts.Activity != nil {
		return
	}
	if seen := d.lat.Activity(d.opts.Hierarchy.Mount, d.opts.Hierarchy.Path); seen != nil {
		d.sen.Activity = seen
		d.log.Info("quiet workloads are read when the I/O latency sensor sees them do I/O",
			"backstop", d.opts.Interval*time.Duration(d.sen.ActiveMaxPeriod), "backstop_unsure", d.opts.Interval*time.Duration(d.sen.MaxPeriod))
	}
}

// bioUser is an actuator whose throttles can count bytes with the latency
// sensor's bio counters (*actuate.Actuator).
type bioUser interface{ SetBios(throttle.BioCounter) }

// latencyTick runs the latency stage on the tracked workloads: it reads
// what the kernel timed since the last tick and charges it to them and
// their levels (the levels of the last tick's decisions), and gives the
// latency controller its input.
func (d *Daemon) latencyTick() {
	if d.lat.Sensor() == nil {
		return
	}
	lw := &d.latw
	changed := lw.stale
	if lw.stale {
		lw.ts, lw.ws = lw.ts[:0], lw.ws[:0]
		for _, t := range d.order {
			if !t.gone && t.ino != 0 {
				lw.ts = append(lw.ts, t)
				lw.ws = append(lw.ws, latency.Workload{Ino: t.ino, Cgroup: t.w.Cgroup})
			}
		}
		lw.stale = false
	}
	for i, t := range lw.ts {
		lw.ws[i].Level = int8(t.dec.level)
		if t.dec.exempt {
			lw.ws[i].Level = 0
		}
	}
	if err := d.lat.Step(lw.ws, latency.Tick{Changed: changed, Tick: d.tick, Workloads: len(d.work)}); err != nil {
		d.countErr(snapshot.CauseSense)
	}
	d.controlBegin()
	deltas := d.lat.Deltas()
	for i := range deltas {
		var t *tracked
		if w, ok := d.lat.Owner(deltas[i].Cgroup); ok {
			t = lw.ts[w]
		}
		d.controlAdd(t, &deltas[i])
	}
}

// kernelReadings hands each workload what the kernel's maps saw its
// cgroups complete since the last tick (t.kio), and reports whether the
// sensing of this tick may take workloads' readings from them
// (latency.Stage.KernelReadings).
func (d *Daemon) kernelReadings() bool {
	return d.lat.KernelReadings(func(w int, dl *iolat.Delta) {
		t := d.latw.ts[w]
		if t.kioTick != d.tick+1 {
			t.kio, t.kioTick = t.kio[:0], d.tick+1
		}
		t.kio = latency.AddKernelIO(t.kio, dl)
	})
}

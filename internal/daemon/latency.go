package daemon

import (
	"cmp"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/iolat"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// LatencySensor is the I/O latency sensor as the loop reads it, once per
// tick (*iolat.Reader).
type LatencySensor interface {
	Read(dst []iolat.Delta) ([]iolat.Delta, iolat.Drops, error)
	Keys() int
	Close() error
}

// LatencyOptions configure the latency stage: the requests of every
// workload timed in the kernel (internal/iolat), per disk and direction,
// shown in its snapshot record, and per disk, direction and level in
// Snapshot.Latency.
type LatencyOptions struct {
	// Open opens the sensor; nil: no latency stage. When it fails the
	// daemon logs why, once, and runs without it (Snapshot.Latency says
	// why, and the fix, when the error is an *iolat.UnavailableError).
	Open func() (LatencySensor, error)
	// SysRoot is sysfs, where a disk's name is found from its number
	// (/sys/dev/block/MAJ:MIN); "" is /sys.
	SysRoot string
	// Off: the operator turned the sensor off (latency: off). Open is
	// not called, and Snapshot.Latency says it is off, not unavailable.
	Off bool
	// Target is the latency controller's fixed target for the protected
	// requests' p99 on every throttled device (config latency_target);
	// 0: learned per device, Multiple (0: control.DefaultMultiple) × its
	// unloaded latency. The controller (control.go) runs wherever the
	// sensor does and the device has a throttle, unless NoControl.
	Target    time.Duration
	Multiple  float64
	NoControl bool
}

// What Snapshot.Latency says when the sensor is off by configuration.
const (
	latencyOffReason = "off by configuration (latency: off)"
	latencyOffFix    = "to measure each workload's I/O latency: latency: auto in the config file (or --latency auto), and restart the daemon"
)

// latencyBounds are the buckets of the per-level histograms: every octave
// from 2^13 ns (8.2 µs) to 2^35 ns (34.4 s), 23 buckets, each a boundary of
// the kernel's.
var latencyBounds = iolat.OctaveBounds(13, 35)

// levelOther is the level of a cgroup that is no workload.
const levelOther = -1

type levelKey struct {
	dev   cgroupfs.Dev
	op    iolat.Op
	level int8
}

type levelAgg struct {
	hist         iolat.Hist
	count, bytes uint64
	total        time.Duration
}

// wlLatency is one workload's latency state: per disk and direction.
type wlLatency struct {
	devs  []wlDev // sorted by device name
	pub   []snapshot.WorkloadLatency
	dirty bool
	tick  uint64 // the last tick a delta of it came
}

type wlDev struct {
	dev     cgroupfs.Dev
	name    string
	devName string // dev as MAJ:MIN, formatted once
	ops     [2]snapshot.OpLatency
}

type latency struct {
	sen      LatencySensor
	why, fix string // unavailable: why, and the fix
	buf      []iolat.Delta
	failing  bool // the last read failed (logged when it starts)

	byIno  map[uint64]*tracked // the tracked workloads by cgroup inode
	stale  bool                // byIno is to be rebuilt (the order changed)
	wls    map[uint64]*wlLatency
	active []uint64 // the inodes of workloads with tick values to clear
	levels map[levelKey]*levelAgg
	names  map[cgroupfs.Dev]string
	drops  iolat.Drops
	tick   uint64
	ctl    []devControl // per actuated device: its latency controller (control.go)
}

// initLatency opens the sensor, or says why not.
func (d *Daemon) initLatency() {
	l := &d.lat
	if d.opts.Latency.Off {
		d.log.Info("I/O latency sensor off by configuration (latency: off): no BPF is loaded")
		return
	}
	if d.opts.Latency.Open == nil {
		return
	}
	l.byIno, l.wls = map[uint64]*tracked{}, map[uint64]*wlLatency{}
	l.levels, l.names = map[levelKey]*levelAgg{}, map[cgroupfs.Dev]string{}
	l.stale = true
	sen, err := d.opts.Latency.Open()
	if err != nil {
		l.why, l.fix = err.Error(), ""
		var ue *iolat.UnavailableError
		if errors.As(err, &ue) {
			l.why, l.fix = ue.Why+": "+ue.Err.Error(), ue.Fix
		}
		d.log.Warn("I/O latency sensor unavailable: running without per-request latency", "why", l.why, "fix", l.fix)
		return
	}
	l.sen = sen
	d.log.Info("I/O latency sensor attached (eBPF block tracepoints)")
	d.useBios(sen)
}

// bioSource is a latency sensor with the kernel's bio counters
// (*iolat.Reader).
type bioSource interface{ Bios() *iolat.Bios }

// bioUser is an actuator whose throttles can count bytes with them
// (*actuate.Actuator).
type bioUser interface{ SetBios(actuate.BioCounter) }

// useBios gives the actuator's throttles the sensor's bio counters: their
// fast loop then reads a map entry per demoted workload instead of its
// counter file, and knows a better level's I/O without reading the parents
// (actuate/throttlebios.go).
func (d *Daemon) useBios(sen LatencySensor) {
	src, ok := sen.(bioSource)
	if !ok {
		return
	}
	b := src.Bios()
	u, ok := d.act.(bioUser)
	if b == nil || !ok {
		return
	}
	u.SetBios(b)
	d.log.Info("throttle: the demoted workloads' bytes counted in the kernel (bio counters), not read from their files")
}

func (d *Daemon) closeLatency() {
	if d.lat.sen != nil {
		if err := d.lat.sen.Close(); err != nil {
			d.log.Warn("close the I/O latency sensor", "err", err)
		}
		d.lat.sen = nil
	}
}

// latencyTick reads what the kernel timed since the last tick and charges
// it to the workloads and their levels.
func (d *Daemon) latencyTick() {
	l := &d.lat
	if l.sen == nil {
		return
	}
	l.tick++
	if l.stale {
		clear(l.byIno)
		for _, t := range d.order {
			if !t.gone && t.ino != 0 {
				l.byIno[t.ino] = t
			}
		}
		for ino := range l.wls {
			if _, ok := l.byIno[ino]; !ok {
				delete(l.wls, ino)
			}
		}
		l.stale = false
	}
	var err error
	l.buf, l.drops, err = l.sen.Read(l.buf[:0])
	if err != nil {
		d.countErr(snapshot.CauseSense)
		if !l.failing {
			d.log.Warn("read the I/O latency sensor", "err", err)
		}
		l.failing = true
	} else if l.failing {
		l.failing = false
		d.log.Info("I/O latency sensor read again")
	}
	d.recordActivity(l.buf, l.drops, err)
	d.controlBegin()
	for i := range l.buf {
		dl := &l.buf[i]
		level := int8(levelOther)
		t := l.byIno[dl.Cgroup]
		d.controlAdd(t, dl)
		if t != nil {
			level = int8(t.dec.level)
			if t.dec.exempt {
				level = 0
			}
		}
		if dl.Count > 0 {
			lk := levelKey{dev: dl.Dev, op: dl.Op, level: level}
			agg := l.levels[lk]
			if agg == nil {
				agg = &levelAgg{}
				l.levels[lk] = agg
			}
			agg.hist.AddTick(&dl.Hist)
			agg.count += dl.Count
			agg.bytes += dl.Bytes
			agg.total += dl.Total
		}
		if t != nil {
			d.chargeLatency(t.ino, dl)
		}
	}
	// Workloads that completed requests last tick and none now: their
	// tick figures go back to zero.
	active := l.active[:0]
	for _, ino := range l.active {
		w := l.wls[ino]
		if w == nil {
			continue
		}
		if w.tick == l.tick {
			active = append(active, ino)
			continue
		}
		for i := range w.devs {
			for op := range w.devs[i].ops {
				o := &w.devs[i].ops[op]
				if o.TickRequests != 0 {
					o.TickRequests, o.P50, o.P99, o.Queue = 0, 0, 0, 0
					w.dirty = true
				}
			}
		}
	}
	l.active = active
	for _, w := range l.wls {
		if w.dirty {
			w.pub = d.rt.latencyList(len(w.devs))
			for i, dv := range w.devs {
				w.pub[i] = snapshot.WorkloadLatency{Device: dv.name, Dev: dv.devName, Read: dv.ops[iolat.Read], Write: dv.ops[iolat.Write]}
			}
			w.dirty = false
		}
	}
}

// chargeLatency adds one delta to the workload of cgroup inode ino.
func (d *Daemon) chargeLatency(ino uint64, dl *iolat.Delta) {
	l := &d.lat
	w := l.wls[ino]
	if w == nil {
		w = &wlLatency{}
		l.wls[ino] = w
	}
	i := slices.IndexFunc(w.devs, func(x wlDev) bool { return x.dev == dl.Dev })
	if i < 0 {
		w.devs = append(w.devs, wlDev{dev: dl.Dev, name: d.diskName(dl.Dev), devName: dl.Dev.String()})
		slices.SortFunc(w.devs, func(a, b wlDev) int { return cmp.Compare(a.name, b.name) })
		i = slices.IndexFunc(w.devs, func(x wlDev) bool { return x.dev == dl.Dev })
	}
	o := &w.devs[i].ops[dl.Op&1]
	o.Requests += dl.Count
	o.Bytes += dl.Bytes
	o.InFlight = dl.InFlight
	o.TickRequests = dl.Count
	o.P50, o.P99, o.Queue = 0, 0, 0
	if dl.Count > 0 {
		o.P50 = dl.Hist.Quantile(0.5).Seconds()
		o.P99 = dl.Hist.Quantile(0.99).Seconds()
		o.Queue = (dl.Queue / time.Duration(dl.Count)).Seconds()
	}
	w.dirty = true
	if w.tick != l.tick {
		w.tick = l.tick
		l.active = append(l.active, ino)
	}
}

// diskName is the name of the disk dev (sysfs), or MAJ:MIN when unknown.
func (d *Daemon) diskName(dev cgroupfs.Dev) string {
	l := &d.lat
	if n, ok := l.names[dev]; ok {
		return n
	}
	n := dev.String()
	root := cmp.Or(d.opts.Latency.SysRoot, "/sys")
	if target, err := os.Readlink(filepath.Join(root, "dev", "block", n)); err == nil {
		n = filepath.Base(target)
	}
	l.names[dev] = n
	return n
}

// workloadLatency is t's latency record for the snapshot: the same slice
// while nothing in it changed.
func (d *Daemon) workloadLatency(t *tracked) []snapshot.WorkloadLatency {
	if d.lat.sen == nil || t.ino == 0 {
		return nil
	}
	if w := d.lat.wls[t.ino]; w != nil {
		return w.pub
	}
	return nil
}

// latencySnapshot is the latency stage's part of the snapshot: nil when
// it was not asked for.
func (d *Daemon) latencySnapshot() *snapshot.Latency {
	l := &d.lat
	if d.opts.Latency.Off {
		return &snapshot.Latency{Off: true, Reason: latencyOffReason, Fix: latencyOffFix}
	}
	if l.sen == nil {
		if l.why == "" {
			return nil
		}
		return &snapshot.Latency{Reason: l.why, Fix: l.fix}
	}
	s := &snapshot.Latency{Available: true, Buckets: latencyBounds, Uncounted: l.drops.Uncounted,
		Untimed: l.drops.Untimed, Missed: l.drops.Missed, Keys: l.sen.Keys()}
	for k, a := range l.levels {
		lv := "other"
		if k.level >= 0 {
			lv = strconv.Itoa(int(k.level))
		}
		s.Series = append(s.Series, snapshot.LatencySeries{Device: d.diskName(k.dev), Dev: k.dev.String(),
			Operation: k.op.String(), Level: lv, Requests: a.count, Bytes: a.bytes, Sum: a.total.Seconds(),
			Counts: a.hist.Cumulative(latencyBounds, nil)})
	}
	slices.SortFunc(s.Series, func(a, b snapshot.LatencySeries) int {
		return cmp.Or(cmp.Compare(a.Device, b.Device), cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Level, b.Level))
	})
	return s
}

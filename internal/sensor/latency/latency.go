// Package latency is the sensing stage's kernel-side reader: once per tick
// it reads what the I/O latency sensor (internal/iolat) timed since the
// last tick, charges it to the workloads it is given and to their levels
// (the snapshot's per-workload and per-level latency), and, when asked,
// makes the same read the sensing stage's activity source
// (sensor.Activity: activity.go). It sits beside package sensor, which it
// feeds (sensor.Seen, sensor.KernelIO), and knows nothing of the daemon:
// the workloads come in as values (Workload), and the daemon records what
// comes out (Deltas, Owner, WorkloadLatency, Snapshot).
package latency

import (
	"cmp"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/iolat"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// Sensor is the I/O latency sensor as the loop reads it, once per
// tick (*iolat.Reader).
type Sensor interface {
	Read(dst []iolat.Delta) ([]iolat.Delta, iolat.Drops, error)
	Keys() int
	Close() error
}

// Options configure the latency stage: the requests of every
// workload timed in the kernel (internal/iolat), per disk and direction,
// shown in its snapshot record, and per disk, direction and level in
// Snapshot.Latency.
type Options struct {
	// Open opens the sensor; nil: no latency stage. When it fails the
	// daemon logs why, once, and runs without it (Snapshot.Latency says
	// why, and the fix, when the error is an *iolat.UnavailableError).
	Open func() (Sensor, error)
	// SysRoot is sysfs, where a disk's name is found from its number
	// (/sys/dev/block/MAJ:MIN); "" is /sys.
	SysRoot string
	// Off: the operator turned the sensor off (latency: off). Open is
	// not called, and Snapshot.Latency says it is off, not unavailable.
	Off bool
	// Target is the latency controller's fixed target for the protected
	// requests' p99 on every throttled device (config latency_target);
	// 0: learned per device, Multiple (0: control.DefaultMultiple) × its
	// unloaded latency. The controller (the daemon's control.go) runs
	// wherever the sensor does and the device has a throttle, unless
	// NoControl.
	Target    time.Duration
	Multiple  float64
	NoControl bool
	// NoConserve: the controller is not work-conserving (config
	// work_conserving: false; internal/control's Conserve).
	NoConserve bool
}

// What Snapshot.Latency says when the sensor is off by configuration.
const (
	offReason = "off by configuration (latency: off)"
	offFix    = "to measure each workload's I/O latency: latency: auto in the config file (or --latency auto), and restart the daemon"
)

// Bounds are the buckets of the per-level histograms: every octave
// from 2^13 ns (8.2 µs) to 2^35 ns (34.4 s), 23 buckets, each a boundary of
// the kernel's.
var Bounds = iolat.OctaveBounds(13, 35)

// levelOther is the level of a cgroup that is no workload.
const levelOther = -1

// Workload is one tracked workload as the stage sees it: its cgroup's
// inode (never 0), its cgroup (relative to the hierarchy's mount) and the
// level its requests ran at (its last decision's; 0 when exempt).
type Workload struct {
	Ino    uint64
	Cgroup string
	Level  int8
}

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

// Stage is the latency stage: the sensor, what it charged so far, and the
// activity source made of its reads.
type Stage struct {
	opts     Options
	log      *slog.Logger
	list     func(n int) []snapshot.WorkloadLatency
	sen      Sensor
	why, fix string // unavailable: why, and the fix
	buf      []iolat.Delta
	failing  bool // the last read failed (logged when it starts)

	ws     []Workload     // the workloads as of the last Tick that was told they changed
	byIno  map[uint64]int // ws's indexes by cgroup inode
	stale  bool           // byIno is to be rebuilt (the order changed)
	wls    map[uint64]*wlLatency
	active []uint64 // the inodes of workloads with tick values to clear
	dirty  []uint64 // the inodes of workloads whose record is to be made again
	levels map[levelKey]*levelAgg
	names  map[cgroupfs.Dev]string
	drops  iolat.Drops
	tick   uint64
	kin    kernelActivity // the deltas as the activity source (activity.go)
}

// Open opens the sensor of opts, or says why not (in the log, and in
// Snapshot). list makes a workload's latency list of n devices to fill
// (the daemon's reuse of retired records); nil: make.
func Open(opts Options, log *slog.Logger, list func(n int) []snapshot.WorkloadLatency) *Stage {
	if list == nil {
		list = func(n int) []snapshot.WorkloadLatency { return make([]snapshot.WorkloadLatency, n) }
	}
	l := &Stage{opts: opts, log: log, list: list}
	if opts.Off {
		log.Info("I/O latency sensor off by configuration (latency: off): no BPF is loaded")
		return l
	}
	if opts.Open == nil {
		return l
	}
	l.byIno, l.wls = map[uint64]int{}, map[uint64]*wlLatency{}
	l.levels, l.names = map[levelKey]*levelAgg{}, map[cgroupfs.Dev]string{}
	l.stale = true
	sen, err := opts.Open()
	if err != nil {
		l.why, l.fix = err.Error(), ""
		var ue *iolat.UnavailableError
		if errors.As(err, &ue) {
			l.why, l.fix = ue.Why+": "+ue.Err.Error(), ue.Fix
		}
		log.Warn("I/O latency sensor unavailable: running without per-request latency", "why", l.why, "fix", l.fix)
		return l
	}
	l.sen = sen
	log.Info("I/O latency sensor attached (eBPF block tracepoints)")
	return l
}

// Sensor is the open sensor, nil if none.
func (l *Stage) Sensor() Sensor { return l.sen }

// Bios are the open sensor's bio counters (*iolat.Reader has them), with
// which a throttle counts the bytes of the workloads it demoted; nil when
// there is no sensor or it has none.
func (l *Stage) Bios() *iolat.Bios {
	if src, ok := l.sen.(interface{ Bios() *iolat.Bios }); ok {
		return src.Bios()
	}
	return nil
}

// Failing reports whether the last read failed.
func (l *Stage) Failing() bool { return l.failing }

// Close closes the sensor.
func (l *Stage) Close() {
	if l.sen != nil {
		if err := l.sen.Close(); err != nil {
			l.log.Warn("close the I/O latency sensor", "err", err)
		}
		l.sen = nil
	}
}

// Tick is one tick's input besides the workloads: Changed says they are
// not those of the last Step (the daemon's order changed), Tick is the
// daemon's tick, Workloads how many it tracks.
type Tick struct {
	Changed   bool
	Tick      uint64
	Workloads int
}

// Step reads what the kernel timed since the last tick and charges it to
// the workloads ws (those the daemon tracks and knows the inode of, in its
// order; kept until the next Step) and their levels; the deltas read are Deltas until the
// next Step. A failed read is returned (and logged when it starts).
func (l *Stage) Step(ws []Workload, in Tick) error {
	if l.sen == nil {
		return nil
	}
	l.tick++
	if in.Changed {
		l.stale = true
		l.kin.pathsStale = true
	}
	l.ws = ws
	if l.stale {
		clear(l.byIno)
		for i, w := range ws {
			l.byIno[w.Ino] = i
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
		if !l.failing {
			l.log.Warn("read the I/O latency sensor", "err", err)
		}
		l.failing = true
	} else if l.failing {
		l.failing = false
		l.log.Info("I/O latency sensor read again")
	}
	l.recordActivity(l.buf, l.drops, err, in)
	for i := range l.buf {
		dl := &l.buf[i]
		level := int8(levelOther)
		w, ok := l.byIno[dl.Cgroup]
		if ok {
			level = l.ws[w].Level
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
		if ok {
			l.charge(l.ws[w].Ino, dl)
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
					l.markDirty(ino, w)
				}
			}
		}
	}
	l.active = active
	// Only the records that changed are made again (not a walk of every
	// workload that ever did I/O).
	for _, ino := range l.dirty {
		w := l.wls[ino]
		if w == nil || !w.dirty {
			continue // gone since (the workloads changed)
		}
		w.pub = l.list(len(w.devs))
		for i, dv := range w.devs {
			w.pub[i] = snapshot.WorkloadLatency{Device: dv.name, Dev: dv.devName, Read: dv.ops[iolat.Read], Write: dv.ops[iolat.Write]}
		}
		w.dirty = false
	}
	l.dirty = l.dirty[:0]
	return err
}

// markDirty has the record of w (the workload of cgroup inode ino) made
// again at the end of the Step.
func (l *Stage) markDirty(ino uint64, w *wlLatency) {
	if !w.dirty {
		w.dirty = true
		l.dirty = append(l.dirty, ino)
	}
}

// Deltas are what the last Step read.
func (l *Stage) Deltas() []iolat.Delta { return l.buf }

// Owner is the index in the workloads of the last Step of the workload of
// cgroup inode ino; ok false when it is none of them.
func (l *Stage) Owner(ino uint64) (int, bool) {
	w, ok := l.byIno[ino]
	return w, ok
}

// charge adds one delta to the workload of cgroup inode ino.
func (l *Stage) charge(ino uint64, dl *iolat.Delta) {
	w := l.wls[ino]
	if w == nil {
		w = &wlLatency{}
		l.wls[ino] = w
	}
	i := slices.IndexFunc(w.devs, func(x wlDev) bool { return x.dev == dl.Dev })
	if i < 0 {
		w.devs = append(w.devs, wlDev{dev: dl.Dev, name: l.diskName(dl.Dev), devName: dl.Dev.String()})
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
	l.markDirty(ino, w)
	if w.tick != l.tick {
		w.tick = l.tick
		l.active = append(l.active, ino)
	}
}

// diskName is the name of the disk dev (sysfs), or MAJ:MIN when unknown.
func (l *Stage) diskName(dev cgroupfs.Dev) string {
	if n, ok := l.names[dev]; ok {
		return n
	}
	n, err := host.DevName(host.Roots{Sys: cmp.Or(l.opts.SysRoot, "/sys")}, dev)
	if err != nil {
		n = dev.String()
	}
	l.names[dev] = n
	return n
}

// WorkloadLatency is the latency record for the snapshot of the workload
// of cgroup inode ino (0: unknown): the same slice while nothing in it
// changed.
func (l *Stage) WorkloadLatency(ino uint64) []snapshot.WorkloadLatency {
	if l.sen == nil || ino == 0 {
		return nil
	}
	if w := l.wls[ino]; w != nil {
		return w.pub
	}
	return nil
}

// Snapshot is the latency stage's part of the snapshot: nil when
// it was not asked for.
func (l *Stage) Snapshot() *snapshot.Latency {
	if l.opts.Off {
		return &snapshot.Latency{Off: true, Reason: offReason, Fix: offFix}
	}
	if l.sen == nil {
		if l.why == "" {
			return nil
		}
		return &snapshot.Latency{Reason: l.why, Fix: l.fix}
	}
	s := &snapshot.Latency{Available: true, Buckets: Bounds, Uncounted: l.drops.Uncounted,
		Untimed: l.drops.Untimed, Missed: l.drops.Missed, Keys: l.sen.Keys()}
	for k, a := range l.levels {
		lv := "other"
		if k.level >= 0 {
			lv = strconv.Itoa(int(k.level))
		}
		s.Series = append(s.Series, snapshot.LatencySeries{Device: l.diskName(k.dev), Dev: k.dev.String(),
			Operation: k.op.String(), Level: lv, Requests: a.count, Bytes: a.bytes, Sum: a.total.Seconds(),
			Counts: a.hist.Cumulative(Bounds, nil)})
	}
	slices.SortFunc(s.Series, func(a, b snapshot.LatencySeries) int {
		return cmp.Or(cmp.Compare(a.Device, b.Device), cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Level, b.Level))
	})
	return s
}

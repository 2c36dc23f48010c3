package daemon

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devhealth"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
	"github.com/ddiskqos/ddiskqos/internal/sensor"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// HealthOptions configure the storage-health sensors: each actuated
// device's own counters, read through its device sensor (devsensor, the
// same readings the throttle's capacity estimate gets, with the caps the
// throttle imposed beside them), through a burst-credit model and a
// throttle detector (internal/devhealth), the host's and the workloads'
// tasks in D state, and a sync-write probe.
type HealthOptions struct {
	// SysRoot and ProcRoot are sysfs and procfs ("" skips the device
	// and task sensors alike).
	SysRoot, ProcRoot string
	// Models are burst-credit models by device name; a device without
	// one gets the detector alone.
	Models map[string]devhealth.Model
	// DStateWorkloads is how many workloads per tick have their tasks'
	// states read (those that did I/O this tick or had tasks in D when
	// last looked at; rotating); 0 reads none. DStateTasks caps the
	// tasks read per workload.
	DStateWorkloads, DStateTasks int
	// ProbePath is the file of the sync-write probe, "" for none;
	// ProbeInterval how often it writes (0: the daemon's interval).
	ProbePath     string
	ProbeInterval time.Duration
	// HoldBelow: when a modelled device's burst balance falls below this
	// fraction, its levels HoldFromLevel and worse are held to the model's
	// baseline (devhealth.Hold, actuate.Ceiling); 0: never.
	HoldBelow     float64
	HoldFromLevel int
}

// maxHealthEvents is how many device state changes the snapshot keeps.
const maxHealthEvents = 32

type healthDev struct {
	name, dev string
	sen       *devsensor.Device // the daemon's, shared with the throttle
	prev      devsensor.Reading
	havePrev  bool
	tr        *devhealth.Tracker
	model     devhealth.Model
	err       bool // the last read failed (logged once)
	// The burst hold: devNum is the device, hold the policy (nil: the
	// device is not held), ceil what is in force.
	devNum cgroupfs.Dev
	hold   *devhealth.Hold
	ceil   actuate.Ceiling
	why    string // why the hold last changed
}

// health is the daemon's storage-health stage.
type health struct {
	opts HealthOptions
	// sensors are the actuated devices' sensors (openSensors), indexed
	// like the actuator's devices; nil entries: none.
	sensors []*devsensor.Device
	devs    []*healthDev
	blocked *uint64
	// procStat is <proc>/stat kept open for procs_blocked (nil: not
	// opened yet; procStatErr: it could not be, so it is not tried again).
	procStat    *cgroupfs.ProcStat
	procStatErr bool
	events      []snapshot.HealthEvent
	probe       *sensor.SyncProbe
	stop        context.CancelFunc

	// D-state sampling of this tick: budget left, candidates seen.
	budget, seen, sampled int
	stride                int // last tick's candidates / budget, at least 1
	buf                   []byte
}

// openSensors opens the device sensor of every device to actuate on, the
// one owner of its counters: the actuator's throttle and the health stage
// read them alike. The root is the actuator's sysfs, else the health
// stage's; none: no sensors. A device whose counters cannot be opened
// gets none (the throttle then sizes its caps from the ticks, the health
// stage skips it; both say so).
func (d *Daemon) openSensors(devs []actuate.Device) []*devsensor.Device {
	root := cmp.Or(d.opts.Actuator.SysRoot, d.opts.Health.SysRoot)
	if root == "" {
		return nil
	}
	out := make([]*devsensor.Device, len(devs))
	for i, dv := range devs {
		sen, err := devsensor.Open(root, dv.Name, d.opts.Actuator.Throttle.Period)
		if err != nil {
			d.log.Warn("device counters not readable", "device", dv.Name, "err", err)
			continue
		}
		out[i] = sen
	}
	d.hl.sensors = out
	return out
}

// sensorOf is the sensor of the device named name, nil if none.
func (d *Daemon) sensorOf(name string) *devsensor.Device {
	for _, s := range d.hl.sensors {
		if s != nil && s.Name() == name {
			return s
		}
	}
	return nil
}

// closeSensors closes the device sensors (after the throttle stopped).
func (d *Daemon) closeSensors() {
	for _, s := range d.hl.sensors {
		if s != nil {
			s.Close()
		}
	}
	d.hl.sensors = nil
}

// initHealth takes the actuated devices' sensors and starts the probe.
func (d *Daemon) initHealth() error {
	h := &d.hl
	h.opts = d.opts.Health
	h.stride = 1
	if h.opts.DStateTasks == 0 {
		h.opts.DStateTasks = 256
	}
	if h.opts.SysRoot != "" {
		for _, dv := range d.act.Devices() {
			hd := &healthDev{name: dv.Name, dev: dv.Dev.String(), model: h.opts.Models[dv.Name], devNum: dv.Dev}
			hd.tr = devhealth.NewTracker(hd.model)
			d.initHold(hd)
			if hd.sen = d.sensorOf(dv.Name); hd.sen == nil {
				d.log.Warn("device health: no counters", "device", dv.Name)
				continue
			}
			h.devs = append(h.devs, hd)
		}
	}
	slices.SortFunc(h.devs, func(a, b *healthDev) int { return cmp.Compare(a.name, b.name) })
	for name := range h.opts.Models {
		if !hasDev(h.devs, name) {
			return errors.New("burst model for device " + name + ": not an actuated device")
		}
	}
	if h.opts.ProbePath != "" {
		p, err := sensor.NewSyncProbe(h.opts.ProbePath, d.now)
		if err != nil {
			return err
		}
		iv := h.opts.ProbeInterval
		if iv <= 0 {
			iv = d.opts.Interval
		}
		ctx, cancel := context.WithCancel(context.Background())
		h.probe, h.stop = p, cancel
		go p.Run(ctx, iv)
	}
	return nil
}

// initHold gives hd its burst hold when one is configured, the device has
// a model and the actuator a throttle on it.
func (d *Daemon) initHold(hd *healthDev) {
	o := d.hl.opts
	if o.HoldBelow <= 0 || !hd.model.Enabled() {
		return
	}
	if err := d.act.Hold(hd.devNum, actuate.Ceiling{}); err != nil {
		d.log.Warn("burst hold: the device has no throttle, its levels cannot be held", "device", hd.name,
			"actuator", d.opts.ActuatorName, "err", err)
		return
	}
	hd.hold = &devhealth.Hold{Below: o.HoldBelow}
}

// holdTick runs hd's burst hold on its status st: on a change it puts the
// ceiling in force or lifts it, and logs it.
func (d *Daemon) holdTick(hd *healthDev, st devhealth.Status, now time.Time) {
	if hd.hold == nil {
		return
	}
	on, changed, why := hd.hold.Observe(st, now)
	if !changed {
		return
	}
	hd.why = why
	if !on {
		hd.ceil = actuate.Ceiling{}
		d.act.Hold(hd.devNum, hd.ceil) // it could at initHold
		d.log.Warn("burst hold released", "device", hd.name, "reason", why)
		return
	}
	c := actuate.Ceiling{From: d.hl.opts.HoldFromLevel}
	if b := hd.model.Bytes; b.Enabled() {
		c.Bps = max(b.Baseline, 1)
	}
	if b := hd.model.IOPS; b.Enabled() {
		c.IOPS = max(b.Baseline, 1)
	}
	hd.ceil = c
	d.act.Hold(hd.devNum, c) // it could at initHold
	d.log.Warn("burst hold engaged: worse levels held to the device's baseline", "device", hd.name, "reason", why,
		"from_level", c.From, "iops", c.IOPS, "bps", c.Bps, "balance", math.Round(1000*st.Balance)/1000)
}

func hasDev(ds []*healthDev, name string) bool {
	for _, d := range ds {
		if d.name == name {
			return true
		}
	}
	return false
}

// closeHealth stops the probe and closes the device sensors (the
// actuator's throttle has stopped by then: shutdown restores first).
func (d *Daemon) closeHealth() {
	if d.hl.stop != nil {
		d.hl.stop()
	}
	d.hl.devs = nil
	if d.hl.procStat != nil {
		d.hl.procStat.Close()
		d.hl.procStat = nil
	}
	d.closeSensors()
}

// healthTickStart opens this tick's D-state budget.
func (d *Daemon) healthTickStart() {
	h := &d.hl
	if h.seen > 0 && h.opts.DStateWorkloads > 0 {
		h.stride = max(1, (h.seen+h.opts.DStateWorkloads-1)/h.opts.DStateWorkloads)
	}
	h.budget, h.seen, h.sampled = h.opts.DStateWorkloads, 0, 0
}

// senseDState counts t's tasks in D state when t is a candidate this tick
// (it did I/O, or had tasks in D) and the rotating budget allows.
func (d *Daemon) senseDState(t *tracked, moved bool) {
	h := &d.hl
	if h.budget == 0 || h.opts.ProcRoot == "" || (!moved && t.dstate == 0) {
		return
	}
	h.seen++
	if (h.seen+int(d.tick))%h.stride != 0 {
		return
	}
	tc, buf, err := t.cg.CountDState(h.opts.ProcRoot, h.opts.DStateTasks, h.buf)
	h.buf = buf
	if err != nil {
		return // gone: the next read of its counters says so
	}
	h.budget--
	h.sampled++
	t.dstate = int32(tc.D)
}

// healthTick reads every watched device's counters (through its sensor:
// the reading the throttle took this period, or a new one), runs its
// tracker on them and the caps the throttle imposed meanwhile, and logs a
// change of state; reads the host's blocked tasks.
func (d *Daemon) healthTick(now time.Time) {
	h := &d.hl
	for _, hd := range h.devs {
		cur, err := hd.sen.Read(now)
		if err != nil {
			if !hd.err {
				d.countErr(snapshot.CauseSense)
				d.log.Warn("device health: read counters", "device", hd.name, "err", err)
			}
			hd.err = true
			continue
		}
		hd.err = false
		if hd.havePrev {
			s := devhealth.FromReadings(hd.prev, cur)
			from := hd.tr.Status().State
			st, changed := hd.tr.Observe(s)
			if changed {
				d.log.Warn("device state change", "device", hd.name, "from", from.String(), "to", st.State.String(),
					"reason", st.Reason, "iops", math.Round(st.IOPS), "bps", math.Round(st.Bps))
				h.events = append(h.events, snapshot.HealthEvent{At: now, Device: hd.name, From: from.String(),
					To: st.State.String(), Reason: st.Reason})
				if len(h.events) > maxHealthEvents {
					h.events = h.events[len(h.events)-maxHealthEvents:]
				}
			}
			d.holdTick(hd, st, now)
		}
		hd.prev, hd.havePrev = cur, true
	}
	h.blocked = nil
	if h.opts.ProcRoot != "" && h.procStat == nil && !h.procStatErr {
		ps, err := cgroupfs.OpenProcStat(h.opts.ProcRoot)
		h.procStat, h.procStatErr = ps, err != nil
	}
	if h.procStat != nil {
		if n, err := h.procStat.ProcsBlocked(); err == nil {
			h.blocked = &n
		}
	}
}

// healthSnapshot is this tick's picture; nil when no sensor is on.
func (d *Daemon) healthSnapshot() *snapshot.Health {
	h := &d.hl
	if len(h.devs) == 0 && h.probe == nil && h.blocked == nil {
		return nil
	}
	out := &snapshot.Health{BlockedTasks: h.blocked, DStateSampled: h.sampled}
	for _, hd := range h.devs {
		st := hd.tr.Status()
		dh := snapshot.DeviceHealth{Name: hd.name, Dev: hd.dev, State: st.State.String(), Since: st.Since, Reason: st.Reason,
			IOPS: st.IOPS, Bps: st.Bps, Util: st.Util, QueueDepth: st.QueueDepth, PeakIOPS: st.PeakIOPS, PeakBps: st.PeakBps,
			FloorIOPS: st.FloorIOPS, FloorBps: st.FloorBps, CapIOPS: st.CapIOPS, CapBps: st.CapBps, HeldByCaps: st.HeldByCaps}
		if hd.havePrev {
			c := hd.prev.Stat
			dh.ReadIOs, dh.WriteIOs, dh.ReadBytes, dh.WriteBytes = c.ReadIOs, c.WriteIOs, c.ReadSectors*512, c.WriteSectors*512
			dh.IOTime, dh.IOTimeWeighted = float64(c.IOTicksMs)/1e3, float64(c.TimeInQueueMs)/1e3
		}
		if st.Modeled {
			m := &snapshot.BurstModel{Name: hd.model.Name, Balance: st.Balance, BalanceIOs: st.BalanceIOs,
				BalanceBytes: st.BalanceBytes, DrainIOPS: st.DrainIOPS, DrainBps: st.DrainBps}
			if !math.IsInf(st.TimeToEmpty, 0) {
				tte := st.TimeToEmpty
				m.SecondsToEmpty = &tte
			}
			dh.Model = m
		}
		if hd.hold != nil {
			on, since := hd.hold.On()
			bh := &snapshot.BurstHold{Held: on, Since: since, Reason: hd.why, Below: hd.hold.Below, Release: hd.hold.Release(),
				FromLevel: d.hl.opts.HoldFromLevel}
			if on {
				bh.CapIOPS, bh.CapBps = hd.ceil.IOPS, hd.ceil.Bps
			}
			dh.Hold = bh
		}
		out.Devices = append(out.Devices, dh)
	}
	if len(h.events) > 0 {
		out.Events = append([]snapshot.HealthEvent(nil), h.events...)
	}
	if h.probe != nil {
		p, _ := h.probe.Snapshot()
		out.Probe = &p
	}
	return out
}

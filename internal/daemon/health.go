package daemon

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devhealth"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/sensor"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/throttle"
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
	// baseline (devhealth.Hold, throttle.Ceiling); 0: never.
	HoldBelow     float64
	HoldFromLevel int
}

// health is the daemon's storage-health stage.
type health struct {
	opts HealthOptions
	// sensors are the actuated devices' sensors (openSensors), indexed
	// like the actuator's devices; nil entries: none.
	sensors []*devsensor.Device
	watch   *devhealth.Watch // the devices' trackers and burst holds
	blocked *uint64
	// procStat is <proc>/stat kept open for procs_blocked (nil: not
	// opened yet; procStatErr: it could not be, so it is not tried again).
	procStat    *cgroupfs.ProcStat
	procStatErr bool
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
	var devs []devhealth.Device
	if h.opts.SysRoot != "" {
		for _, dv := range d.act.Devices() {
			hd := devhealth.Device{Name: dv.Name, Dev: dv.Dev, Model: h.opts.Models[dv.Name]}
			hd.Holdable = d.holdable(hd)
			if hd.Sensor = d.sensorOf(dv.Name); hd.Sensor == nil {
				d.log.Warn("device health: no counters", "device", dv.Name)
				continue
			}
			hd.Lowers = host.LowerOf(host.Roots{Sys: h.opts.SysRoot}, dv.Name)
			devs = append(devs, hd)
		}
	}
	h.watch = devhealth.NewWatch(devs, devhealth.HoldConfig{Below: h.opts.HoldBelow, FromLevel: h.opts.HoldFromLevel}, d.log)
	for name := range h.opts.Models {
		if !h.watch.Has(name) {
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

// holdable reports whether dv can have a burst hold: one is configured,
// the device has a model and the actuator a throttle on it.
func (d *Daemon) holdable(dv devhealth.Device) bool {
	o := d.hl.opts
	if o.HoldBelow <= 0 || !dv.Model.Enabled() {
		return false
	}
	if err := d.act.Hold(dv.Dev, throttle.Ceiling{}); err != nil {
		d.log.Warn("burst hold: the device has no throttle, its levels cannot be held", "device", dv.Name,
			"actuator", d.opts.ActuatorName, "err", err)
		return false
	}
	return true
}

// closeHealth stops the probe and closes the device sensors (the
// actuator's throttle has stopped by then: shutdown restores first).
func (d *Daemon) closeHealth() {
	if d.hl.stop != nil {
		d.hl.stop()
	}
	d.hl.watch = nil
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

// healthTick steps the devices' health stage (devhealth.Watch) and hands
// the throttles the burst holds' ceilings that changed; reads the host's
// blocked tasks.
func (d *Daemon) healthTick(now time.Time) {
	h := &d.hl
	if h.watch != nil {
		failed, holds := h.watch.Step(now)
		for range failed {
			d.countErr(snapshot.CauseSense)
		}
		for _, c := range holds {
			d.act.Hold(c.Dev, throttle.Ceiling(c.Ceiling)) // it could at holdable
		}
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
	if (h.watch == nil || h.watch.Len() == 0) && h.probe == nil && h.blocked == nil {
		return nil
	}
	out := &snapshot.Health{BlockedTasks: h.blocked, DStateSampled: h.sampled}
	if h.watch != nil {
		out.Devices = h.watch.Devices(out.Devices)
		out.Events = h.watch.Events()
	}
	if h.probe != nil {
		p, _ := h.probe.Snapshot()
		out.Probe = &p
	}
	return out
}

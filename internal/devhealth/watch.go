package devhealth

import (
	"cmp"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// The health stage of the actuated devices: each device's own counters,
// read through its device sensor (the same readings the throttle's
// capacity estimate gets, with the caps the throttle imposed beside them),
// through a burst-credit model and a throttle detector (Tracker), and,
// where a hold is configured, the burst hold (Hold) whose ceiling the
// daemon hands the device's throttle.

// Device is one device to watch.
type Device struct {
	Name string
	Dev  cgroupfs.Dev
	// Sensor reads its counters (the daemon's, shared with the throttle).
	Sensor *devsensor.Device
	// Model is its burst-credit model (the zero Model: none).
	Model Model
	// Holdable: the device has a throttle whose levels can be held (the
	// hold runs when HoldConfig.Below is set and the model is enabled).
	Holdable bool
	// Lowers are the names of the devices this one is stacked on (a loop
	// device over a file on them, a dm device over them).
	Lowers []string
}

// HoldConfig configures the burst hold: when a modelled device's burst
// balance falls below Below, its levels FromLevel and worse are held to
// the model's baseline; Below 0: never.
type HoldConfig struct {
	Below     float64
	FromLevel int
}

// Ceiling is what the burst hold puts in force on a device: levels From
// and worse share at most Bps and IOPS (0: no bound); the zero Ceiling
// lifts it (the throttle's throttle.Ceiling, field for field).
type Ceiling struct {
	From      int
	Bps, IOPS float64
}

// HoldChange is a device whose ceiling changed at a Step.
type HoldChange struct {
	Dev     cgroupfs.Dev
	Ceiling Ceiling
}

// maxEvents is how many device state changes the snapshot keeps.
const maxEvents = 32

type watched struct {
	name, dev string
	sen       *devsensor.Device
	prev      devsensor.Reading
	havePrev  bool
	tr        *Tracker
	model     Model
	err       bool // the last read failed (logged once)
	// The burst hold: devNum is the device, hold the policy (nil: the
	// device is not held), ceil what is in force.
	devNum cgroupfs.Dev
	hold   *Hold
	ceil   Ceiling
	why    string // why the hold last changed
	// uppers are the watched devices stacked on this one (a loop device
	// over a file on it, a dm device over it): a cap of the daemon's that
	// holds a workload back there shapes this device's traffic too.
	uppers []*watched
	lowers []string // the names of the devices it is stacked on
	sample Sample   // this tick's (ok: read)
	ok     bool
}

// Watch is the health stage of a set of devices.
type Watch struct {
	hold    HoldConfig
	log     *slog.Logger
	devs    []*watched // sorted by name
	events  []snapshot.HealthEvent
	changes []HoldChange
}

// NewWatch watches devs (those without a sensor are left out: the daemon
// says so); log gets the changes of state and of the holds.
func NewWatch(devs []Device, hold HoldConfig, log *slog.Logger) *Watch {
	w := &Watch{hold: hold, log: log}
	for _, dv := range devs {
		hd := &watched{name: dv.Name, dev: dv.Dev.String(), sen: dv.Sensor, model: dv.Model, devNum: dv.Dev, lowers: dv.Lowers}
		hd.tr = NewTracker(hd.model)
		if len(dv.Lowers) > 0 {
			hd.tr.StackedOn()
		}
		if dv.Holdable && hold.Below > 0 && hd.model.Enabled() {
			hd.hold = &Hold{Below: hold.Below}
		}
		if hd.sen != nil {
			w.devs = append(w.devs, hd)
		}
	}
	slices.SortFunc(w.devs, func(a, b *watched) int { return cmp.Compare(a.name, b.name) })
	for _, up := range w.devs {
		for _, lower := range up.lowers {
			for _, hd := range w.devs {
				if hd.name == lower {
					hd.uppers = append(hd.uppers, up)
				}
			}
		}
	}
	return w
}

// Len is how many devices are watched.
func (w *Watch) Len() int { return len(w.devs) }

// Has reports whether the device named name is watched.
func (w *Watch) Has(name string) bool {
	return slices.ContainsFunc(w.devs, func(hd *watched) bool { return hd.name == name })
}

// Step reads every watched device's counters (through its sensor: the
// reading the throttle took this period, or a new one), runs its tracker
// on them and the caps the throttle imposed meanwhile, and logs a change
// of state; it returns how many devices' reads started failing, and the
// devices whose hold ceiling changed (valid until the next Step).
func (w *Watch) Step(now time.Time) (failed int, holds []HoldChange) {
	w.changes = w.changes[:0]
	for _, hd := range w.devs {
		hd.ok = false
		cur, err := hd.sen.Read(now)
		if err != nil {
			if !hd.err {
				failed++
				w.log.Warn("device health: read counters", "device", hd.name, "err", err)
			}
			hd.err = true
			continue
		}
		hd.err = false
		if hd.havePrev {
			hd.sample, hd.ok = FromReadings(hd.prev, cur), true
		}
		hd.prev, hd.havePrev = cur, true
	}
	for _, hd := range w.devs {
		if !hd.ok {
			continue
		}
		s := hd.sample
		for _, up := range hd.uppers {
			// A workload held back on a device stacked on this one: this
			// device's rate is the daemon's doing as much as the upper's.
			if up.ok {
				s.Caps.HeldSecs = max(s.Caps.HeldSecs, up.sample.Caps.HeldSecs)
			}
		}
		from := hd.tr.Status().State
		st, changed := hd.tr.Observe(s)
		if changed {
			w.log.Warn("device state change", "device", hd.name, "from", from.String(), "to", st.State.String(),
				"reason", st.Reason, "iops", math.Round(st.IOPS), "bps", math.Round(st.Bps))
			w.events = append(w.events, snapshot.HealthEvent{At: now, Device: hd.name, From: from.String(),
				To: st.State.String(), Reason: st.Reason})
			if len(w.events) > maxEvents {
				w.events = w.events[len(w.events)-maxEvents:]
			}
		}
		w.holdStep(hd, st, now)
	}
	return failed, w.changes
}

// holdStep runs hd's burst hold on its status st: on a change it puts the
// ceiling in force or lifts it (a HoldChange), and logs it.
func (w *Watch) holdStep(hd *watched, st Status, now time.Time) {
	if hd.hold == nil {
		return
	}
	on, changed, why := hd.hold.Observe(st, now)
	if !changed {
		return
	}
	hd.why = why
	if !on {
		hd.ceil = Ceiling{}
		w.changes = append(w.changes, HoldChange{Dev: hd.devNum, Ceiling: hd.ceil})
		w.log.Warn("burst hold released", "device", hd.name, "reason", why)
		return
	}
	c := Ceiling{From: w.hold.FromLevel}
	if b := hd.model.Bytes; b.Enabled() {
		c.Bps = max(b.Baseline, 1)
	}
	if b := hd.model.IOPS; b.Enabled() {
		c.IOPS = max(b.Baseline, 1)
	}
	hd.ceil = c
	w.changes = append(w.changes, HoldChange{Dev: hd.devNum, Ceiling: c})
	w.log.Warn("burst hold engaged: worse levels held to the device's baseline", "device", hd.name, "reason", why,
		"from_level", c.From, "iops", c.IOPS, "bps", c.Bps, "balance", math.Round(1000*st.Balance)/1000)
}

// Devices is the watched devices' part of the snapshot, appended to dst.
func (w *Watch) Devices(dst []snapshot.DeviceHealth) []snapshot.DeviceHealth {
	for _, hd := range w.devs {
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
				FromLevel: w.hold.FromLevel}
			if on {
				bh.CapIOPS, bh.CapBps = hd.ceil.IOPS, hd.ceil.Bps
			}
			dh.Hold = bh
		}
		dst = append(dst, dh)
	}
	return dst
}

// Events are the last device state changes (a copy), nil when none.
func (w *Watch) Events() []snapshot.HealthEvent {
	if len(w.events) == 0 {
		return nil
	}
	return append([]snapshot.HealthEvent(nil), w.events...)
}

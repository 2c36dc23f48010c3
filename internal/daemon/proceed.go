package daemon

import (
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/throttle"
)

// The proceeding stage's seam: the actuator the loop drives, built with
// the originals the state file kept, applied once per tick, and restoring
// every original at shutdown.

// Actuator is what the loop needs of the proceeding stage. *actuate.Actuator
// (cgroup files) implements it; so does the Docker Engine API actuator.
type Actuator interface {
	Devices() []actuate.Device
	ObservePeak(i int, bps float64)
	// Apply returns what is in force on each device (its own slice, read
	// before the next Apply).
	Apply(now time.Time, targets []actuate.Target) ([]actuate.DeviceStatus, error)
	Applied(id string) []actuate.Applied
	// Release restores a workload's originals; Forget drops them
	// unrestored (its cgroup is another one now).
	Release(id string) error
	Forget(id string)
	// Hold bounds a device's worse levels (the burst hold); an error says
	// it cannot (no throttle on the device).
	Hold(dev cgroupfs.Dev, c throttle.Ceiling) error
	// Steer sets the share of a device's capacity its capped workloads
	// get (the latency controller); an error says it cannot.
	Steer(dev cgroupfs.Dev, share float64) error
	RestoreAll() error
	RestoreOrphans(live map[string]bool) error
	Originals() ([]actuate.Original, bool)
	// OpenFiles is how many descriptors it keeps open (the open-file
	// budget leaves room for them).
	OpenFiles() int
}

// newActuator builds the actuator from ac and the originals adopted from
// the state file.
func (d *Daemon) newActuator(ac actuate.Config, adopted []actuate.Original) error {
	ac.Logger = d.log
	if d.opts.StateFile != "" && !ac.DryRun {
		// A knob is written only once its original is in the state file:
		// a crash between the two must not leave ddiskqos values that no
		// later run knows to restore.
		ac.Persist = d.persistOriginals
	}
	mk := d.opts.NewActuator
	if mk == nil {
		mk = func(cfg actuate.Config, adopted []actuate.Original) (Actuator, error) {
			return actuate.New(cfg, adopted)
		}
	}
	// One owner of each device's counters: the throttle and the health
	// stage read the same sensors (health.go).
	ac.Sensors = d.openSensors(ac.Devices)
	var err error
	if d.act, err = mk(ac, adopted); err != nil {
		d.sensors.Close()
		return err
	}
	return nil
}

// proceed hands the actuator this tick's targets and the devices'
// bandwidth, keeps what it reports in force per device (for the
// snapshot), and once the source's listing is complete and the grace has
// passed restores the originals no workload claimed.
func (d *Daemon) proceed(start time.Time, dt float64) {
	for i, dv := range d.sen.EndTick() {
		d.act.ObservePeak(i, float64(dv.Bytes)/dt)
	}
	var err error
	if d.devStatus, err = d.act.Apply(start, d.targets); err != nil {
		d.countErr(snapshot.CauseActuate)
		d.log.Warn("apply levels", "err", err)
	}
	d.controlTick(start, d.lastTick)
	d.actFDs = d.act.OpenFiles()
	if !d.orphansOK && d.synced && start.Sub(d.started) >= d.opts.OrphanGrace {
		d.orphansOK = true
		live := make(map[string]bool, len(d.work)+len(d.refused))
		for _, t := range d.work {
			live[t.w.Cgroup] = true
		}
		for _, r := range d.refused { // claimed, waiting for descriptors
			live[r.w.Cgroup] = true
		}
		if err := d.act.RestoreOrphans(live); err != nil {
			d.countErr(snapshot.CauseActuate)
			d.log.Warn("restore unclaimed cgroups from the state file", "err", err)
		}
	}
}

// restoreAll restores every original; one that cannot be is logged with
// its value, for an operator to set by hand.
func (d *Daemon) restoreAll() error {
	err := d.act.RestoreAll()
	if err != nil {
		left, _ := d.act.Originals()
		for _, o := range left {
			d.log.Error("original value not restored; dropped from the state file, set it by hand",
				"cgroup", o.Cgroup, "knob", o.Knob, "dev", o.DevStr, "value", o.Value)
		}
	}
	return err
}

// persistOriginals is actuate.Config.Persist: it saves the state file with
// origs before the actuator writes the knobs they belong to.
func (d *Daemon) persistOriginals(origs []actuate.Original) error {
	if err := d.store.Write(origs); err != nil {
		d.countErr(snapshot.CauseState)
		return err
	}
	return nil
}

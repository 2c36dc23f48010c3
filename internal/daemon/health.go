package daemon

import (
	"cmp"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devhealth"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
	"github.com/ddiskqos/ddiskqos/internal/health"
	"github.com/ddiskqos/ddiskqos/internal/throttle"
)

// openSensors opens the device sensor of every device to actuate on, the
// one owner of its counters: the actuator's throttle and the health stage
// read them alike. The root is the actuator's sysfs, else the health
// stage's; none: no sensors. A device whose counters cannot be opened
// gets none (the throttle then sizes its caps from the ticks, the health
// stage skips it; both say so).
func (d *Daemon) openSensors(devs []actuate.Device) devsensor.Set {
	root := cmp.Or(d.opts.Actuator.SysRoot, d.opts.Health.SysRoot)
	if root == "" {
		return nil
	}
	names := make([]string, len(devs))
	for i, dv := range devs {
		names[i] = dv.Name
	}
	d.sensors = devsensor.OpenSet(root, names, d.opts.Actuator.Throttle.Period, func(name string, err error) {
		d.log.Warn("device counters not readable", "device", name, "err", err)
	})
	return d.sensors
}

// initHealth builds the storage-health stage (internal/health) over the
// actuated devices and their sensors; its burst holds go to the
// actuator's throttles.
func (d *Daemon) initHealth() (err error) {
	env := health.Env{Actuator: d.opts.ActuatorName, Interval: d.opts.Interval, Now: d.now, Log: d.log,
		Hold: func(dev cgroupfs.Dev, c devhealth.Ceiling) error { return d.act.Hold(dev, throttle.Ceiling(c)) }}
	for _, dv := range d.act.Devices() {
		env.Devices = append(env.Devices, health.Device{Name: dv.Name, Dev: dv.Dev, Sensor: d.sensors.Named(dv.Name)})
	}
	d.hl, err = health.New(d.opts.Health, env)
	return err
}

// closeHealth stops the health stage and closes the device sensors (the
// actuator's throttle has stopped by then: shutdown restores first).
func (d *Daemon) closeHealth() {
	if d.hl != nil {
		d.hl.Close()
	}
	d.sensors.Close()
	d.sensors = nil
}

package daemon

import (
	"time"

	"github.com/ddiskqos/ddiskqos/internal/control"
	"github.com/ddiskqos/ddiskqos/internal/iolat"
)

// The latency controller's stage (internal/control, control.Device): per
// throttled device, the protected requests the latency sensor timed this
// tick — the small requests (control.SmallRequest) of tracked workloads
// that no cap held on the device at the last Apply — and, after this
// tick's Apply, one step of the device's controller, whose share the
// throttle gets (Actuator.Steer). Without the sensor nothing here runs and
// the throttle keeps its fixed share.

// controlBegin starts a tick's input.
func (d *Daemon) controlBegin() { d.ctl.Begin(devsOf(d.act.Devices())) }

// controlAdd charges one delta of the sensor to its device's input; t is
// its workload (nil: no tracked workload).
func (d *Daemon) controlAdd(t *tracked, dl *iolat.Delta) {
	d.ctl.Add(dl, func(i int) bool { return t != nil && !d.cappedOn(t, i) })
}

// cappedOn reports whether t had a cap of the throttle on device i at the
// last Apply.
func (d *Daemon) cappedOn(t *tracked, i int) bool {
	ap, ok := t.ah.Applied()
	if !ok {
		ap = d.act.Applied(t.w.ID)
	}
	return i < len(ap) && !ap[i].Limits.IsZero()
}

// controlTick steps each throttled device's controller with this tick's
// input and what its throttle did since the last tick (after this tick's
// Apply: d.devStatus is fresh), and steers the throttle. prev is the last
// tick's start (zero: none).
func (d *Daemon) controlTick(now, prev time.Time) {
	if d.lat.Sensor() == nil || d.opts.Latency.NoControl {
		return
	}
	for i := range d.ctl.Len() {
		c := d.ctl.Device(i)
		if c.Off() || i >= len(d.devStatus) || !d.devStatus[i].Capping {
			continue
		}
		st := d.devStatus[i]
		in, out, err := c.Step(now, control.Throttle{Capped: st.CappedAt.After(prev), Held: st.HeldAt.After(prev),
			Max: st.ShareMost, Contended: st.ContendedAt.After(prev), Used: st.Used, InForce: st.InForce,
			Refused: st.Guard.RefusedAt.After(prev), Queues: st.Guard.Queues, Shallow: st.Guard.Shallow}, d.controlConfig)
		if err != nil {
			d.log.Warn("latency controller not run: the throttle keeps its fixed share", "device", st.Device.Name, "err", err)
			continue
		}
		d.log.Debug("latency controller", "device", st.Device.Name, "requests", in.Hist.Count(), "capped", in.Capped,
			"held", in.Held, "quiet", in.Quiet, "contended", in.Contended, "used", in.Used, "p99", out.P99, "target", out.Target,
			"share", out.Share, "lifted", out.Lifted, "probing", out.Probing)
		if err := d.act.Steer(st.Device.Dev, out.Share); err != nil {
			c.Stop()
			d.log.Warn("latency controller cannot steer the device: the throttle keeps its fixed share", "device", st.Device.Name, "err", err)
		}
	}
}

// controlConfig is a device's controller's configuration.
func (d *Daemon) controlConfig() control.Config {
	start, most := d.opts.Actuator.Throttle.SteerRange()
	return control.Config{Target: d.opts.Latency.Target, Multiple: d.opts.Latency.Multiple, Start: start, Max: most,
		Floor: min(control.DefaultFloor, start), Conserve: !d.opts.Latency.NoConserve}
}

// controlState is device i's controller's state; ok false when it has none.
func (d *Daemon) controlState(i int) (control.State, bool) { return d.ctl.State(i) }

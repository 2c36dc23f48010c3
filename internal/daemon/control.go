package daemon

import (
	"time"

	"github.com/ddiskqos/ddiskqos/internal/control"
	"github.com/ddiskqos/ddiskqos/internal/iolat"
)

// The latency controller's stage (internal/control): per throttled device,
// the protected requests the latency sensor timed this tick — the small
// requests (control.SmallRequest) of tracked workloads that no cap held on
// the device at the last Apply — and, after this tick's Apply, one step of
// the device's controller, whose share the throttle gets (Actuator.Steer).
// Without the sensor nothing here runs and the throttle keeps its fixed
// share.

// devControl is one actuated device's controller and this tick's input.
type devControl struct {
	c          *control.Controller // nil: not made yet (no throttle seen on the device)
	off        bool                // the device cannot be steered (no throttle, or a bad config: logged once)
	hist       iolat.Hist
	prot, rest uint64 // bytes of the protected requests and of the others this tick
}

// controlBegin starts a tick's input.
func (d *Daemon) controlBegin() {
	l := &d.lat
	if n := len(d.act.Devices()); len(l.ctl) != n {
		l.ctl = make([]devControl, n)
	}
	for i := range l.ctl {
		c := &l.ctl[i]
		c.hist, c.prot, c.rest = iolat.Hist{}, 0, 0
	}
}

// controlAdd charges one delta of the sensor to its device's input; t is
// its workload (nil: no tracked workload).
func (d *Daemon) controlAdd(t *tracked, dl *iolat.Delta) {
	if dl.Count == 0 {
		return
	}
	devs := d.act.Devices()
	i := 0
	for i < len(devs) && devs[i].Dev != dl.Dev {
		i++
	}
	if i == len(devs) || i >= len(d.lat.ctl) {
		return
	}
	c := &d.lat.ctl[i]
	if t == nil || dl.Bytes/dl.Count > control.SmallRequest || d.cappedOn(t, i) {
		c.rest += dl.Bytes
		return
	}
	c.hist.AddTick(&dl.Hist)
	c.prot += dl.Bytes
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
	l := &d.lat
	if l.sen == nil || d.opts.Latency.NoControl {
		return
	}
	for i := range l.ctl {
		c := &l.ctl[i]
		if c.off || i >= len(d.devStatus) || !d.devStatus[i].Capping {
			continue
		}
		st := d.devStatus[i]
		if c.c == nil {
			start, most := d.opts.Actuator.Throttle.SteerRange()
			ctl, err := control.New(control.Config{Target: d.opts.Latency.Target, Multiple: d.opts.Latency.Multiple, Start: start, Max: most,
				Floor: min(control.DefaultFloor, start)})
			if err != nil {
				c.off = true
				d.log.Warn("latency controller not run: the throttle keeps its fixed share", "device", st.Device.Name, "err", err)
				continue
			}
			c.c = ctl
		}
		in := control.Input{At: now, Hist: c.hist, Capped: st.CappedAt.After(prev), Held: st.HeldAt.After(prev),
			Quiet: c.rest <= c.prot, Max: st.ShareMost}
		out := c.c.Step(in)
		d.log.Debug("latency controller", "device", st.Device.Name, "requests", in.Hist.Count(), "capped", in.Capped,
			"held", in.Held, "quiet", in.Quiet, "p99", out.P99, "target", out.Target, "share", out.Share, "probing", out.Probing)
		if err := d.act.Steer(st.Device.Dev, out.Share); err != nil {
			c.off = true
			d.log.Warn("latency controller cannot steer the device: the throttle keeps its fixed share", "device", st.Device.Name, "err", err)
		}
	}
}

// controlState is device i's controller's state; ok false when it has none.
func (d *Daemon) controlState(i int) (control.State, bool) {
	if i >= len(d.lat.ctl) || d.lat.ctl[i].c == nil || d.lat.ctl[i].off {
		return control.State{}, false
	}
	return d.lat.ctl[i].c.State(), true
}

package control

import (
	"slices"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/iolat"
)

// Device is one throttled device's controller as a stage of the daemon's
// tick: the latency sensor fills the tick's input with the requests it
// timed on the device (Begin, Add), the actuator with what the device's
// throttle did since the last tick (Throttle), and Step returns the share
// the throttle gets. The zero Device is ready: its Controller is made at
// its first Step.
type Device struct {
	c          *Controller // nil: not made yet (no throttle seen on the device)
	off        bool        // the device cannot be steered (no throttle, or a bad config)
	hist       iolat.Hist
	alone      iolat.Hist // the protected requests the device served alone
	prot, rest uint64     // bytes of the protected requests and of the others this tick
}

// Throttle is what a device's throttle did since the last tick (the
// actuator's device status): Input's Capped, Held, Max, Contended, Used,
// InForce, Refused, Queues and Shallow.
type Throttle struct {
	Capped, Held, Contended, Refused, Queues, Shallow bool
	Max, Used, InForce                                float64
}

// Begin starts a tick's input.
func (d *Device) Begin() {
	d.hist, d.alone, d.prot, d.rest = iolat.Hist{}, iolat.Hist{}, 0, 0
}

// Add charges one delta of the latency sensor to the tick's input;
// protected: its cgroup is a tracked workload's that no cap of the
// throttle held on the device at the last Apply. Only small requests
// (SmallRequest) of protected workloads are the controller's measure.
func (d *Device) Add(dl *iolat.Delta, protected bool) {
	if dl.Count == 0 {
		return
	}
	if !protected || dl.Bytes/dl.Count > SmallRequest {
		d.rest += dl.Bytes
		return
	}
	d.hist.AddTick(&dl.Hist)
	d.alone.AddAlone(&dl.Alone)
	d.prot += dl.Bytes
}

// Off reports whether the device is not steered (Stop, or its controller
// could not be made).
func (d *Device) Off() bool { return d.off }

// Stop stops steering the device: its throttle keeps its fixed share.
func (d *Device) Stop() { d.off = true }

// Step runs one step of the device's controller on the tick's input and
// th, at; cfg is the controller's configuration, asked for once, at the
// first Step. It returns the input and the controller's output (whose
// Share the throttle gets), or the error of New (and the device is off).
func (d *Device) Step(at time.Time, th Throttle, cfg func() Config) (Input, State, error) {
	if d.c == nil {
		c, err := New(cfg())
		if err != nil {
			d.off = true
			return Input{}, State{}, err
		}
		d.c = c
	}
	in := Input{At: at, Hist: d.hist, Alone: d.alone, Capped: th.Capped, Held: th.Held, Quiet: d.rest <= d.prot, Max: th.Max,
		Contended: th.Contended, Used: th.Used, InForce: th.InForce, Refused: th.Refused, Queues: th.Queues, Shallow: th.Shallow}
	return in, d.c.Step(in), nil
}

// State is the controller's state; ok false when it has none.
func (d *Device) State() (State, bool) {
	if d.c == nil || d.off {
		return State{}, false
	}
	return d.c.State(), true
}

// Set is the controllers of a list of devices (the actuator's, in its
// order), each found by its device number.
type Set struct {
	devs []cgroupfs.Dev
	d    []Device
}

// Begin starts a tick's input on devs: a list of another length starts
// the controllers over.
func (s *Set) Begin(devs []cgroupfs.Dev) {
	if len(devs) != len(s.d) {
		s.d = make([]Device, len(devs))
	}
	s.devs = devs
	for i := range s.d {
		s.d[i].Begin()
	}
}

// Add charges one delta of the latency sensor to its device's input (none
// of the list: not charged); protected(i) says whether its cgroup is a
// tracked workload's that no cap held on device i (asked only for small
// requests, the measure).
func (s *Set) Add(dl *iolat.Delta, protected func(i int) bool) {
	if dl.Count == 0 {
		return
	}
	i := slices.Index(s.devs, dl.Dev)
	if i < 0 {
		return
	}
	s.d[i].Add(dl, dl.Bytes/dl.Count <= SmallRequest && protected(i))
}

// Len is the number of devices.
func (s *Set) Len() int { return len(s.d) }

// Device is device i's controller (0 <= i < Len).
func (s *Set) Device(i int) *Device { return &s.d[i] }

// State is device i's controller's state; ok false when it has none.
func (s *Set) State(i int) (State, bool) {
	if i < 0 || i >= len(s.d) {
		return State{}, false
	}
	return s.d[i].State()
}

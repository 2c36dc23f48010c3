// Package health is the loop's storage-health stage: the actuated
// devices' health (devhealth.Watch over their device sensors, with the
// burst holds whose ceilings it hands the actuator), the workloads' tasks
// in D state (sampled under a rotating budget per tick), the host's
// blocked tasks (procs_blocked of <proc>/stat) and a sync-write probe. Its
// picture is snapshot.Health.
//
// It knows nothing of the daemon: the devices and their sensors, the
// workloads' tasks and the actuator's hold come in as values and
// interfaces (Env, Tasks), and the loop calls it once per tick:
// TickStart, DState for each workload read, Tick, Snapshot.
package health

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devhealth"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/sensor"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// Options configure the storage-health sensors: each actuated device's
// own counters, read through its device sensor (devsensor, the same
// readings the throttle's capacity estimate gets, with the caps the
// throttle imposed beside them), through a burst-credit model and a
// throttle detector (internal/devhealth), the host's and the workloads'
// tasks in D state, and a sync-write probe.
type Options struct {
	// SysRoot and ProcRoot are sysfs and procfs ("" skips the device
	// and task sensors alike).
	SysRoot, ProcRoot string
	// Models are burst-credit models by device name; a device without
	// one gets the detector alone.
	Models map[string]devhealth.Model
	// DStateWorkloads is how many workloads per tick have their tasks'
	// states read (those that did I/O this tick or had tasks in D when
	// last looked at; rotating); 0 reads none. DStateTasks caps the
	// tasks read per workload (0: 256).
	DStateWorkloads, DStateTasks int
	// ProbePath is the file of the sync-write probe, "" for none;
	// ProbeInterval how often it writes (0: Env.Interval).
	ProbePath     string
	ProbeInterval time.Duration
	// HoldBelow: when a modelled device's burst balance falls below this
	// fraction, its levels HoldFromLevel and worse are held to the model's
	// baseline (devhealth.Hold, the throttle's ceiling); 0: never.
	HoldBelow     float64
	HoldFromLevel int
}

// Device is one actuated device as the stage is given it.
type Device struct {
	Name string
	Dev  cgroupfs.Dev
	// Sensor reads its counters (shared with the throttle); nil: none,
	// and the device is not watched.
	Sensor *devsensor.Device
}

// Env is what the loop that runs the stage gives it.
type Env struct {
	// Devices are the actuated devices.
	Devices []Device
	// Hold puts a burst hold's ceiling in force on a device's throttle
	// (the zero Ceiling lifts it); an error says the device has no
	// throttle, so its levels cannot be held. Actuator names the
	// actuator in that warning.
	Hold     func(dev cgroupfs.Dev, c devhealth.Ceiling) error
	Actuator string
	// Interval is the loop's, the probe's default.
	Interval time.Duration
	// Now is the probe's clock (nil: time.Now).
	Now func() time.Time
	Log *slog.Logger
}

// Tasks are a workload's tasks as the D-state sampling reads them
// (*cgroupfs.Cgroup).
type Tasks interface {
	CountDState(procRoot string, max int, buf []byte) (cgroupfs.TaskCount, []byte, error)
}

// Stage is the storage-health stage.
type Stage struct {
	opts    Options
	hold    func(dev cgroupfs.Dev, c devhealth.Ceiling) error
	watch   *devhealth.Watch // the devices' trackers and burst holds
	blocked *uint64
	// procStat is <proc>/stat kept open for procs_blocked (nil: not
	// opened yet; procStatErr: it could not be, so it is not tried again).
	procStat    *cgroupfs.ProcStat
	procStatErr bool
	probe       *sensor.SyncProbe
	stop        context.CancelFunc

	// D-state sampling of this tick: the loop's tick, budget left,
	// candidates seen, workloads sampled.
	tick                  uint64
	budget, seen, sampled int
	stride                int // last tick's candidates / budget, at least 1
	buf                   []byte
}

// New builds the stage over env's devices and starts the probe. A model
// for a device that is not watched (not actuated, or without counters)
// is an error.
func New(opts Options, env Env) (*Stage, error) {
	s := &Stage{opts: opts, hold: env.Hold, stride: 1}
	if s.opts.DStateTasks == 0 {
		s.opts.DStateTasks = 256
	}
	var devs []devhealth.Device
	if opts.SysRoot != "" {
		for _, dv := range env.Devices {
			hd := devhealth.Device{Name: dv.Name, Dev: dv.Dev, Model: opts.Models[dv.Name]}
			hd.Holdable = s.holdable(hd, env)
			if hd.Sensor = dv.Sensor; hd.Sensor == nil {
				env.Log.Warn("device health: no counters", "device", dv.Name)
				continue
			}
			hd.Lowers = host.LowerOf(host.Roots{Sys: opts.SysRoot}, dv.Name)
			devs = append(devs, hd)
		}
	}
	s.watch = devhealth.NewWatch(devs, devhealth.HoldConfig{Below: opts.HoldBelow, FromLevel: opts.HoldFromLevel}, env.Log)
	for name := range opts.Models {
		if !s.watch.Has(name) {
			return nil, errors.New("burst model for device " + name + ": not an actuated device")
		}
	}
	if opts.ProbePath != "" {
		p, err := sensor.NewSyncProbe(opts.ProbePath, env.Now)
		if err != nil {
			return nil, err
		}
		iv := opts.ProbeInterval
		if iv <= 0 {
			iv = env.Interval
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		s.probe, s.stop = p, func() { cancel(); <-done }
		go func() {
			defer close(done)
			p.Run(ctx, iv)
		}()
	}
	return s, nil
}

// holdable reports whether dv can have a burst hold: one is configured,
// the device has a model and the actuator a throttle on it.
func (s *Stage) holdable(dv devhealth.Device, env Env) bool {
	if s.opts.HoldBelow <= 0 || !dv.Model.Enabled() {
		return false
	}
	if err := s.hold(dv.Dev, devhealth.Ceiling{}); err != nil {
		env.Log.Warn("burst hold: the device has no throttle, its levels cannot be held", "device", dv.Name,
			"actuator", env.Actuator, "err", err)
		return false
	}
	return true
}

// Close stops the probe, waiting for a write under way (a test's temporary
// directory was removed while the probe wrote in it), and closes
// <proc>/stat; the device sensors are their owner's to close.
func (s *Stage) Close() {
	if s.stop != nil {
		s.stop()
	}
	s.watch = nil
	if s.procStat != nil {
		s.procStat.Close()
		s.procStat = nil
	}
}

// TickStart opens the D-state budget of the loop's tick tick.
func (s *Stage) TickStart(tick uint64) {
	if s.seen > 0 && s.opts.DStateWorkloads > 0 {
		s.stride = max(1, (s.seen+s.opts.DStateWorkloads-1)/s.opts.DStateWorkloads)
	}
	s.tick = tick
	s.budget, s.seen, s.sampled = s.opts.DStateWorkloads, 0, 0
}

// DState is a workload's tasks in D state: counted again from tasks when
// the workload is a candidate this tick (moved: it did I/O; or last, its
// count when last looked at, is not 0) and the rotating budget allows,
// else last.
func (s *Stage) DState(tasks Tasks, moved bool, last int32) int32 {
	if s.opts.ProcRoot == "" || (!moved && last == 0) {
		return last
	}
	// Every candidate counts in seen, over the budget too: the next
	// tick's stride is candidates / budget (seen stopping at the budget
	// left the stride at 1, and each tick read the same first ones).
	s.seen++
	if s.budget == 0 || (s.seen+int(s.tick))%s.stride != 0 {
		return last
	}
	tc, buf, err := tasks.CountDState(s.opts.ProcRoot, s.opts.DStateTasks, s.buf)
	s.buf = buf
	if err != nil {
		return last // gone: the next read of its counters says so
	}
	s.budget--
	s.sampled++
	return int32(tc.D)
}

// Tick steps the devices' health (devhealth.Watch), hands the actuator
// the burst holds' ceilings that changed, and reads the host's blocked
// tasks. It returns how many devices' reads started failing.
func (s *Stage) Tick(now time.Time) (failed int) {
	if s.watch != nil {
		var holds []devhealth.HoldChange
		failed, holds = s.watch.Step(now)
		for _, c := range holds {
			s.hold(c.Dev, c.Ceiling) // it could when New found the device holdable
		}
	}
	s.blocked = nil
	if s.opts.ProcRoot != "" && s.procStat == nil && !s.procStatErr {
		ps, err := cgroupfs.OpenProcStat(s.opts.ProcRoot)
		s.procStat, s.procStatErr = ps, err != nil
	}
	if s.procStat != nil {
		if n, err := s.procStat.ProcsBlocked(); err == nil {
			s.blocked = &n
		}
	}
	return failed
}

// Snapshot is this tick's picture; nil when no sensor is on.
func (s *Stage) Snapshot() *snapshot.Health {
	if (s.watch == nil || s.watch.Len() == 0) && s.probe == nil && s.blocked == nil {
		return nil
	}
	out := &snapshot.Health{BlockedTasks: s.blocked, DStateSampled: s.sampled}
	if s.watch != nil {
		out.Devices = s.watch.Devices(out.Devices)
		out.Events = s.watch.Events()
	}
	if s.probe != nil {
		p, _ := s.probe.Snapshot()
		out.Probe = &p
	}
	return out
}

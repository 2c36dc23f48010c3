// Package actuate is the "proceeding" stage: it turns "workload W is at
// level L" into writes on W's cgroup, per device, through the mechanisms in
// force there (the registry, internal/mech): the weight the host
// layer found for the device — BFQ, iocost or CFQ — or, where no scheduler
// honours weights, a work-conserving throttle; the throttle beside a weight;
// io.latency's target.
//
// It remembers the value every knob had before its first write (the
// originals), writes only what changed, rewrites after a while in case
// someone else changed a value, and puts the originals back when a workload
// is released and when the daemon exits. The originals are exported so the
// daemon can keep them in its state file: after a crash a new daemon
// restores them instead of leaving stale weights behind.
package actuate

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/throttle"
)

// Config is the actuator's configuration.
type Config struct {
	Hierarchy cgroupfs.Hierarchy
	Devices   []Device
	Throttle  throttle.Config
	// Params are the mechanisms' parameters (io.latency's target).
	Params mech.Params
	// Reassert is how long a written value is trusted before it is written
	// again (someone else may have changed it). 0 disables rewriting.
	Reassert time.Duration
	DryRun   bool
	// Sensors are the devices' sensors, indexed like Devices (a nil entry,
	// or a short or nil slice: none given): the throttle reads each
	// device's own counters through them, and adds what its caps did
	// (devsensor.Caps). The caller owns them. A device without one gets
	// its own from SysRoot.
	Sensors []*devsensor.Device
	// SysRoot is sysfs ("/sys"), where the throttle opens its own sensor
	// of a device given none; "" means it sizes caps from ObservePeak
	// instead.
	SysRoot string
	Logger  *slog.Logger
	// Persist, when set, is called with every recorded original after new
	// ones were recorded and before any knob they belong to is written: a
	// knob is written only once its original is durable. When it fails,
	// nothing of that Apply is written (it is tried again next Apply).
	Persist func([]Original) error
	// OnPanic gets a panic of a throttle's loop (throttle.Options.OnPanic):
	// the loop has ended with its caps in force, and the caller restores
	// the originals (RestoreAll). nil: the panic ends the process.
	OnPanic func(value any, stack []byte)
}

// Target is what one workload should have after this tick.
type Target struct {
	ID     string
	Cgroup string // relative to the hierarchy
	Level  int    // 1..policy.NumLevels; ignored when Exempt
	Weight cgroupfs.Weight
	Exempt bool
	// Active[i] is whether the workload did I/O on Devices[i] in the last
	// tick; nil means none. Only the throttle mechanism looks at it.
	Active []bool
	// Handle, when set, is where *Actuator keeps a reference to the
	// workload's state between ticks, so a caller handing in the same
	// Handle every tick spares it the lookup by ID (see Handle.Applied).
	// Optional; other actuators ignore it.
	Handle *Handle
}

// Handle refers to one workload's state in an *Actuator: the zero Handle
// to none. Only the Actuator sets it, through Target.Handle.
type Handle struct{ w *wstate }

// Applied is Actuator.Applied of the workload h refers to, without the
// lookup by ID; ok is false when h refers to no workload in force (never
// applied, released, gone): ask Applied(id) then.
func (h *Handle) Applied() (_ []Applied, ok bool) {
	if h == nil || h.w == nil || h.w.dropped {
		return nil, false
	}
	return h.w.applied, true
}

// Applied is what is in force for one workload on one device.
type Applied struct {
	Device Device
	Weight cgroupfs.Weight // weight mechanisms
	Limits cgroupfs.Limits // throttle mechanism; zero = uncapped
	// Knobs are the values in force of the device's per-level mechanisms
	// beside its weight or caps (Role Target), as text: "mechanism=value"
	// in table order, joined by "; " ("level-limit=rbps=10485760
	// wbps=10485760 riops=max wiops=max"); "" when none has a value.
	Knobs string
	Err   error // last failure to apply, nil when in force
}

// wstate is the actuator's memory of one workload.
type wstate struct {
	cgroup  string
	applied []Applied   // indexed like Config.Devices
	knobs   [][]knobSet // per device, per leveled mechanism
	thrErr  []error     // per device: the throttle's original not recorded
	// thr, per device: the throttle's original recorded (rec) and, as
	// last found, durable (dur; once durable it stays so while recorded).
	thr     []struct{ rec, dur bool }
	at      time.Time // when the values were last written in full
	keys    []knobKey // originals recorded for this workload
	dropped bool      // released or forgotten: Handles to it are stale
	// seen is the last Apply that listed it for collect (Actuator.gen).
	seen uint64
}

// knobSet is one leveled knob of a workload: the value last written, and
// whether it is known to be in force.
type knobSet struct {
	v   string
	ok  bool
	err error
}

// Actuator applies levels. It is owned by the daemon loop: not safe for
// concurrent use (the throttle's fast loops run beside it and lock their
// own state).
type Actuator struct {
	cfg  Config
	log  *slog.Logger
	devs []device
	work map[string]*wstate
	orig *book
	// members is Apply's scratch: per throttled device, its workloads,
	// and memberW their states (indexed alike).
	members [][]throttle.Member
	memberW [][]*wstate
	pending []pendingWrite
	status  []DeviceStatus
	// failing holds the knobs whose last read or write failed, with when
	// that began: a knob that keeps failing is reported once (see Apply),
	// and once more when it works again.
	failing map[knobKey]time.Time
	// What collect looks at: the workloads whose knobs this Apply touched
	// (changed; gen counts the Applies), and those the throttle may cap
	// (capped: their throttle original is recorded on some device). Not
	// every workload: at 10,000, a walk of them all was
	// 2.5 ms a tick.
	changed []*wstate
	capped  []*wstate
	gen     uint64
}

// pendingWrite is a knob Apply will write once its original is durable.
type pendingWrite struct {
	w    *wstate
	i, j int // device, leveled mechanism
	key  knobKey
	v    string
	wt   cgroupfs.Weight
}

// New returns an Actuator. Originals from a previous run (its state file)
// may be passed: they are adopted as the true originals of those knobs, so
// the values the crashed daemon wrote are never mistaken for them.
func New(cfg Config, adopted []Original) (*Actuator, error) {
	if cfg.Hierarchy.Mount == "" {
		return nil, errors.New("actuator: no cgroup hierarchy")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
		cfg.Logger = log
	}
	a := &Actuator{cfg: cfg, log: log, work: map[string]*wstate{}, orig: newBook(cfg.Persist),
		members: make([][]throttle.Member, len(cfg.Devices)),
		memberW: make([][]*wstate, len(cfg.Devices)), failing: map[knobKey]time.Time{}}
	for i, d := range cfg.Devices {
		var sen *devsensor.Device
		if i < len(cfg.Sensors) {
			sen = cfg.Sensors[i]
		}
		dv, err := newDevice(cfg, d, sen)
		if err != nil {
			return nil, err
		}
		a.devs = append(a.devs, dv)
	}
	for _, o := range adopted {
		dev, err := cgroupfs.ParseDev(o.DevStr)
		if err != nil {
			return nil, fmt.Errorf("adopt original of %s: %w", o.Cgroup, err)
		}
		o.Dev = dev
		m, err := mech.ByKnob(o.Knob)
		if err == nil && m.Open == nil {
			err = errors.New(string(m.Name) + " is the Docker actuator's: run with --actuator docker once to restore it")
		} else if err == nil {
			_, err = m.Open(cfg.Hierarchy, dev, cfg.Params)
		}
		if err != nil {
			return nil, fmt.Errorf("adopt original of %s on %s: %w", o.Cgroup, o.DevStr, err)
		}
		a.orig.adopt(o)
	}
	return a, nil
}

// Devices returns the devices actuated on.
func (a *Actuator) Devices() []Device { return a.cfg.Devices }

// Applied returns what is in force for workload id, nil if unknown. The
// slice is the actuator's own: read it before the next Apply.
func (a *Actuator) Applied(id string) []Applied {
	if w, ok := a.work[id]; ok {
		return w.applied
	}
	return nil
}

// Apply brings every target's cgroup to its level, in three steps: it
// records the original of every knob it is about to write (and of every
// knob the throttle may write before the next tick), makes them durable
// (Config.Persist), and only then writes — each write read back. Errors do
// not stop the other targets: they are recorded per device (see Applied)
// and returned joined. A knob that keeps failing tick after tick is
// returned only at the Apply where it began to fail (the caller logs and
// counts it once); when it works again the actuator logs a WARN saying so.
// Applied carries its error meanwhile. A cgroup that has gone is not an
// error; its workload is dropped. It returns what is in force on each
// device, indexed like Devices (the actuator's own slice: read it before
// the next Apply).
func (a *Actuator) Apply(now time.Time, targets []Target) ([]DeviceStatus, error) {
	var errs []error
	a.pending = a.pending[:0]
	a.gen++
	a.changed = a.changed[:0]
	for i := range a.members {
		a.members[i] = a.members[i][:0]
		a.memberW[i] = a.memberW[i][:0]
	}
	for i := range targets {
		t := &targets[i]
		if t.Exempt {
			if _, ok := a.work[t.ID]; ok {
				if err := a.Release(t.ID); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		if err := a.plan(now, t); err != nil {
			if errors.Is(err, cgroupfs.ErrCgroupGone) {
				a.forget(t.ID)
				continue
			}
			errs = append(errs, err)
		}
	}
	if err := a.orig.flush("knob(s)"); err != nil {
		errs = append(errs, err)
	}
	for _, p := range a.pending {
		if p.w.dropped {
			continue
		}
		ks := &p.w.knobs[p.i][p.j]
		if a.orig.fresh[p.key] {
			ks.ok, ks.err = false, errors.New("not written: its original value is not saved yet")
			continue
		}
		dm := a.devs[p.i].leveled[p.j]
		err := dm.knob.Write(p.w.cgroup, p.v)
		if err == nil {
			err = mech.Verify(dm.knob, dm.m.Knob, p.w.cgroup, p.v)
		}
		if dm.m.Role == mech.Weight {
			p.w.applied[p.i].Weight = p.wt
		}
		ks.v, ks.ok, ks.err = p.v, err == nil, err
		if err != nil {
			if errors.Is(err, cgroupfs.ErrCgroupGone) {
				a.forgetW(p.w)
				continue
			}
			errs = appendNew(errs, a.failed(p.key, now, err))
			continue
		}
		a.works(p.key, now)
	}
	for i := range a.devs {
		if t := a.devs[i].thr; t != nil {
			// Only a member whose original was recorded can be durable;
			// once durable, it stays so (no look-up per member and tick).
			for j := range a.members[i] {
				m := &a.members[i][j]
				ts := &a.memberW[i][j].thr[i]
				if ts.rec && !ts.dur {
					ts.dur = a.orig.durable(knobKey{m.Cgroup, a.devs[i].thrKnob, a.devs[i].Dev})
				}
				m.Durable = ts.dur
			}
			t.Update(a.members[i])
		}
	}
	a.collect()
	return a.deviceStatus(), errors.Join(errs...)
}

// collect sets what is in force for Applied: the first error among a
// device's leveled knobs, else the throttle's. Only for the workloads
// whose knobs this Apply touched (a.changed) and those the throttle may
// cap (a.capped): every other workload's is what it was.
func (a *Actuator) collect() {
	for _, w := range a.changed {
		a.collectW(w)
	}
	capped := a.capped[:0]
	for _, w := range a.capped {
		if w.dropped {
			continue
		}
		capped = append(capped, w)
		if w.seen != a.gen {
			a.collectW(w)
		}
	}
	clear(a.capped[len(capped):])
	a.capped = capped
}

// change lists w for collect, once per Apply.
func (a *Actuator) change(w *wstate) {
	if w.seen != a.gen {
		w.seen = a.gen
		a.changed = append(a.changed, w)
	}
}

// collectW sets what is in force for w.
func (a *Actuator) collectW(w *wstate) {
	if w.dropped {
		return
	}
	for i := range a.devs {
		ap := &w.applied[i]
		ap.Err = nil
		for _, ks := range w.knobs[i] {
			if ks.err != nil {
				ap.Err = ks.err
				break
			}
		}
		if a.devs[i].targets {
			ap.Knobs = knobsText(a.devs[i].leveled, w.knobs[i], ap.Knobs)
		}
		if t := a.devs[i].thr; t != nil {
			// The throttle writes (and fails to write) only caps
			// whose original was recorded: others need no look-up.
			var l cgroupfs.Limits
			var err error
			if w.thr[i].rec {
				l, err = t.InForce(w.cgroup)
			}
			ap.Limits = l
			if ap.Err == nil {
				ap.Err = cmpErr(w.thrErr[i], err)
			}
		}
	}
}

// cmpErr is the first non-nil of errs.
func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// deviceStatus is what is in force on each device.
func (a *Actuator) deviceStatus() []DeviceStatus {
	a.status = a.status[:0]
	for i := range a.devs {
		st := DeviceStatus{Device: a.devs[i].Device}
		if t := a.devs[i].thr; t != nil {
			st.Capping = true
			st.TopActive = t.TopActive()
			st.CapacityBps, st.CapacityIOPS = t.Capacity()
			st.Share, st.ShareMost, st.CappedAt, st.HeldAt = t.Load()
			st.ContendedAt, st.Used, st.InForce = t.Contention()
			st.Guard = t.Guard()
		}
		a.status = append(a.status, st)
	}
	return a.status
}

// plan records what one target needs: the originals of the knobs to write
// (read now, before any write) and the writes themselves.
func (a *Actuator) plan(now time.Time, t *Target) error {
	var (
		w  *wstate
		ok bool
	)
	if t.Handle != nil && t.Handle.w != nil && !t.Handle.w.dropped {
		w, ok = t.Handle.w, true
	} else {
		w, ok = a.work[t.ID]
	}
	if !ok || w.cgroup != t.Cgroup {
		if ok {
			if err := a.Release(t.ID); err != nil && !errors.Is(err, cgroupfs.ErrCgroupGone) {
				return err
			}
		}
		w = a.newState(t.Cgroup)
		a.work[t.ID] = w
		a.change(w)
	}
	if t.Handle != nil {
		t.Handle.w = w
	}
	if a.cfg.Reassert > 0 && now.Sub(w.at) >= a.cfg.Reassert {
		for i := range w.knobs { // trust nothing written before: write all again
			for j := range w.knobs[i] {
				w.knobs[i][j].ok = false
			}
		}
		w.at = now
	}
	var errs []error
	for i := range a.devs {
		d := &a.devs[i]
		for j, dm := range d.leveled {
			ks := &w.knobs[i][j]
			want := dm.knob.Want(t.Level, t.Weight)
			if ks.ok && ks.v == want && ks.err == nil && (dm.m.Role != mech.Weight || w.applied[i].Weight == t.Weight) {
				continue
			}
			a.change(w)
			if a.cfg.DryRun {
				ks.v, ks.ok, ks.err = want, true, nil
				if dm.m.Role == mech.Weight {
					w.applied[i].Weight = t.Weight
				}
				continue
			}
			k, err := a.record(w, dm.knob, dm.m.Knob, d.Dev)
			if err != nil {
				if errors.Is(err, cgroupfs.ErrCgroupGone) {
					return err
				}
				ks.err = err
				errs = appendNew(errs, a.failed(k, now, err))
				continue
			}
			a.pending = append(a.pending, pendingWrite{w: w, i: i, j: j, key: k, v: want, wt: t.Weight})
		}
		if d.thr == nil {
			continue
		}
		if w.thrErr[i] != nil {
			w.thrErr[i] = nil
			a.change(w)
		}
		// Recorded once, the original stays in the book as long as w
		// (every path that drops it drops w): no look-up per demoted
		// workload and tick (a string-keyed map, 1 ms a tick at 1,000
		// demoted) unless a knob is failing.
		if d.thr.Wants(t.Level) && !a.cfg.DryRun && (!w.thr[i].rec || len(a.failing) > 0) {
			k, err := a.record(w, d.thr.Knob(), d.thrKnob, d.Dev)
			if err != nil {
				if errors.Is(err, cgroupfs.ErrCgroupGone) {
					return err
				}
				w.thrErr[i] = err
				a.change(w)
				errs = appendNew(errs, a.failed(k, now, err))
				continue
			}
			if !slices.ContainsFunc(w.thr, func(r struct{ rec, dur bool }) bool { return r.rec }) {
				a.capped = append(a.capped, w) // its first recorded throttle original
			}
			w.thr[i].rec = true
			a.works(k, now)
		}
		a.members[i] = append(a.members[i], throttle.Member{Cgroup: w.cgroup, Level: t.Level})
		a.memberW[i] = append(a.memberW[i], w)
	}
	return errors.Join(errs...)
}

// wstate1 is a workload's state on one device, in one allocation: the
// common case, where five (352 B) stood for 408 B and four more objects
// per workload (at 10,000 workloads).
type wstate1 struct {
	w       wstate
	applied [1]Applied
	knobs   [1][]knobSet
	thrErr  [1]error
	thr     [1]struct{ rec, dur bool }
}

// newState is a new workload's state.
func (a *Actuator) newState(cgroup string) *wstate {
	var w *wstate
	if len(a.devs) == 1 {
		b := &wstate1{}
		w = &b.w
		w.cgroup, w.applied, w.knobs, w.thrErr, w.thr = cgroup, b.applied[:], b.knobs[:], b.thrErr[:], b.thr[:]
	} else {
		w = &wstate{cgroup: cgroup, applied: make([]Applied, len(a.devs)), knobs: make([][]knobSet, len(a.devs)),
			thrErr: make([]error, len(a.devs)), thr: make([]struct{ rec, dur bool }, len(a.devs))}
	}
	for i := range a.devs {
		w.applied[i].Device = a.devs[i].Device
		w.knobs[i] = make([]knobSet, len(a.devs[i].leveled))
	}
	return w
}

// failed notes that knob k failed with err and returns err when it has
// just begun to fail, nil when it was failing already (reported then).
func (a *Actuator) failed(k knobKey, now time.Time, err error) error {
	if _, ok := a.failing[k]; ok {
		return nil
	}
	a.failing[k] = now
	return err
}

// works notes that knob k was read or written fine; if it was failing, a
// WARN says it works again.
func (a *Actuator) works(k knobKey, now time.Time) {
	since, ok := a.failing[k]
	if !ok {
		return
	}
	delete(a.failing, k)
	a.log.Warn("knob works again", "cgroup", k.cgroup, "knob", k.knob, "dev", k.dev.String(),
		"failed_for", now.Sub(since).String())
}

// appendNew appends err to errs unless it is nil.
func appendNew(errs []error, err error) []error {
	if err == nil {
		return errs
	}
	return append(errs, err)
}

// record reads and remembers a knob's original value before its first
// write; it stays fresh (unwritable) until Persist made it durable.
func (a *Actuator) record(w *wstate, k mech.Knob, knob string, dev cgroupfs.Dev) (knobKey, error) {
	key := knobKey{w.cgroup, knob, dev}
	if a.orig.has(key) {
		if !slices.Contains(w.keys, key) {
			w.keys = append(w.keys, key)
		}
		return key, nil
	}
	v, err := k.Read(w.cgroup)
	if err != nil {
		return key, err
	}
	a.orig.add(Original{Cgroup: w.cgroup, Knob: knob, Dev: dev, DevStr: dev.String(), Value: v})
	w.keys = append(w.keys, key)
	return key, nil
}

// Originals returns every recorded original, sorted, and whether they
// changed since the previous call (so the state file is written only then).
func (a *Actuator) Originals() ([]Original, bool) { return a.orig.Originals() }

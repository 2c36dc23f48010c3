// Package actuate is the "proceeding" stage: it turns "workload W is at
// level L" into writes on W's cgroup, per device, through the mechanism the
// host layer found for that device — a BFQ, iocost or CFQ weight, or, where
// no scheduler honours weights, a work-conserving throttle.
//
// It remembers the value every knob had before its first write (the
// originals), writes only what changed, rewrites after a while in case
// someone else changed a value, and puts the originals back when a workload
// is released and when the daemon exits. The originals are exported so the
// daemon can keep them in its state file: after a crash a new daemon
// restores them instead of leaving stale weights behind.
package actuate

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
	"github.com/ddiskqos/ddiskqos/internal/host"
)

// Device is a block device to actuate on, and its mechanism.
type Device struct {
	Name      string
	Dev       cgroupfs.Dev
	Mech      host.Mechanism
	Scheduler string // for display
	// Throttle: the throttle runs too, beside a weight mechanism. Weights
	// split the device between queues that stay busy; a reader that pauses
	// between requests (a web server) still waits behind a streamer's
	// budget, which the throttle's caps bound (docs/bench/contention.md).
	Throttle bool
}

// Mechanisms names what is in force on the device, e.g. "bfq-weight" or
// "bfq-weight+throttle".
func (d Device) Mechanisms() string {
	if d.Throttle && d.Mech != host.MechThrottle {
		return string(d.Mech) + "+" + string(host.MechThrottle)
	}
	return string(d.Mech)
}

// Config is the actuator's configuration.
type Config struct {
	Hierarchy cgroupfs.Hierarchy
	Devices   []Device
	Throttle  Throttle
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
	Err    error           // last failure to apply, nil when in force
}

// knobKey identifies one original: a cgroup's knob on one device.
type knobKey struct {
	cgroup string
	knob   string // "bfq", "iocost", "cfq", "throttle"
	dev    cgroupfs.Dev
}

// Original is the value a knob had before ddiskqos first wrote it.
type Original struct {
	Cgroup string       `json:"cgroup"`
	Knob   string       `json:"knob"` // bfq | iocost | cfq | throttle
	Dev    cgroupfs.Dev `json:"-"`
	DevStr string       `json:"dev"`
	// Weights: whether a per-device value was set, and its native value.
	Had    bool   `json:"had,omitempty"`
	Native uint64 `json:"native,omitempty"`
	// Throttle: the limits that were in force.
	Limits cgroupfs.Limits `json:"limits,omitempty"`
}

func (o Original) setting() Setting { return Setting{Had: o.Had, Native: o.Native, Limits: o.Limits} }

// wstate is the actuator's memory of one workload.
type wstate struct {
	cgroup  string
	applied []Applied // indexed like Config.Devices
	written []bool    // whether applied[i] is known to be in force
	at      time.Time // when the values were last written in full
	knobs   []knobKey // originals recorded for this workload
	dropped bool      // released or forgotten: Handles to it are stale
}

// Actuator applies levels. It is owned by the daemon loop: not safe for
// concurrent use (the throttle's fast loops run beside it and lock their
// own state).
type Actuator struct {
	cfg       Config
	log       *slog.Logger
	mechs     [][]Mechanism // per device: its weight mechanism or throttle, or both
	work      map[string]*wstate
	originals map[knobKey]Original
	// fresh holds originals recorded but not yet made durable by Persist:
	// their knobs are not written.
	fresh map[knobKey]bool
	// dirty is set when originals changed since the last Originals call.
	dirty bool
	// members is Apply's scratch: per dynamic device, its workloads.
	members [][]Member
	pending []pendingWrite
	// failing holds the knobs whose last read or write failed, with when
	// that began: a knob that keeps failing is reported once (see Apply),
	// and once more when it works again.
	failing map[knobKey]time.Time
}

// pendingWrite is a knob Apply will write once its original is durable.
type pendingWrite struct {
	w   *wstate
	i   int // device
	m   Mechanism
	key knobKey
	set Setting
	wt  cgroupfs.Weight
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
	a := &Actuator{cfg: cfg, log: log, work: map[string]*wstate{}, originals: map[knobKey]Original{},
		fresh: map[knobKey]bool{}, members: make([][]Member, len(cfg.Devices)), failing: map[knobKey]time.Time{}}
	for i, d := range cfg.Devices {
		var sen *devsensor.Device
		if i < len(cfg.Sensors) {
			sen = cfg.Sensors[i]
		}
		m, err := newMechanism(cfg, d, sen)
		if err != nil {
			return nil, err
		}
		ms := []Mechanism{m}
		if d.Throttle && d.Mech != host.MechThrottle {
			ms = append(ms, newThrottle(cfg, d, sen))
		}
		a.mechs = append(a.mechs, ms)
	}
	for _, o := range adopted {
		dev, err := cgroupfs.ParseDev(o.DevStr)
		if err != nil {
			return nil, fmt.Errorf("adopt original of %s: %w", o.Cgroup, err)
		}
		if _, err := knobOf(cfg.Hierarchy, o.Knob, dev); err != nil {
			return nil, fmt.Errorf("adopt original of %s on %s: %w", o.Cgroup, o.DevStr, err)
		}
		o.Dev = dev
		a.originals[knobKey{o.Cgroup, o.Knob, dev}] = o
	}
	return a, nil
}

// Devices returns the devices actuated on.
func (a *Actuator) Devices() []Device { return a.cfg.Devices }

// TopActive returns the best level active on device i lately (0: none);
// only the throttle tracks it.
func (a *Actuator) TopActive(i int) int {
	if d := a.dynamicOf(i); d != nil {
		return d.TopActive()
	}
	return 0
}

// Capacity returns device i's capacity as its throttle estimates it
// (bytes and requests per second); 0 when it has no throttle or has not
// measured it yet.
func (a *Actuator) Capacity(i int) (bps, iops float64) {
	if d := a.dynamicOf(i); d != nil {
		return d.Capacity()
	}
	return 0, 0
}

// dynamicOf returns device i's dynamic mechanism, nil if it has none.
func (a *Actuator) dynamicOf(i int) dynamic {
	for _, m := range a.mechs[i] {
		if d, ok := m.(dynamic); ok {
			return d
		}
	}
	return nil
}

// forgetDynamic stops every dynamic mechanism managing cgroup.
func (a *Actuator) forgetDynamic(cgroup string) {
	for i := range a.mechs {
		if d := a.dynamicOf(i); d != nil {
			d.Forget(cgroup)
		}
	}
}

// OpenFiles is how many descriptors the actuator keeps open now: the
// throttle's, one per demoted workload and parent on each of its devices,
// which the daemon's open-file budget must leave room for.
func (a *Actuator) OpenFiles() int {
	n := 0
	for i := range a.mechs {
		if d := a.dynamicOf(i); d != nil {
			n += d.OpenFiles()
		}
	}
	return n
}

// Hold bounds the caps of device i's worse levels by c (see Ceiling); the
// zero Ceiling lifts the bound. It reports false when the device has no
// throttle to do it with (a device whose mechanism is a weight alone).
func (a *Actuator) Hold(i int, c Ceiling) bool {
	if d := a.dynamicOf(i); d != nil {
		d.Hold(c)
		return true
	}
	return false
}

// ObservePeak feeds a device's total bandwidth in the last tick (bytes/s);
// the throttle sizes its caps from it where it cannot read the device's own
// counters.
func (a *Actuator) ObservePeak(i int, bps float64) {
	if d := a.dynamicOf(i); d != nil {
		d.ObservePeak(bps)
	}
}

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
// error; its workload is dropped.
func (a *Actuator) Apply(now time.Time, targets []Target) error {
	var errs []error
	a.pending = a.pending[:0]
	for i := range a.members {
		a.members[i] = a.members[i][:0]
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
	durable := true
	if len(a.fresh) > 0 && a.cfg.Persist != nil {
		origs, _ := a.sortedOriginals()
		if err := a.cfg.Persist(origs); err != nil {
			durable = false
			errs = append(errs, fmt.Errorf("originals not durable, %d knob(s) left unwritten: %w", len(a.fresh), err))
		}
	}
	if durable {
		clear(a.fresh)
	}
	for _, p := range a.pending {
		if p.w.dropped {
			continue
		}
		ap := &p.w.applied[p.i]
		if a.fresh[p.key] {
			ap.Err = errors.New("not written: its original value is not saved yet")
			continue
		}
		m := p.m
		err := m.Write(p.w.cgroup, p.set)
		if err == nil {
			err = verify(m, p.w.cgroup, p.set)
		}
		ap.Weight, ap.Err, p.w.written[p.i] = p.wt, err, err == nil
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
	for i := range a.mechs {
		if d := a.dynamicOf(i); d != nil {
			for j := range a.members[i] {
				a.members[i][j].Durable = !a.fresh[knobKey{a.members[i][j].Cgroup, d.Knob(), a.cfg.Devices[i].Dev}] &&
					a.hasOriginal(a.members[i][j].Cgroup, d.Knob(), a.cfg.Devices[i].Dev)
			}
			d.Update(a.members[i])
		}
	}
	// What the dynamic mechanisms have in force, for Applied. Beside a
	// weight mechanism, the weight's error stands unless the throttle has
	// one of its own.
	for _, w := range a.work {
		for i := range a.mechs {
			if d := a.dynamicOf(i); d != nil {
				l, err := d.InForce(w.cgroup)
				w.applied[i].Limits = l
				if len(a.mechs[i]) == 1 || err != nil {
					w.applied[i].Err = err
				}
			}
		}
	}
	return errors.Join(errs...)
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
		w = &wstate{cgroup: t.Cgroup, applied: make([]Applied, len(a.cfg.Devices)), written: make([]bool, len(a.cfg.Devices))}
		for i, d := range a.cfg.Devices {
			w.applied[i].Device = d
		}
		a.work[t.ID] = w
	}
	if t.Handle != nil {
		t.Handle.w = w
	}
	if a.cfg.Reassert > 0 && now.Sub(w.at) >= a.cfg.Reassert {
		clear(w.written) // trust nothing written before: write all again
		w.at = now
	}
	var errs []error
	for i, ms := range a.mechs {
		for _, m := range ms {
			dev := a.cfg.Devices[i].Dev
			switch m := m.(type) {
			case leveled:
				ap := &w.applied[i]
				if w.written[i] && ap.Weight == t.Weight && ap.Err == nil {
					continue
				}
				if a.cfg.DryRun {
					ap.Weight, ap.Err, w.written[i] = t.Weight, nil, true
					continue
				}
				k, err := a.record(w, m, dev)
				if err != nil {
					if errors.Is(err, cgroupfs.ErrCgroupGone) {
						return err
					}
					ap.Err = err
					errs = appendNew(errs, a.failed(k, now, err))
					continue
				}
				a.pending = append(a.pending, pendingWrite{w: w, i: i, m: m, key: k, set: m.Want(t), wt: t.Weight})
			case dynamic:
				if m.Wants(t.Level) && !a.cfg.DryRun {
					k, err := a.record(w, m, dev)
					if err != nil {
						if errors.Is(err, cgroupfs.ErrCgroupGone) {
							return err
						}
						w.applied[i].Err = err
						errs = appendNew(errs, a.failed(k, now, err))
						continue
					}
					a.works(k, now)
				}
				a.members[i] = append(a.members[i], Member{Cgroup: w.cgroup, Level: t.Level})
			}
		}
	}
	return errors.Join(errs...)
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

func (a *Actuator) hasOriginal(cgroup, knob string, dev cgroupfs.Dev) bool {
	_, ok := a.originals[knobKey{cgroup, knob, dev}]
	return ok
}

// record reads and remembers a knob's original value before its first
// write; it stays fresh (unwritable) until Persist made it durable.
func (a *Actuator) record(w *wstate, m Mechanism, dev cgroupfs.Dev) (knobKey, error) {
	k := knobKey{w.cgroup, m.Knob(), dev}
	if _, ok := a.originals[k]; ok {
		if !slices.Contains(w.knobs, k) {
			w.knobs = append(w.knobs, k)
		}
		return k, nil
	}
	s, err := m.Read(w.cgroup)
	if err != nil {
		return k, err
	}
	a.originals[k] = Original{Cgroup: w.cgroup, Knob: m.Knob(), Dev: dev, DevStr: dev.String(),
		Had: s.Had, Native: s.Native, Limits: s.Limits}
	if a.cfg.Persist != nil {
		a.fresh[k] = true
	}
	a.dirty = true
	w.knobs = append(w.knobs, k)
	return k, nil
}

// restore puts one original back, through the mechanism of its device when
// it is one of ours, else through its knob.
func (a *Actuator) restore(o Original) error {
	for i, d := range a.cfg.Devices {
		if d.Dev != o.Dev {
			continue
		}
		for _, m := range a.mechs[i] {
			if m.Knob() != o.Knob {
				continue
			}
			if dm, ok := m.(dynamic); ok {
				dm.Forget(o.Cgroup) // its fast loop must not write it again
			}
			return m.Write(o.Cgroup, o.setting())
		}
	}
	m, err := knobOf(a.cfg.Hierarchy, o.Knob, o.Dev)
	if err != nil {
		return fmt.Errorf("restore %s on %s: %w", o.Cgroup, o.DevStr, err)
	}
	return m.Write(o.Cgroup, o.setting())
}

// Release restores the originals of workload id and forgets it. A cgroup
// that has gone needs no restoring and is not an error.
func (a *Actuator) Release(id string) error {
	w, ok := a.work[id]
	if !ok {
		return nil
	}
	var errs []error
	a.forgetDynamic(w.cgroup)
	for _, k := range w.knobs {
		o, ok := a.originals[k]
		if !ok {
			continue
		}
		if err := a.restore(o); err != nil && !errors.Is(err, cgroupfs.ErrCgroupGone) {
			errs = append(errs, fmt.Errorf("restore %s %s on %s: %w", o.Cgroup, o.Knob, o.DevStr, err))
			continue
		}
		delete(a.originals, k)
		delete(a.fresh, k)
		a.dirty = true
	}
	for k := range a.failing {
		if k.cgroup == w.cgroup {
			delete(a.failing, k)
		}
	}
	w.dropped = true
	delete(a.work, id)
	return errors.Join(errs...)
}

// Forget drops workload id and its originals without restoring them: its
// cgroup has gone, and a directory of the same name now is another cgroup
// whose values are its own.
func (a *Actuator) Forget(id string) { a.forget(id) }

// forget drops a workload whose cgroup has gone, and its originals.
func (a *Actuator) forget(id string) {
	if w, ok := a.work[id]; ok {
		a.forgetW(w)
		delete(a.work, id)
	}
}

func (a *Actuator) forgetW(w *wstate) {
	a.forgetDynamic(w.cgroup)
	for _, k := range w.knobs {
		delete(a.originals, k)
		delete(a.fresh, k)
	}
	for k := range a.failing {
		if k.cgroup == w.cgroup {
			delete(a.failing, k)
		}
	}
	a.dirty = true
	w.dropped = true
	for id, x := range a.work {
		if x == w {
			delete(a.work, id)
		}
	}
}

// RestoreAll stops the fast loops, restores every original the actuator
// knows — including those adopted from a previous run for cgroups no
// workload claimed — and forgets all workloads. The daemon calls it on
// SIGTERM/SIGINT.
func (a *Actuator) RestoreAll() error {
	for i := range a.mechs {
		if d := a.dynamicOf(i); d != nil {
			d.Stop()
		}
	}
	var errs []error
	for _, k := range a.sortedKeys() {
		o := a.originals[k]
		if err := a.restore(o); err != nil && !errors.Is(err, cgroupfs.ErrCgroupGone) {
			errs = append(errs, fmt.Errorf("restore %s %s on %s: %w", o.Cgroup, o.Knob, o.DevStr, err))
			continue
		}
		delete(a.originals, k)
		delete(a.fresh, k)
	}
	a.dirty = true
	for _, w := range a.work {
		w.dropped = true // Handles to it are stale
	}
	clear(a.work)
	return errors.Join(errs...)
}

// RestoreOrphans restores adopted originals of cgroups that no current
// workload uses (their container was replaced while the daemon was down),
// so only live workloads keep ddiskqos values. live holds current cgroups.
func (a *Actuator) RestoreOrphans(live map[string]bool) error {
	var errs []error
	for _, k := range a.sortedKeys() {
		if live[k.cgroup] {
			continue
		}
		o := a.originals[k]
		if err := a.restore(o); err != nil && !errors.Is(err, cgroupfs.ErrCgroupGone) {
			errs = append(errs, err)
			continue
		}
		delete(a.originals, k)
		a.dirty = true
	}
	return errors.Join(errs...)
}

func (a *Actuator) sortedKeys() []knobKey {
	keys := make([]knobKey, 0, len(a.originals))
	for k := range a.originals {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y knobKey) int {
		return cmp.Or(cmp.Compare(x.cgroup, y.cgroup), cmp.Compare(x.knob, y.knob),
			cmp.Compare(x.dev.Major, y.dev.Major), cmp.Compare(x.dev.Minor, y.dev.Minor))
	})
	return keys
}

func (a *Actuator) sortedOriginals() ([]Original, bool) {
	out := make([]Original, 0, len(a.originals))
	for _, k := range a.sortedKeys() {
		out = append(out, a.originals[k])
	}
	return out, a.dirty
}

// Originals returns every recorded original, sorted, and whether they
// changed since the previous call (so the state file is written only then).
func (a *Actuator) Originals() ([]Original, bool) {
	out, changed := a.sortedOriginals()
	a.dirty = false
	return out, changed
}

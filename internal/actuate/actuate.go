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
	"github.com/ddiskqos/ddiskqos/internal/host"
)

// Device is a block device to actuate on, and its mechanism.
type Device struct {
	Name      string
	Dev       cgroupfs.Dev
	Mech      host.Mechanism
	Scheduler string // for display
}

// weightKind maps a weight mechanism to its cgroupfs knob.
func weightKind(m host.Mechanism) (cgroupfs.WeightKind, bool) {
	switch m {
	case host.MechBFQWeight:
		return cgroupfs.WeightBFQ, true
	case host.MechIOCostWeight:
		return cgroupfs.WeightIOCost, true
	case host.MechCFQWeight:
		return cgroupfs.WeightCFQ, true
	}
	return 0, false
}

// Throttle configures the work-conserving throttle used on devices whose
// mechanism is host.MechThrottle.
type Throttle struct {
	// Shares[i] is the fraction of the device's observed peak bandwidth a
	// workload at level i+1 may use while a workload of a better level is
	// doing I/O on the device. Shares[0] is 1 (level 1 is never capped).
	Shares [4]float64
	// Min is the lowest cap ever set, bytes/s.
	Min uint64
	// Hold is how long a level counts as active on a device after its last
	// I/O there, so a better level's pauses between requests do not flap
	// the caps of the levels below it every tick. 0 means one second.
	Hold time.Duration
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
	Logger   *slog.Logger
}

// Target is what one workload should have after this tick.
type Target struct {
	ID     string
	Cgroup string // relative to the hierarchy
	Level  int    // 1..4; ignored when Exempt
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

// knobKinds maps the knob names kept in originals to weight kinds.
var knobKinds = map[string]cgroupfs.WeightKind{
	cgroupfs.WeightBFQ.String():    cgroupfs.WeightBFQ,
	cgroupfs.WeightIOCost.String(): cgroupfs.WeightIOCost,
	cgroupfs.WeightCFQ.String():    cgroupfs.WeightCFQ,
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
// concurrent use.
type Actuator struct {
	cfg       Config
	log       *slog.Logger
	work      map[string]*wstate
	originals map[knobKey]Original
	// dirty is set when originals changed since the last Originals call.
	dirty bool
	// peak is each device's highest observed total bandwidth, bytes/s.
	peak []float64
	// top is each device's best active level in the last Apply (0 idle).
	top []int
	// seen[i][l-1] is when level l last did I/O on device i.
	seen [][4]time.Time
}

// New returns an Actuator. Originals from a previous run (its state file)
// may be passed: they are adopted as the true originals of those knobs, so
// the values the crashed daemon wrote are never mistaken for them.
func New(cfg Config, adopted []Original) (*Actuator, error) {
	if cfg.Hierarchy.Mount == "" {
		return nil, errors.New("actuator: no cgroup hierarchy")
	}
	if cfg.Throttle.Shares[0] == 0 {
		cfg.Throttle.Shares = [4]float64{1, 0.6, 0.45, 0.3}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Actuator{cfg: cfg, log: log, work: map[string]*wstate{}, originals: map[knobKey]Original{},
		peak: make([]float64, len(cfg.Devices)), top: make([]int, len(cfg.Devices)),
		seen: make([][4]time.Time, len(cfg.Devices))}
	if a.cfg.Throttle.Hold == 0 {
		a.cfg.Throttle.Hold = time.Second
	}
	for _, o := range adopted {
		dev, err := cgroupfs.ParseDev(o.DevStr)
		if err != nil {
			return nil, fmt.Errorf("adopt original of %s: %w", o.Cgroup, err)
		}
		o.Dev = dev
		a.originals[knobKey{o.Cgroup, o.Knob, dev}] = o
	}
	return a, nil
}

// Devices returns the devices actuated on.
func (a *Actuator) Devices() []Device { return a.cfg.Devices }

// TopActive returns the best level active on device i in the last Apply.
func (a *Actuator) TopActive(i int) int { return a.top[i] }

// ObservePeak feeds a device's total bandwidth in the last tick (bytes/s);
// the throttle mechanism sizes its caps from the highest seen.
func (a *Actuator) ObservePeak(i int, bps float64) {
	if bps > a.peak[i] {
		a.peak[i] = bps
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

// Apply brings every target's cgroup to its level. Errors do not stop the
// other targets: they are recorded per device (see Applied) and returned
// joined. A cgroup that has gone is not an error; its workload is dropped.
func (a *Actuator) Apply(now time.Time, targets []Target) error {
	a.computeTop(now, targets)
	var errs []error
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
		if err := a.applyOne(now, t); err != nil {
			if errors.Is(err, cgroupfs.ErrCgroupGone) {
				a.forget(t.ID)
				continue
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// computeTop finds, per device, the best (lowest) level that did I/O on it
// within the hold time.
func (a *Actuator) computeTop(now time.Time, targets []Target) {
	for _, t := range targets {
		if t.Exempt || t.Level < 1 || t.Level > 4 {
			continue
		}
		for i, act := range t.Active {
			if act && i < len(a.seen) {
				a.seen[i][t.Level-1] = now
			}
		}
	}
	for i := range a.top {
		a.top[i] = 0
		for l := 1; l <= 4; l++ {
			if at := a.seen[i][l-1]; !at.IsZero() && now.Sub(at) < a.cfg.Throttle.Hold {
				a.top[i] = l
				break
			}
		}
	}
}

// capFor returns the limits a workload at level on device i gets now.
func (a *Actuator) capFor(i, level int) cgroupfs.Limits {
	top := a.top[i]
	if top == 0 || level <= top || level < 1 || level > 4 {
		return cgroupfs.Limits{}
	}
	share := a.cfg.Throttle.Shares[level-1]
	if share >= 1 || a.peak[i] == 0 {
		return cgroupfs.Limits{}
	}
	c := uint64(share * a.peak[i])
	if c < a.cfg.Throttle.Min {
		c = a.cfg.Throttle.Min
	}
	return cgroupfs.Limits{RBps: c, WBps: c}
}

func (a *Actuator) applyOne(now time.Time, t *Target) error {
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
	for i, d := range a.cfg.Devices {
		ap := &w.applied[i]
		if kind, ok := weightKind(d.Mech); ok {
			if w.written[i] && ap.Weight == t.Weight && ap.Err == nil {
				continue
			}
			err := a.setWeight(w, kind, d, t.Weight)
			ap.Weight, ap.Err, w.written[i] = t.Weight, err, err == nil
			if err != nil {
				if errors.Is(err, cgroupfs.ErrCgroupGone) {
					return err
				}
				errs = append(errs, err)
			}
			continue
		}
		if d.Mech != host.MechThrottle {
			continue
		}
		want := a.capFor(i, t.Level)
		if w.written[i] && ap.Limits == want && ap.Err == nil {
			continue
		}
		if !w.written[i] && want.IsZero() && !a.hasOriginal(t.Cgroup, "throttle", d.Dev) {
			// Never capped and nothing to cap: leave the file alone.
			ap.Limits, ap.Err, w.written[i] = want, nil, true
			continue
		}
		err := a.setLimits(w, d, want)
		ap.Limits, ap.Err, w.written[i] = want, err, err == nil
		if err != nil {
			if errors.Is(err, cgroupfs.ErrCgroupGone) {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (a *Actuator) hasOriginal(cgroup, knob string, dev cgroupfs.Dev) bool {
	_, ok := a.originals[knobKey{cgroup, knob, dev}]
	return ok
}

// record reads and remembers a knob's original value before its first write.
func (a *Actuator) record(w *wstate, knob string, dev cgroupfs.Dev) error {
	k := knobKey{w.cgroup, knob, dev}
	if _, ok := a.originals[k]; ok {
		if !slices.Contains(w.knobs, k) {
			w.knobs = append(w.knobs, k)
		}
		return nil
	}
	o := Original{Cgroup: w.cgroup, Knob: knob, Dev: dev, DevStr: dev.String()}
	h := a.cfg.Hierarchy
	if knob == "throttle" {
		l, err := h.ReadLimits(w.cgroup, dev)
		if err != nil {
			return err
		}
		o.Limits = l
	} else {
		ws, err := h.ReadWeights(w.cgroup, knobKinds[knob])
		if err != nil {
			return err
		}
		o.Native, o.Had = ws.Device(dev)
	}
	a.originals[k] = o
	a.dirty = true
	w.knobs = append(w.knobs, k)
	return nil
}

func (a *Actuator) setWeight(w *wstate, kind cgroupfs.WeightKind, d Device, wt cgroupfs.Weight) error {
	if a.cfg.DryRun {
		return nil
	}
	if err := a.record(w, kind.String(), d.Dev); err != nil {
		return err
	}
	return a.cfg.Hierarchy.SetDeviceWeight(w.cgroup, kind, d.Dev, wt)
}

func (a *Actuator) setLimits(w *wstate, d Device, l cgroupfs.Limits) error {
	if a.cfg.DryRun {
		return nil
	}
	if err := a.record(w, "throttle", d.Dev); err != nil {
		return err
	}
	return a.cfg.Hierarchy.SetLimits(w.cgroup, d.Dev, l)
}

// restore puts one original back.
func (a *Actuator) restore(o Original) error {
	h := a.cfg.Hierarchy
	if o.Knob == "throttle" {
		return h.SetLimits(o.Cgroup, o.Dev, o.Limits)
	}
	kind, ok := knobKinds[o.Knob]
	if !ok {
		return fmt.Errorf("restore %s on %s: unknown knob %q", o.Cgroup, o.DevStr, o.Knob)
	}
	if o.Had {
		return h.SetNativeDeviceWeight(o.Cgroup, kind, o.Dev, o.Native)
	}
	return h.ResetDeviceWeight(o.Cgroup, kind, o.Dev)
}

// Release restores the originals of workload id and forgets it. A cgroup
// that has gone needs no restoring and is not an error.
func (a *Actuator) Release(id string) error {
	w, ok := a.work[id]
	if !ok {
		return nil
	}
	var errs []error
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
		a.dirty = true
	}
	w.dropped = true
	delete(a.work, id)
	return errors.Join(errs...)
}

// forget drops a workload whose cgroup has gone, and its originals.
func (a *Actuator) forget(id string) {
	if w, ok := a.work[id]; ok {
		for _, k := range w.knobs {
			delete(a.originals, k)
		}
		a.dirty = true
		w.dropped = true
		delete(a.work, id)
	}
}

// RestoreAll restores every original the actuator knows — including those
// adopted from a previous run for cgroups no workload claimed — and forgets
// all workloads. The daemon calls it on SIGTERM/SIGINT.
func (a *Actuator) RestoreAll() error {
	var errs []error
	for _, k := range a.sortedKeys() {
		o := a.originals[k]
		if err := a.restore(o); err != nil && !errors.Is(err, cgroupfs.ErrCgroupGone) {
			errs = append(errs, fmt.Errorf("restore %s %s on %s: %w", o.Cgroup, o.Knob, o.DevStr, err))
			continue
		}
		delete(a.originals, k)
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

// Originals returns every recorded original, sorted, and whether they
// changed since the previous call (so the state file is written only then).
func (a *Actuator) Originals() ([]Original, bool) {
	out := make([]Original, 0, len(a.originals))
	for _, k := range a.sortedKeys() {
		out = append(out, a.originals[k])
	}
	changed := a.dirty
	a.dirty = false
	return out, changed
}

// Package daemon is the loop that wires the pipeline together, once per
// tick: the source says who exists, the sensor reads what each did, the
// policy decides each level, the actuator applies it, and a snapshot of the
// result is published for the API. It is the only place that knows all four.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/sensor"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/state"
)

// Observer receives the daemon's operational metrics (internal/metrics
// implements it). The loop calls it from its own goroutine.
type Observer interface {
	// ObserveTick: how long one tick took.
	ObserveTick(d time.Duration)
	// ObserveSense: after each tick's sensing, how many workloads'
	// counters were read and how many were left for a later tick because
	// they have been quiet (see Options.QuietMax).
	ObserveSense(read, skipped int)
	// Error: one error of the loop, by cause.
	Error(cause snapshot.ErrorCause)
	// LevelChange: a workload moved (0 is exempt); reason is the policy's.
	LevelChange(from, to int, reason string)
}

type nopObserver struct{}

func (nopObserver) ObserveTick(time.Duration)    {}
func (nopObserver) ObserveSense(int, int)        {}
func (nopObserver) Error(snapshot.ErrorCause)    {}
func (nopObserver) LevelChange(int, int, string) {}

// Actuator is what the loop needs of the proceeding stage. *actuate.Actuator
// (cgroup files) implements it; so does the Docker Engine API actuator.
type Actuator interface {
	Devices() []actuate.Device
	ObservePeak(i int, bps float64)
	TopActive(i int) int
	Apply(now time.Time, targets []actuate.Target) error
	Applied(id string) []actuate.Applied
	Release(id string) error
	RestoreAll() error
	RestoreOrphans(live map[string]bool) error
	Originals() ([]actuate.Original, bool)
	// OpenFiles is how many descriptors it keeps open (the open-file
	// budget leaves room for them).
	OpenFiles() int
}

// Options configure a Daemon.
type Options struct {
	Hierarchy  cgroupfs.Hierarchy
	CgroupMode string
	// SenseDevices are disks whose I/O is counted besides the actuated
	// ones; on cgroup v1 accounting is enabled on all of them at start
	// (cgroupfs.Hierarchy.EnableV1Accounting).
	SenseDevices []cgroupfs.Dev
	// Stacked maps a stacked device (loop over a file, dm, md) to the disks
	// below it, whose counters repeat its I/O (see stackedOverlap).
	Stacked  map[cgroupfs.Dev][]cgroupfs.Dev
	Source   source.Source
	Policy   policy.Config
	Actuator actuate.Config // Hierarchy is taken from above
	// ActuatorName is reported in the snapshot ("cgroup" or "docker").
	ActuatorName string
	// NewActuator builds the actuator from the configuration and the
	// originals adopted from the state file; nil means the cgroup-file
	// actuator (actuate.New).
	NewActuator func(cfg actuate.Config, adopted []actuate.Original) (Actuator, error)
	Interval    time.Duration
	// StateFile is where originals and levels are kept ("" = nowhere). A
	// knob is written only once its original is saved there (the
	// actuator's Config.Persist); a failed save is retried every tick,
	// counted as a "state" error and shown in Snapshot.StateError. At
	// start, entries of cgroups that are gone or were created again (their
	// directory inode changed) are dropped.
	StateFile string
	// HostPressure is the host's PSI file (/proc/pressure/io), "" for none.
	HostPressure string
	// OrphanGrace is how long after start a cgroup adopted from the state
	// file may stay unclaimed before its original values are restored.
	OrphanGrace time.Duration
	Logger      *slog.Logger
	Observer    Observer
	// Now is the clock; time.Now when nil (tests step their own).
	Now func() time.Time
	// QuietMax is the longest a workload whose counters have not moved
	// goes without its counters being read (adaptive polling, see
	// pollPeriod); 0 means DefaultQuietTicks intervals, and anything below
	// two intervals reads every workload every tick.
	QuietMax time.Duration
	// NoFile is RLIMIT_NOFILE's soft limit, the open-file budget; 0 means
	// raise the soft limit to the hard one at Run and use that.
	NoFile uint64
}

// DefaultQuietTicks is the default of Options.QuietMax in intervals.
const DefaultQuietTicks = sensor.DefaultQuietTicks

// tracked is one workload as the loop knows it.
type tracked struct {
	w        source.Workload
	cg       *cgroupfs.Cgroup
	ino      uint64           // of the cgroup's directory when tracked; 0 unknown
	c        *sensor.Counters // the sensing stage's state of it
	dec      decision         // the policy's last
	pressure *snapshot.Pressure
	gone     bool // released during this tick's sensing

	// pub is the workload's record in the last published snapshot, reused
	// while nothing in it changes; labelsNew says the source handed in a
	// new labels map since.
	pub       *snapshot.Workload
	labelsNew bool

	// The workload's state in the policy engine and the actuator, so the
	// loop does not look its 64-character ID up in their maps every tick.
	ph policy.Handle
	ah actuate.Handle
}

// decision is what the loop keeps of a policy.Decision between ticks: not
// its transitions (~300 bytes per workload, logged when they happen).
type decision struct {
	level    policy.Level
	weight   uint16
	exempt   bool
	labelErr error
}

// Daemon is the control loop.
type Daemon struct {
	opts   Options
	log    *slog.Logger
	obs    Observer
	now    func() time.Time
	pol    *policy.Engine
	act    Actuator
	events chan source.Event

	work      map[string]*tracked
	order     []*tracked // d.work sorted by name, then id (the snapshot's order)
	orderOK   bool       // order matches work
	nextSlot  uint32
	sen       sensor.Sensor              // the sensing stage
	noFile    uint64                     // the open-file budget (soft RLIMIT_NOFILE)
	actFDs    int                        // descriptors the actuator keeps (the throttle's), at the last tick
	fds       int                        // descriptors the tracked cgroups keep
	details   int                        // of which detail files (see cgroupfs.Cgroup.CloseDetail)
	refused   map[string]source.Workload // not tracked for want of descriptors
	started   time.Time
	orphansOK bool // orphan restore done
	tick      uint64
	lastTick  time.Time
	devBytes  []uint64      // per actuated device, read+write this tick
	devRead   []uint64      // per actuated device, read this tick
	devTotal  []deviceTotal // per actuated device, since start
	errCounts [snapshot.NumErrorCauses]uint64
	targets   []actuate.Target
	// publish's scratch: MAJ:MIN of the actuated devices, one workload's
	// Applied entries.
	devStrs    []string
	appScratch []snapshot.Applied

	snap atomic.Pointer[snapshot.Snapshot]

	mu              sync.Mutex // guards pending and pendingInterval
	pending         *policy.Config
	pendingInterval time.Duration // 0: none
	stateDirt       bool
	// stateErr is the last failure to save the state file, nil once a save
	// succeeded: while it is set, new originals are not durable and their
	// knobs are not written (actuate.Config.Persist).
	stateErr error
	// inos maps a cgroup to the inode of its directory when first seen:
	// kept in the state file, so a cgroup created again under the same
	// name after a restart is not taken for the one the entries were for.
	inos map[string]uint64
	// savedOrigs are the originals of the last successful save: the save
	// at the end of a tick is skipped when Persist already wrote them.
	savedOrigs []actuate.Original
}

// New builds a Daemon: it loads the state file (adopting the originals and
// levels a previous run left) but touches no cgroup yet.
func New(opts Options) (*Daemon, error) {
	if opts.Interval <= 0 {
		return nil, fmt.Errorf("interval %s: must be positive", opts.Interval)
	}
	if opts.Source == nil {
		return nil, errors.New("no workload source")
	}
	d := &Daemon{opts: opts, log: opts.Logger, obs: opts.Observer, now: opts.Now,
		events: make(chan source.Event, 4096), work: map[string]*tracked{},
		refused: map[string]source.Workload{}}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.obs == nil {
		d.obs = nopObserver{}
	}
	if d.now == nil {
		d.now = time.Now
	}
	if d.opts.OrphanGrace == 0 {
		d.opts.OrphanGrace = 10 * time.Second
	}
	var err error
	if d.pol, err = policy.New(opts.Policy); err != nil {
		return nil, err
	}
	var st state.File
	if opts.StateFile != "" {
		if st, err = state.Load(opts.StateFile); err != nil {
			return nil, err
		}
		if len(st.Originals) > 0 && (st.HierarchyMount != opts.Hierarchy.Mount || st.HierarchyVersion != opts.Hierarchy.Version) {
			return nil, fmt.Errorf("state file %s was written for cgroup v%d at %s, this host uses v%d at %s: restore or remove it by hand",
				opts.StateFile, st.HierarchyVersion, st.HierarchyMount, opts.Hierarchy.Version, opts.Hierarchy.Mount)
		}
	}
	d.inos = map[string]uint64{}
	d.checkAdopted(&st)
	ac := opts.Actuator
	ac.Hierarchy = opts.Hierarchy
	for _, dev := range append(slices.Clone(opts.SenseDevices), devsOf(ac.Devices)...) {
		if err := opts.Hierarchy.EnableV1Accounting(dev); err != nil {
			return nil, fmt.Errorf("enable v1 I/O accounting on %s: %w", dev, err)
		}
	}
	ac.Logger = d.log
	if opts.StateFile != "" && !ac.DryRun {
		// A knob is written only once its original is in the state file:
		// a crash between the two must not leave ddiskqos values that no
		// later run knows to restore.
		ac.Persist = d.persistOriginals
	}
	mk := opts.NewActuator
	if mk == nil {
		mk = func(cfg actuate.Config, adopted []actuate.Original) (Actuator, error) {
			return actuate.New(cfg, adopted)
		}
	}
	if d.act, err = mk(ac, st.Originals); err != nil {
		return nil, err
	}
	for _, w := range st.Workloads {
		if err := d.pol.Restore(w.View); err != nil {
			d.log.Warn("state file workload not restored", "id", w.View.ID, "err", err)
		}
	}
	if len(st.Originals) > 0 || len(st.Workloads) > 0 {
		d.log.Info("adopted state of a previous run", "file", opts.StateFile,
			"originals", len(st.Originals), "workloads", len(st.Workloads), "written", st.Written)
	}
	d.devBytes = make([]uint64, len(ac.Devices))
	d.devRead = make([]uint64, len(ac.Devices))
	d.devTotal = make([]deviceTotal, len(ac.Devices))
	d.sen = sensor.Sensor{Devices: devsOf(d.act.Devices()), Stacked: opts.Stacked,
		MaxPeriod: sensor.MaxPeriod(opts.QuietMax, opts.Interval)}
	return d, nil
}

// checkAdopted drops the entries of the state file whose cgroup is gone
// (removed while no daemon ran: nothing to restore) or is another cgroup
// under the same name (a different directory inode: its current values are
// its own, and its level is not the old one's), with one log line per
// cgroup. The inodes of the rest are kept.
func (d *Daemon) checkAdopted(st *state.File) {
	verdict := map[string]bool{} // cgroup -> keep
	dropped := 0
	log := d.log
	keep := func(cg, knob string) bool {
		if knob == actuate.DockerKnob {
			return true // a container ID, not a cgroup directory
		}
		if k, ok := verdict[cg]; ok {
			return k
		}
		ino, err := d.dirIno(cg)
		if err != nil || (st.Inodes[cg] != 0 && st.Inodes[cg] != ino) {
			// One line per cgroup, up to maxDropLogs; then a count.
			if dropped++; dropped > maxDropLogs {
				log = slog.New(slog.DiscardHandler)
			}
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			log.Info("state file entry dropped: its cgroup was removed while no daemon ran", "cgroup", cg)
		case err != nil:
			log.Warn("state file entry dropped: its cgroup cannot be looked at", "cgroup", cg, "err", err)
		case st.Inodes[cg] != 0 && st.Inodes[cg] != ino:
			log.Info("state file entry dropped: its cgroup was created again under the same name while no daemon ran",
				"cgroup", cg, "inode_then", st.Inodes[cg], "inode_now", ino)
		default:
			d.inos[cg] = ino
			verdict[cg] = true
			return true
		}
		verdict[cg] = false
		return false
	}
	st.Originals = slices.DeleteFunc(st.Originals, func(o actuate.Original) bool { return !keep(o.Cgroup, o.Knob) })
	st.Workloads = slices.DeleteFunc(st.Workloads, func(w state.Workload) bool { return !keep(w.Cgroup, "") })
	if dropped > maxDropLogs {
		d.log.Info("state file entries dropped, not each logged", "cgroups", dropped-maxDropLogs)
	}
	if dropped > 0 {
		d.stateDirt = true // the next save leaves them out
	}
}

// maxDropLogs is how many dropped state file cgroups checkAdopted logs one
// by one.
const maxDropLogs = 20

// dirIno is the inode of cgroup cg's directory.
func (d *Daemon) dirIno(cg string) (uint64, error) {
	p, err := d.opts.Hierarchy.Path(cg)
	if err != nil {
		return 0, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino, nil
	}
	return 0, nil
}

// Snapshot returns the state after the last tick, nil before the first.
func (d *Daemon) Snapshot() *snapshot.Snapshot { return d.snap.Load() }

// Reconfigure schedules a new policy configuration (SIGHUP); the loop
// applies it at its next tick. Invalid configurations are refused here.
func (d *Daemon) Reconfigure(c policy.Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	d.mu.Lock()
	d.pending = &c
	d.mu.Unlock()
	return nil
}

// SetInterval schedules a new tick interval (SIGHUP); the loop takes it
// over after its next tick.
func (d *Daemon) SetInterval(iv time.Duration) error {
	if iv <= 0 {
		return fmt.Errorf("interval %s: must be positive", iv)
	}
	d.mu.Lock()
	d.pendingInterval = iv
	d.mu.Unlock()
	return nil
}

// takeInterval applies a pending interval and reports whether it did.
func (d *Daemon) takeInterval() bool {
	d.mu.Lock()
	iv := d.pendingInterval
	d.pendingInterval = 0
	d.mu.Unlock()
	if iv == 0 || iv == d.opts.Interval {
		return false
	}
	d.log.Info("interval changed", "from", d.opts.Interval, "to", iv)
	d.opts.Interval = iv
	d.sen.MaxPeriod = sensor.MaxPeriod(d.opts.QuietMax, iv)
	return true
}

// Run runs the loop until ctx ends, then restores every original value and
// returns. An error is returned only when the loop cannot go on.
func (d *Daemon) Run(ctx context.Context) error {
	d.started = d.now()
	d.noFile = d.opts.NoFile
	if d.noFile == 0 {
		lim, err := RaiseNoFile(0)
		if err != nil {
			d.log.Warn("open-file limit", "err", err)
		}
		d.noFile = lim.Soft
		d.log.Info("open-file limit", "soft", lim.Soft, "hard", lim.Hard, "raised_soft", lim.RaisedSoft,
			"room_for_workloads", lim.Room())
	}
	srcCtx, stopSrc := context.WithCancel(ctx)
	srcDone := make(chan error, 1)
	go func() { srcDone <- d.opts.Source.Run(srcCtx, d.events) }()
	defer stopSrc()

	ticker := time.NewTicker(d.opts.Interval)
	defer ticker.Stop()
	d.step() // first tick at once: the snapshot exists from the start
	for {
		select {
		case <-ctx.Done():
			return d.shutdown()
		case err := <-srcDone:
			if ctx.Err() != nil {
				return d.shutdown()
			}
			serr := d.shutdown()
			return errors.Join(fmt.Errorf("workload source %s stopped: %w", d.opts.Source.Name(), err), serr)
		case <-ticker.C:
			d.step()
			if d.takeInterval() {
				ticker.Reset(d.opts.Interval)
			}
		}
	}
}

// shutdown restores every original and records that in the state file.
// An original that cannot be restored is reported (the error, and its
// value in the log for an operator to set by hand) and then dropped from
// the state file: kept, it would fail every later shutdown again.
func (d *Daemon) shutdown() error {
	var errs []error
	if err := d.act.RestoreAll(); err != nil {
		errs = append(errs, err)
		left, _ := d.act.Originals()
		for _, o := range left {
			d.log.Error("original value not restored; dropped from the state file, set it by hand",
				"cgroup", o.Cgroup, "knob", o.Knob, "dev", o.DevStr, "had", o.Had, "native", o.Native, "limits", o.Limits)
		}
	}
	for _, t := range d.work {
		d.closeCgroup(t)
	}
	if d.opts.StateFile != "" {
		if err := d.writeState(nil); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		d.log.Info("restored original I/O settings of every workload")
	}
	return errors.Join(errs...)
}

// step is one tick.
func (d *Daemon) step() {
	start := d.now()
	d.mu.Lock()
	if p := d.pending; p != nil {
		d.pending = nil
		d.mu.Unlock()
		if err := d.pol.Reconfigure(*p); err != nil {
			d.log.Error("reload refused", "err", err)
		} else {
			for _, t := range d.work {
				t.c.Wake()
			}
			d.log.Info("policy reconfigured", "allowances", p.Allowances, "weights", p.Weights, "boost_after", p.BoostAfter)
		}
	} else {
		d.mu.Unlock()
	}
	d.drainEvents()
	dt := start.Sub(d.lastTick).Seconds()
	if d.lastTick.IsZero() || dt <= 0 {
		dt = d.opts.Interval.Seconds()
	}
	clear(d.devBytes)
	clear(d.devRead)
	d.targets = d.targets[:0]
	d.retryRefused()
	d.sortOrder()
	read := 0
	for _, t := range d.order {
		if t.gone {
			continue
		}
		id := t.w.ID
		if t.c.Due(d.tick) {
			read++
			if !d.sense(start, dt, id, t) {
				continue
			}
		} else {
			// Not read this tick: its bytes wait in the kernel's counters
			// for the next read. The policy still sees the time pass
			// (boost, labels), and the actuator still gets its target.
			t.c.Idle()
			d.decide(start, id, t, 0)
		}
		dec := t.dec
		d.targets = append(d.targets, actuate.Target{ID: id, Cgroup: t.w.Cgroup, Level: int(dec.level),
			Weight: cgroupfs.Weight(dec.weight), Exempt: dec.exempt, Active: t.c.Active, Handle: &t.ah})
	}
	d.sortOrder()
	d.obs.ObserveSense(read, len(d.work)-read)
	for i := range d.devBytes {
		d.act.ObservePeak(i, float64(d.devBytes[i])/dt)
		d.devTotal[i].read += d.devRead[i]
		d.devTotal[i].write += d.devBytes[i] - d.devRead[i]
	}
	if err := d.act.Apply(start, d.targets); err != nil {
		d.countErr(snapshot.CauseActuate)
		d.log.Warn("apply levels", "err", err)
	}
	d.actFDs = d.act.OpenFiles()
	if !d.orphansOK && start.Sub(d.started) >= d.opts.OrphanGrace {
		d.orphansOK = true
		live := make(map[string]bool, len(d.work))
		for _, t := range d.work {
			live[t.w.Cgroup] = true
		}
		if err := d.act.RestoreOrphans(live); err != nil {
			d.countErr(snapshot.CauseActuate)
			d.log.Warn("restore unclaimed cgroups from the state file", "err", err)
		}
	}
	if err := d.saveState(false); err != nil {
		d.countErr(snapshot.CauseState) // logged by writeState when it starts failing
	}
	d.tick++
	d.lastTick = start
	took := d.now().Sub(start)
	d.publish(start, dt, took)
	d.obs.ObserveTick(took)
}

// deviceTotal is what the workloads read and wrote on one device since
// start.
type deviceTotal struct{ read, write uint64 }

func (d *Daemon) countErr(cause snapshot.ErrorCause) {
	d.errCounts[cause]++
	d.obs.Error(cause)
}

// drainEvents applies every pending source event.
func (d *Daemon) drainEvents() {
	for {
		select {
		case ev := <-d.events:
			d.handle(ev)
		default:
			return
		}
	}
}

func (d *Daemon) handle(ev source.Event) {
	w := ev.Workload
	switch ev.Kind {
	case source.Added, source.Updated:
		ino, _ := d.dirIno(w.Cgroup) // 0 when gone: Open below says so
		if t, ok := d.work[w.ID]; ok {
			if t.w.Cgroup == w.Cgroup && (ino == 0 || t.ino == 0 || ino == t.ino) {
				t.w = w // labels may have changed; the policy sees them next tick
				t.labelsNew = true
				t.c.Wake()
				d.orderOK = false
				return
			}
			why := "cgroup changed"
			if t.w.Cgroup == w.Cgroup {
				why = "cgroup created again under the same name"
			}
			d.release(w.ID, why)
		}
		delete(d.refused, w.ID)
		if !d.admit(w) {
			return
		}
		h := d.opts.Hierarchy
		cg, err := h.Open(w.Cgroup)
		if err != nil {
			if errors.Is(err, cgroupfs.ErrCgroupGone) {
				d.log.Debug("workload gone before it was tracked", "workload", w.Name, "cgroup", w.Cgroup)
				return
			}
			d.countErr(snapshot.CauseSense)
			d.log.Warn("cannot track workload", "workload", w.Name, "cgroup", w.Cgroup, "err", err)
			return
		}
		// A workload that appears once the start-up listing is over is new:
		// all its I/O counts. One found at start was already running; what
		// it did before we looked says nothing about what it does now.
		charge := d.now().Sub(d.started) > startupGrace(d.opts.Interval)
		if ino != 0 {
			d.inos[w.Cgroup] = ino
		}
		t := &tracked{w: w, cg: cg, ino: ino, c: d.sen.NewCounters(d.nextSlot, charge)}
		d.nextSlot++
		d.work[w.ID] = t
		d.fds += cg.KeptFiles()
		if !cg.DetailKept() {
			// nothing to count
		} else if d.details >= d.maxDetails() {
			d.fds -= cg.KeptFiles()
			cg.CloseDetail()
			d.fds += cg.KeptFiles()
		} else if cg.KeptFiles() > 1 {
			d.details++
		}
		d.orderOK = false
		d.stateDirt = true
		d.log.Info("tracking workload", "workload", w.Name, "id", w.ID, "cgroup", w.Cgroup)
	case source.Removed:
		delete(d.refused, w.ID)
		d.release(w.ID, "removed")
	}
}

// release stops managing a workload and puts its originals back — unless
// its cgroup directory is another one now (removed and created again under
// the same name before the event was handled): the originals were the old
// cgroup's and are dropped, not written into the new one.
func (d *Daemon) release(id, why string) {
	t, ok := d.work[id]
	if !ok {
		return
	}
	f, canForget := d.act.(forgetter)
	if ino, err := d.dirIno(t.w.Cgroup); canForget && err == nil && t.ino != 0 && ino != t.ino {
		f.Forget(id)
		why += "; its cgroup was created again under the same name: originals dropped, not restored"
	} else if err := d.act.Release(id); err != nil {
		d.countErr(snapshot.CauseActuate)
		d.log.Warn("restore released workload", "workload", t.w.Name, "err", err)
	}
	d.closeCgroup(t)
	d.pol.Forget(id)
	delete(d.work, id)
	if d.inos[t.w.Cgroup] == t.ino {
		delete(d.inos, t.w.Cgroup)
	}
	t.gone = true
	d.orderOK = false
	d.stateDirt = true
	d.log.Info("released workload", "workload", t.w.Name, "id", id, "reason", why)
}

// forgetter is implemented by actuators that can drop a workload without
// restoring its originals (*actuate.Actuator).
type forgetter interface{ Forget(id string) }

// recreated handles a tracked cgroup removed and created again under the
// same name between two looks (the source saw no change): the old one is
// released (its originals dropped, see release) and the new one is
// tracked as a new workload.
func (d *Daemon) recreated(id string, t *tracked) {
	d.release(id, "cgroup gone")
	d.handle(source.Event{Kind: source.Added, Workload: t.w})
}

// sense reads one workload's counters and runs the policy on them. It
// returns false when the workload has gone.
func (d *Daemon) sense(now time.Time, dt float64, id string, t *tracked) bool {
	st, err := t.cg.ReadIO()
	if err != nil {
		if errors.Is(err, cgroupfs.ErrCgroupGone) {
			if ino, err := d.dirIno(t.w.Cgroup); err == nil && t.ino != 0 && ino != t.ino {
				d.recreated(id, t)
				return false
			}
			d.release(id, "cgroup gone")
			return false
		}
		d.countErr(snapshot.CauseSense)
		d.log.Warn("read counters", "workload", t.w.Name, "err", err)
		return false
	}
	rd := d.sen.Take(t.c, now, dt, st, d.devBytes, d.devRead, t.pressure != nil)
	if rd.PressureDue && t.cg.HasPressure() {
		if p, err := t.cg.ReadPressure(); err == nil {
			t.pressure = toPressure(p)
		}
	}
	// The descriptors of the detail files follow the polling: kept while
	// the counters move, given back while they stand still.
	if rd.Busy {
		d.keepDetail(t)
	} else if rd.BackedOff {
		d.dropDetail(t)
	}
	if t.cg.DetailKept() && d.details > d.maxDetails() {
		d.dropDetail(t)
	}
	d.decide(now, id, t, rd.Delta)
	return true
}

// decide runs the policy on delta bytes and logs what changed.
func (d *Daemon) decide(now time.Time, id string, t *tracked, delta uint64) {
	dec := d.pol.ObserveHandle(now, t.ph, id, delta, t.w.Labels)
	if !t.ph.Valid() {
		t.ph = d.pol.Lookup(id)
	}
	for _, tr := range dec.Transitions() {
		d.obs.LevelChange(int(tr.From), int(tr.To), tr.Reason.String())
		d.log.Info("level change", "workload", t.w.Name, "id", id, "from", tr.From.String(), "to", tr.To.String(),
			"reason", tr.Reason.String(), "bytes_in_level", tr.BytesInLevel)
		d.stateDirt = true
	}
	if dec.LabelErrNew && dec.LabelErr != nil {
		d.log.Warn("label not applied", "workload", t.w.Name, "err", dec.LabelErr)
	}
	t.dec = decision{level: dec.Level, weight: dec.Weight, exempt: dec.Exempt, labelErr: dec.LabelErr}
}

// sortOrder brings d.order up to date with d.work.
func (d *Daemon) sortOrder() {
	if d.orderOK {
		return
	}
	d.order = d.order[:0]
	for _, t := range d.work {
		d.order = append(d.order, t)
	}
	slices.SortFunc(d.order, func(a, b *tracked) int {
		return cmp.Or(cmp.Compare(a.w.Name, b.w.Name), cmp.Compare(a.w.ID, b.w.ID))
	})
	d.orderOK = true
}

func devsOf(ds []actuate.Device) []cgroupfs.Dev {
	out := make([]cgroupfs.Dev, len(ds))
	for i, d := range ds {
		out[i] = d.Dev
	}
	return out
}

// startupGrace is how long after start discovered workloads count as
// already running: the source's first listing may take a few ticks.
func startupGrace(interval time.Duration) time.Duration {
	return max(2*time.Second, 3*interval)
}

func toPressure(p cgroupfs.Pressure) *snapshot.Pressure {
	return &snapshot.Pressure{SomeAvg10: p.Some.Avg10, SomeAvg60: p.Some.Avg60, SomeTotal: p.Some.Total,
		FullAvg10: p.Full.Avg10, FullAvg60: p.Full.Avg60, FullTotal: p.Full.Total}
}

// saveState writes the state file when something worth keeping changed, or
// always when force is set. A failed save is tried again at the next tick.
func (d *Daemon) saveState(force bool) error {
	if d.opts.StateFile == "" {
		return nil
	}
	origs, changed := d.act.Originals()
	if changed && !slices.Equal(origs, d.savedOrigs) {
		d.stateDirt = true // kept until a save succeeds
	}
	if !d.stateDirt && !force {
		return nil
	}
	return d.writeState(origs)
}

// persistOriginals is actuate.Config.Persist: it saves the state file with
// origs before the actuator writes the knobs they belong to.
func (d *Daemon) persistOriginals(origs []actuate.Original) error {
	if err := d.writeState(origs); err != nil {
		d.countErr(snapshot.CauseState)
		return err
	}
	return nil
}

// writeState saves origs and every tracked workload's level.
func (d *Daemon) writeState(origs []actuate.Original) error {
	// Levels are kept also on a clean shutdown, so a restarted daemon does
	// not hand every bulk workload level 1 again.
	f := state.File{Written: d.now().UTC(), HierarchyVersion: d.opts.Hierarchy.Version,
		HierarchyMount: d.opts.Hierarchy.Mount, Originals: origs, Inodes: d.inos}
	for _, v := range d.pol.AppendViews(nil) {
		if t, ok := d.work[v.ID]; ok {
			f.Workloads = append(f.Workloads, state.Workload{Cgroup: t.w.Cgroup, View: v})
		}
	}
	if len(f.Originals) == 0 && len(f.Workloads) == 0 {
		if _, err := os.Stat(d.opts.StateFile); errors.Is(err, fs.ErrNotExist) {
			d.stateDirt, d.stateErr, d.savedOrigs = false, nil, nil
			return nil // nothing to keep: leave no file behind
		}
	}
	d.savedOrigs = nil
	if err := state.Save(d.opts.StateFile, f); err != nil {
		if d.stateErr == nil {
			d.log.Warn("save state: retried every tick; knobs whose original it would keep stay unwritten until it succeeds",
				"file", d.opts.StateFile, "err", err)
		}
		d.stateDirt, d.stateErr = true, err
		return err
	}
	if d.stateErr != nil {
		d.log.Info("state file saved again", "file", d.opts.StateFile)
	}
	d.stateDirt, d.stateErr, d.savedOrigs = false, nil, origs
	return nil
}

// publish builds and stores the snapshot of this tick.
//
// A workload whose record did not change since the last tick (most of
// them: idle, or read only every few ticks) is published as the same
// *snapshot.Workload again: readers may hold the previous snapshot, so a
// published record is never modified; a changed workload gets a new one.
// With 10,000 workloads this turns 3.3 MiB of records per tick into the
// 80 KiB slice of pointers plus the few that moved.
func (d *Daemon) publish(at time.Time, dt float64, took time.Duration) {
	s := &snapshot.Snapshot{At: at, Tick: d.tick, Interval: d.opts.Interval, TickDuration: took,
		Source: d.opts.Source.Name(), Actuator: d.opts.ActuatorName, DryRun: d.opts.Actuator.DryRun,
		CgroupMode: d.opts.CgroupMode, Workloads: make([]*snapshot.Workload, 0, len(d.work))}
	devs := d.act.Devices()
	if len(d.devStrs) != len(devs) {
		d.devStrs = make([]string, len(devs))
		for i, dv := range devs {
			d.devStrs[i] = dv.Dev.String()
		}
	}
	for _, t := range d.order {
		id := t.w.ID
		v, ok := d.pol.ViewHandle(t.ph)
		if !ok {
			if v, ok = d.pol.Get(id); !ok {
				continue
			}
		}
		sw := snapshot.Workload{ID: id, Name: t.w.Name, Cgroup: t.w.Cgroup, Labels: t.w.Labels,
			Level: int(v.Level), Pinned: v.Pinned, Exempt: v.Exempt, BytesInLevel: v.BytesInLevel,
			Allowance: v.Allowance, LevelSince: v.EnteredAt, Weight: int(v.Weight),
			ReadBytes: t.c.RBytes, WriteBytes: t.c.WBytes, ReadIOs: t.c.RIOs, WriteIOs: t.c.WIOs,
			ReadBps: t.c.RBps, WriteBps: t.c.WBps, Pressure: t.pressure}
		if t.dec.labelErr != nil {
			sw.LabelError = t.dec.labelErr.Error()
		}
		apps := d.appScratch[:0]
		applied, ok := t.ah.Applied()
		if !ok {
			applied = d.act.Applied(id)
		}
		for _, ap := range applied {
			a := snapshot.Applied{Device: ap.Device.Name, Dev: d.devString(devs, ap.Device.Dev), Mechanism: ap.Device.Mechanisms(),
				ReadBps: ap.Limits.RBps, WriteBps: ap.Limits.WBps, Throttled: !ap.Limits.IsZero()}
			if isWeightMech(string(ap.Device.Mech)) {
				a.Weight = int(ap.Weight)
			}
			if ap.Err != nil {
				a.Error = ap.Err.Error()
			}
			apps = append(apps, a)
		}
		d.appScratch = apps
		s.Levels[sw.Level]++
		if t.pub != nil && !t.labelsNew && sameWorkload(t.pub, &sw, apps) {
			s.Workloads = append(s.Workloads, t.pub)
			continue
		}
		if len(apps) > 0 {
			sw.Applied = slices.Clone(apps)
		}
		pub := new(snapshot.Workload)
		*pub = sw
		t.pub, t.labelsNew = pub, false
		s.Workloads = append(s.Workloads, pub)
	}
	// d.order is sorted by name, then id: so are the workloads.
	for i, dv := range devs {
		s.Devices = append(s.Devices, snapshot.Device{Name: dv.Name, Dev: d.devStrs[i], Scheduler: dv.Scheduler, Mechanism: dv.Mechanisms(),
			WeightsEffective: dv.Mech != "throttle", TopActiveLevel: d.act.TopActive(i),
			ReadBps: float64(d.devRead[i]) / dt, WriteBps: float64(d.devBytes[i]-d.devRead[i]) / dt,
			ReadBytes: d.devTotal[i].read, WriteBytes: d.devTotal[i].write})
	}
	// The throttle's capacity estimate, where the actuator has one.
	if c, ok := d.act.(interface{ Capacity(int) (float64, float64) }); ok {
		for i := range s.Devices {
			s.Devices[i].CapacityBps, s.Devices[i].CapacityIOPS = c.Capacity(i)
		}
	}
	slices.SortFunc(s.Devices, func(a, b snapshot.Device) int { return cmp.Compare(a.Name, b.Name) })
	for cause, n := range d.errCounts {
		if n > 0 {
			s.Errors = append(s.Errors, snapshot.ErrorCount{Cause: snapshot.ErrorCause(cause).String(), Count: n})
		}
	}
	slices.SortFunc(s.Errors, func(a, b snapshot.ErrorCount) int { return cmp.Compare(a.Cause, b.Cause) })
	if d.stateErr != nil {
		s.StateError = d.stateErr.Error()
	}
	// A source that can lose its backend (the Docker engine) says so.
	if h, ok := d.opts.Source.(interface{ Health() string }); ok {
		s.SourceError = h.Health()
	}
	if d.opts.HostPressure != "" {
		if p, err := cgroupfs.ReadHostPressure(d.opts.HostPressure); err == nil {
			s.HostPressure = toPressure(p)
		}
	}
	d.snap.Store(s)
}

// devString is dev as MAJ:MIN, without formatting it again when it is one
// of the actuated devices.
func (d *Daemon) devString(devs []actuate.Device, dev cgroupfs.Dev) string {
	for i := range devs {
		if devs[i].Dev == dev {
			return d.devStrs[i]
		}
	}
	return dev.String()
}

// sameWorkload reports whether the published record old says what sw and
// its Applied entries apps say. Labels are compared by the caller (a new
// labels map sets tracked.labelsNew); Pressure by pointer (a new reading
// is a new value).
func sameWorkload(old, sw *snapshot.Workload, apps []snapshot.Applied) bool {
	return old.ID == sw.ID && old.Name == sw.Name && old.Cgroup == sw.Cgroup &&
		old.Level == sw.Level && old.Pinned == sw.Pinned && old.Exempt == sw.Exempt &&
		old.LabelError == sw.LabelError && old.BytesInLevel == sw.BytesInLevel &&
		old.Allowance == sw.Allowance && old.LevelSince.Equal(sw.LevelSince) && old.Weight == sw.Weight &&
		old.ReadBytes == sw.ReadBytes && old.WriteBytes == sw.WriteBytes &&
		old.ReadIOs == sw.ReadIOs && old.WriteIOs == sw.WriteIOs &&
		old.ReadBps == sw.ReadBps && old.WriteBps == sw.WriteBps &&
		old.Pressure == sw.Pressure && slices.Equal(old.Applied, apps)
}

func isWeightMech(m string) bool {
	switch m {
	case "bfq-weight", "iocost-weight", "cfq-weight", "docker-blkio-weight":
		return true
	}
	return false
}

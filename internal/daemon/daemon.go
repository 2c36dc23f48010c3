// Package daemon is the loop that wires the pipeline together, once per
// tick: the source says who exists, the sensor reads what each did, the
// policy decides each level, the actuator applies it, and a snapshot of the
// result is published for the API. It is the only place that knows all four.
//
// daemon.go is the tick (step) and what it keeps per workload; options.go
// is what configures a Daemon and the Observer it reports to; events.go
// applies the source's events; proceed.go drives the actuator; publish.go
// builds the snapshot; fds.go keeps the open-file budget; health.go opens
// the device sensors and the storage-health stage. The stages themselves
// are their packages: sensor, policy, actuate, health, snapshot, and state
// for the state file.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/control"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
	"github.com/ddiskqos/ddiskqos/internal/health"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/sensor"
	"github.com/ddiskqos/ddiskqos/internal/sensor/latency"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/snapshot/reuse"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/state"
)

// tracked is one workload as the loop knows it.
type tracked struct {
	w    source.Workload
	cg   *cgroupfs.Cgroup
	ino  uint64           // of the cgroup's directory when tracked; 0 unknown
	c    *sensor.Counters // the sensing stage's state of it
	dec  decision         // the policy's last
	gone bool             // released during this tick's sensing

	// pub is the workload's record in the last published snapshot, reused
	// while nothing in it changes; labelsNew says the source handed in a
	// new labels map since.
	pub       *snapshot.Workload
	labelsNew bool

	// The workload's state in the policy engine and the actuator, so the
	// loop does not look its 64-character ID up in their maps every tick.
	ph policy.Handle
	ah actuate.Handle

	dstate int32 // its tasks in D state when last looked at (health.Stage.DState)

	// kio is what the kernel's maps saw its cgroups complete at the tick
	// kioTick-1 (latency.go): the sensing stage's reading from them.
	kio     []sensor.KernelIO
	kioTick uint64
}

// refusal is a workload not tracked for want of descriptors (fds.go) and
// whether its I/O history is to be charged once it is (it was new, not
// found running, when first seen).
type refusal struct {
	w      source.Workload
	charge bool
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
	// thrPanic is a panic of a throttle's loop (actuate.Config.OnPanic),
	// handed to Run.
	thrPanic chan *PanicError
	hostPSI  sensor.HostPressure // Options.HostPressure (publish)

	work      map[string]*tracked
	order     []*tracked // d.work sorted by name, then id (the snapshot's order)
	orderOK   bool       // order matches work
	nextSlot  uint32
	sen       sensor.Sensor      // the sensing stage
	noFile    uint64             // the open-file budget (soft RLIMIT_NOFILE)
	actFDs    int                // descriptors the actuator keeps (the throttle's), at the last tick
	fds       int                // descriptors the tracked cgroups keep
	details   int                // of which detail files (see cgroupfs.Cgroup.CloseDetail)
	refused   map[string]refusal // not tracked for want of descriptors
	started   time.Time
	synced    bool // the source's initial listing is complete (source.Synced): workloads added now are new
	orphansOK bool // orphan restore done
	tick      uint64
	lastTick  time.Time
	errCounts [snapshot.NumErrorCauses]uint64
	targets   []actuate.Target
	devStatus []actuate.DeviceStatus // the last Apply's
	// publish's scratch: MAJ:MIN of the actuated devices, one workload's
	// Applied entries.
	devStrs    []string
	appScratch []snapshot.Applied
	// appShared: the Applied lists of one uncapped device shared by the
	// published records.
	appShared reuse.AppliedLists

	rd reuse.Readers // the published snapshot and its readers (reuse.go)
	rt reuse.Retired // records replaced, for reuse (reuse.go)

	mu              sync.Mutex // guards pending and pendingInterval
	pending         *policy.Config
	pendingInterval time.Duration // 0: none
	store           state.Store   // the state file

	sensors devsensor.Set  // the actuated devices' sensors, indexed like them (health.go)
	hl      *health.Stage  // the storage-health stage (internal/health)
	lat     *latency.Stage // the I/O latency stage (internal/sensor/latency)
	latw    latWork        // its input (latency.go)
	ctl     control.Set    // per actuated device: its latency controller (control.go)
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
		refused: map[string]refusal{}, hostPSI: sensor.HostPressure{Path: opts.HostPressure}}
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
	statePath := opts.StateFile
	if opts.Actuator.DryRun {
		// A dry run writes nothing, the state file included: saved, its
		// levels and (unwritten) originals would be adopted by the next
		// real run.
		statePath = ""
	}
	d.store = state.Store{Path: statePath, Hierarchy: opts.Hierarchy, Log: d.log, Now: d.now,
		Originals: func() ([]actuate.Original, bool) { return d.act.Originals() }, Workloads: d.stateWorkloads}
	st, err := d.store.Load()
	if err != nil {
		return nil, err
	}
	ac := opts.Actuator
	ac.Hierarchy = opts.Hierarchy
	// A panic of a throttle's loop goes to Run's, which restores every
	// original and returns it (see Run).
	d.thrPanic = make(chan *PanicError, 1)
	ac.OnPanic = func(p any, stack []byte) {
		select {
		case d.thrPanic <- &PanicError{Value: p, Stack: stack}:
		default: // one is enough: Run is restoring already
		}
	}
	for _, dev := range append(slices.Clone(opts.SenseDevices), devsOf(ac.Devices)...) {
		if err := opts.Hierarchy.EnableV1Accounting(dev); err != nil {
			if errors.Is(err, cgroupfs.ErrDeviceGone) {
				// Removed since the host was read (a loop device of a
				// snap or a test detached, a disk unplugged): nothing
				// of it to count, and no reason to refuse the start.
				d.log.Warn("device gone while starting: its I/O is not counted", "dev", dev.String())
				continue
			}
			return nil, fmt.Errorf("enable v1 I/O accounting on %s: %w", dev, err)
		}
	}
	if err := d.newActuator(ac, st.Originals); err != nil {
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
	d.sen = sensor.Sensor{Devices: devsOf(d.act.Devices()), Stacked: opts.Stacked, Activity: opts.Activity}
	d.setPeriods()
	if err := d.initHealth(); err != nil {
		d.closeHealth() // no Apply yet: no throttle loop runs
		return nil, err
	}
	d.initLatency()
	return d, nil
}

// Run runs the loop until ctx ends, then restores every original value and
// returns. An error is returned only when the loop cannot go on.
func (d *Daemon) Run(ctx context.Context) (err error) {
	// A panic of the loop is a bug, and it is not hidden: it is logged with
	// its stack and Run returns a *PanicError after restoring every
	// original, so the process exits non-zero (and is restarted by its
	// supervisor) without leaving its caps and weights in the cgroups
	// until the next start. A panic of the restore itself still crashes;
	// the state file keeps the originals for the next start.
	defer func() {
		if p := recover(); p != nil {
			stack := debug.Stack()
			d.log.Error("daemon loop panicked: restoring every original, then exiting; this is a bug, please report it with the stack",
				"panic", fmt.Sprint(p), "stack", string(stack))
			err = errors.Join(&PanicError{Value: p, Stack: stack}, d.shutdown())
		}
	}()
	d.started = d.now()
	d.noFile = d.opts.NoFile
	if d.noFile == 0 {
		lim, err := host.RaiseNoFile(0)
		if err != nil {
			d.log.Warn("open-file limit", "err", err)
		}
		d.noFile = lim.Soft
		d.log.Info("open-file limit", "soft", lim.Soft, "hard", lim.Hard, "raised_soft", lim.RaisedSoft,
			"room_for_workloads", lim.Room())
	}
	srcCtx, stopSrc := context.WithCancel(ctx)
	srcDone := make(chan error, 1)
	// A panic of the source's goroutine would end the process with the
	// originals left in the cgroups (the recover above sees only this
	// goroutine's): it is handed to the loop, which restores and returns
	// it as a panic of its own.
	srcPanic := make(chan *PanicError, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				srcPanic <- &PanicError{Value: p, Stack: debug.Stack()}
			}
		}()
		srcDone <- d.opts.Source.Run(srcCtx, d.events)
	}()
	defer stopSrc()

	ticker := time.NewTicker(d.opts.Interval)
	defer ticker.Stop()
	d.step() // first tick at once: the snapshot exists from the start
	for {
		select {
		case <-ctx.Done():
			return d.shutdown()
		case pe := <-d.thrPanic:
			// The throttle logged it with its stack.
			d.log.Error("a throttle's loop panicked: restoring every original, then exiting", "panic", fmt.Sprint(pe.Value))
			return errors.Join(pe, d.shutdown())
		case pe := <-srcPanic:
			d.log.Error("workload source panicked: restoring every original, then exiting; this is a bug, please report it with the stack",
				"source", d.opts.Source.Name(), "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
			return errors.Join(pe, d.shutdown())
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

// PanicError is Run's error after its loop panicked (and restored every
// original it could).
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("daemon loop panicked: %v", e.Value) }

// shutdown restores every original and records that in the state file.
// An original that cannot be restored is reported (the error, and its
// value in the log for an operator to set by hand) and then dropped from
// the state file: kept, it would fail every later shutdown again.
func (d *Daemon) shutdown() error {
	var errs []error
	if err := d.restoreAll(); err != nil {
		errs = append(errs, err)
	}
	for _, t := range d.work {
		d.closeCgroup(t)
	}
	d.closeHealth()
	d.lat.Close()
	d.hostPSI.Close()
	if err := d.store.Write(nil); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		d.log.Info("restored original I/O settings of every workload")
	}
	return errors.Join(errs...)
}

// step is one tick.
func (d *Daemon) step() {
	start := d.now()
	d.rt.Tick(d.rd.Begin())
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
	d.retryRefused()
	d.sortOrder()
	// The latency sensor's read comes before the sensing: its deltas are
	// the activity source that makes a quiet workload due at this tick
	// (internal/sensor/latency), and the requests it charges to levels ran at the
	// levels of the last tick's decisions, which it sees here.
	d.latencyTick()
	d.sen.BeginTick()
	d.targets = d.targets[:0]
	// read and skipped are counted here, not derived from len(d.work):
	// a workload that goes while this tick senses it leaves d.work
	// (sense removes it), and a count derived from what is left went
	// negative (a prometheus counter panics on that).
	read, kern, skipped := 0, 0, 0
	kernOK := d.kernelReadings()
	d.hl.TickStart(d.tick)
	for _, t := range d.order {
		if t.gone {
			continue
		}
		id := t.w.ID
		if d.sen.Due(t.c, t.ino, d.tick) {
			if kernOK && d.sen.FromKernel(t.c, d.tick) {
				// The kernel's maps stand in for the files (latency.go).
				kern++
				d.senseKernel(start, dt, id, t)
			} else {
				read++
				if !d.sense(start, dt, id, t) {
					continue
				}
			}
		} else {
			// Not read this tick: its bytes wait in the kernel's counters
			// for the next read. The policy still sees the time pass
			// (boost, labels), and the actuator still gets its target.
			skipped++
			t.c.Idle()
			d.decide(start, id, t, 0)
		}
		dec := t.dec
		d.targets = append(d.targets, actuate.Target{ID: id, Cgroup: t.w.Cgroup, Level: int(dec.level),
			Weight: cgroupfs.Weight(dec.weight), Exempt: dec.exempt, Active: t.c.Active, Handle: &t.ah})
	}
	d.sortOrder()
	for range d.hl.Tick(start) {
		d.countErr(snapshot.CauseSense)
	}
	d.obs.ObserveSense(read, kern, skipped)
	d.proceed(start, dt)
	if err := d.store.Save(); err != nil {
		d.countErr(snapshot.CauseState) // logged by the store when it starts failing
	}
	d.tick++
	d.lastTick = start
	took := d.now().Sub(start)
	d.publish(start, dt, took)
	d.obs.ObserveTick(took)
}

func (d *Daemon) countErr(cause snapshot.ErrorCause) {
	d.errCounts[cause]++
	d.obs.Error(cause)
}

// sense reads one workload's counters and runs the policy on them. It
// returns false when the workload has gone.
func (d *Daemon) sense(now time.Time, dt float64, id string, t *tracked) bool {
	rd, err := d.sen.Read(t.c, t.cg, now, dt)
	if err != nil {
		if errors.Is(err, cgroupfs.ErrCgroupGone) {
			if d.opts.Hierarchy.Recreated(t.w.Cgroup, t.ino) {
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
	d.sensed(now, id, t, rd)
	return true
}

// senseKernel takes one workload's reading from the kernel's maps and runs
// the policy on it.
func (d *Daemon) senseKernel(now time.Time, dt float64, id string, t *tracked) {
	var kio []sensor.KernelIO
	if t.kioTick == d.tick+1 {
		kio = t.kio
	}
	d.sensed(now, id, t, d.sen.TakeKernel(t.c, now, dt, kio))
}

// sensed follows one reading of a workload's counters (its files' or the
// kernel's maps'): its tasks' D state, its detail files, the policy.
func (d *Daemon) sensed(now time.Time, id string, t *tracked, rd sensor.Reading) {
	t.dstate = d.hl.DState(t.cg, rd.Delta > 0, t.dstate)
	// The descriptors of the detail files follow the polling: kept while
	// the counters move, given back once they have stood still long
	// enough to be polled least often (not at the first still reading:
	// a paced or capped stream has still ticks, and closing and opening
	// its file again each time cost more than the file is read).
	if rd.Busy {
		d.keepDetail(t)
	} else if rd.Settled {
		d.dropDetail(t)
	}
	if t.cg.DetailKept() && d.details > d.maxDetails() {
		d.dropDetail(t)
	}
	d.decide(now, id, t, rd.Delta)
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
		d.store.Dirty()
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
	d.latw.stale = true
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

// stateWorkloads appends the policy state of every tracked workload (the
// state file's Workloads).
func (d *Daemon) stateWorkloads(dst []state.Workload) []state.Workload {
	for _, v := range d.pol.AppendViews(nil) {
		if t, ok := d.work[v.ID]; ok {
			dst = append(dst, state.Workload{Cgroup: t.w.Cgroup, View: v})
		}
	}
	return dst
}

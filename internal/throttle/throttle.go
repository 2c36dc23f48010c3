// Package throttle is the throttle mechanism (mech.Throttle): per device,
// a fast loop of its own that caps the heavy workloads of the worse levels
// through blk-throttle (v1) or io.max (v2) while a better level does I/O,
// re-arms the caps, paces and accounts them. throttle.go is its face and
// the loop's goroutine; step.go one period of the loop (reads the
// counters, decides who is active, writes and re-arms the caps); caps.go
// its pure arithmetic (capacity estimate, caps, held-back judgement) and
// the Ceiling; load.go who is heavy (takes a large share of the device)
// and so may be capped; pace.go the re-arm's rule; account.go its account
// of its own caps in the device sensor; bios.go the kernel's bio counters;
// members.go what a period looks at; config.go its configuration.
//
// The actuator (internal/actuate) constructs a throttle per device (New),
// records the originals of its knob (Knob) before a member is Durable,
// tells it the workloads and their levels after each Apply (Update), and
// restores the originals when done (Forget, Stop). The throttle never
// restores anything itself: a panic of its loop is handed to the caller
// (Options.OnPanic) to restore.
package throttle

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/policy"
)

// levels is the number of levels, the policy's.
const levels = policy.NumLevels

// Throttle is the throttle mechanism on one device: its fast loop and
// what it keeps. Its methods are safe for concurrent use (the loop runs
// in a goroutine of its own, started by the first Update).
type Throttle struct {
	h       cgroupfs.Hierarchy
	dev     cgroupfs.Dev
	knob    mech.Knob // writes and reads back the caps (Options.Knob)
	cfg     Config
	name    string
	sysRoot string        // where an own device sensor is opened; "" for none
	slice   time.Duration // blk-throttle's slice (throttleSlice)
	dryRun  bool
	log     *slog.Logger
	now     func() time.Time
	onPanic func(any, []byte) // Options.OnPanic

	mu      sync.Mutex
	members map[string]*tmember
	// watch is what a period looks at: the demoted members and those
	// still capped, rebuilt when the members change — a period costs per
	// demoted workload, never per workload on the device.
	watch []*tmember
	// opened: the members whose counters were opened, some since closed
	// (OpenFiles counts the open ones and drops the others): not a walk
	// of every member each tick (10,000 map entries were 1.7 ms a tick).
	opened  []*tmember
	parents []*tparent
	setNew  bool // members or levels changed: watch and baseline are rebuilt
	// parentsNew: members came or went (or a parent's read failed): the
	// parents are rebuilt too.
	parentsNew bool
	demoted    int      // members at level 2..4
	epoch      uint64   // Update's count: a member it did not see is dropped
	dirs       []string // rebuildParents' scratch

	better time.Time // when a better level (1, or a new cgroup) last did I/O on the device
	top    int
	ceil   Ceiling
	// cappedAt is the last period that found a cap in force: a device
	// delivering less while its workloads are capped says nothing about
	// the device.
	cappedAt time.Time
	inForce  bool // a cap was in force after the last applyCaps
	// heldDevAt is the last period a cap held its workload back (for the
	// latency controller: a cap nobody runs into says nothing of its size).
	heldDevAt time.Time
	// share is the capped workloads' share of the capacity, all together,
	// as the latency controller steers it (Steer); 0: the fixed rule
	// (Shares bounded by MaxBurst / slice).
	share float64
	// shareMost is what the levels capped at the last period get
	// together unsteered: the most a steered share can give them.
	shareMost float64
	// contendedAt is the last period the level rule capped a workload,
	// in force or lifted by the share (1); used is what those workloads
	// moved then, together, as a part of the capacity; capShare their read
	// caps then, the same way (0: none in force).
	contendedAt    time.Time
	used, capShare float64
	guard          liftGuard // guard.go
	// base is the last exact value of the parents' bytes minus the
	// demoted workloads' bytes: the better levels' I/O so far.
	base   int64
	baseOK bool

	// sen is the device's sensor: shared (the daemon's, ownSen false) or
	// opened from sysRoot by the throttle itself; senErr: it could not be.
	sen    *devsensor.Device
	ownSen bool
	senErr bool
	cap    capacity
	// The caps' accounting (account): the last period, and the start of
	// the window over which a capped workload is judged held back.
	lastStep, heldAt time.Time
	// The device's last reading and period (for the depth estimate).
	devLast   devsensor.Reading
	devLastOK bool
	devPer    devPeriod
	rearms    uint64 // caps re-armed (written again unchanged)
	steps     uint64 // fast-loop periods run (tests count in them)
	running   bool
	stop      chan struct{}
	done      chan struct{}
	// wake ends the wait of an idle loop at once when a workload is
	// demoted (buffered, 1).
	wake chan struct{}
	// lastIn is the last Update's list (Update skips the same list).
	lastIn []Member
	// bio: the kernel's bio counters (SetBios), nil where the latency
	// sensor does not run (a period then reads the counter files);
	// bioIno: the members watched in it now, by inode (bios.go).
	bio    BioCounter
	bioIno map[uint64]*tmember
	// applyCaps' scratch, kept between periods: a period at 1,000 demoted
	// allocated 0.4 MB a second in them, a third of what made the daemon
	// collect garbage every 6 ticks at 10,000 workloads.
	capIns  []capIn
	capWant []cgroupfs.Limits
}

// Member is one workload as the throttle sees it.
type Member struct {
	Cgroup string
	Level  int
	// Durable: the knob's original is recorded and durable, so the
	// throttle may write the knob.
	Durable bool
}

type tmember struct {
	cgroup  string
	parent  string // the directory above cgroup
	epoch   uint64 // the last Update that listed it
	level   int
	durable bool
	// *twatch is its state as the fast loop watches it: allocated when it
	// is first watched (demoted, or capped), nil before. Most members are
	// never demoted: at 10,000 workloads the watched state of each was
	// 3.5 MB of a 35 MB heap.
	*twatch
}

// twatch is what the fast loop keeps of a member it watches.
type twatch struct {
	cg      *cgroupfs.Cgroup // open while demoted (without bio counters)
	ino     uint64           // its directory's inode, while bioW
	bioW    bool             // watched in the bio counters (in bioIno)
	opened  bool             // on the throttle's opened list
	last    uint64           // bytes on the device at the last read
	lastIOs uint64           // requests, likewise (v2; v1 reads no requests here)
	lastOK  bool
	// The window over which it is judged held back by its cap: its bytes
	// and requests at the start, and what its caps allowed since.
	winBytes, winIOs uint64
	winOK, winIOsOK  bool
	allowB, allowIO  float64
	allowSecs        float64   // of the window, with a cap in force
	active           time.Time // last I/O seen by the fast loop
	limits           cgroupfs.Limits
	wrote            time.Time // when limits were last written (set or re-armed)
	err              error
	// Its load (load.go): the last period's bytes (dOK: a
	// difference of two reads), smoothed rate and depth; heldAt: the last
	// window its cap held it back; heavyAt: the last period it was heavy.
	dBytes          float64
	dOK             bool
	load            load
	heldAt, heavyAt time.Time
}

// watched gives m its watched state, if it has none yet.
func (m *tmember) watched() {
	if m.twatch == nil {
		m.twatch = &twatch{}
	}
}

// inForce is what m's caps are and the last error writing them: none
// while it was never watched.
func (m *tmember) inForce() (cgroupfs.Limits, error) {
	if m.twatch == nil {
		return cgroupfs.Limits{}, nil
	}
	return m.limits, m.err
}

// closeCg closes m's counters, if open.
func (m *tmember) closeCg() {
	if m.twatch != nil && m.cg != nil {
		m.cg.Close()
		m.cg = nil
	}
}

type tparent struct {
	rel  string
	cg   *cgroupfs.Cgroup
	ino  uint64 // its directory's inode, while bioW
	bioW bool   // watched in the bio counters
}

// Options is what a throttle runs on: its device, the hierarchy of the
// cgroups it caps, and where it reads the device's counters.
type Options struct {
	Hierarchy cgroupfs.Hierarchy
	// Name is the device's name in sysfs ("loop0"); Dev its number.
	Name string
	Dev  cgroupfs.Dev
	// Knob writes a cgroup's caps on Dev (a value of mech.LimitsValue)
	// and reads them back; nil: mech.LimitsKnob of Hierarchy and Dev.
	// The caller records and restores the originals through the same
	// knob (Knob).
	Knob mech.Knob
	// Sensor is the device's sensor, shared (the caller owns it); nil:
	// the throttle opens one of its own from SysRoot ("" for none: the
	// caps are sized from ObservePeak then).
	Sensor  *devsensor.Device
	SysRoot string
	DryRun  bool
	Logger  *slog.Logger
	// OnPanic is called, from the loop's goroutine, with a panic of the
	// loop and its stack, after the loop has logged it and ended (the
	// caps it wrote are still in force: only the caller knows their
	// originals, and restores them). It must not block. nil: the panic
	// goes on and ends the process, as any goroutine's does.
	OnPanic func(value any, stack []byte)
}

// New returns the throttle of device o.Dev with configuration cfg (a
// zero field takes its default). Its loop starts at the first Update.
func New(cfg Config, o Options) *Throttle {
	tc := cfg
	if tc.Shares[0] == 0 {
		tc.Shares = DefaultShares()
	}
	if tc.Hold == 0 {
		tc.Hold = DefaultHold
	}
	if tc.Reads == 0 {
		tc.Reads = DefaultReads
	}
	if tc.Period == 0 {
		tc.Period = DefaultPeriod
	}
	if tc.Light == 0 {
		tc.Light = DefaultLight
	}
	knob := o.Knob
	if knob == nil {
		knob = mech.LimitsKnob{H: o.Hierarchy, Dev: o.Dev}
	}
	t := &Throttle{h: o.Hierarchy, dev: o.Dev, knob: knob, cfg: tc, name: o.Name, slice: throttleSlice,
		dryRun: o.DryRun, log: o.Logger, now: time.Now, onPanic: o.OnPanic, members: map[string]*tmember{}, sen: o.Sensor, parentsNew: true}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if o.Sensor == nil && o.Name != "" {
		t.sysRoot = o.SysRoot
	}
	return t
}

// Knob is the knob the throttle writes its caps through: the one to
// record their originals with and to restore them through.
func (t *Throttle) Knob() mech.Knob { return t.knob }

// Wants reports whether the throttle manages a workload at level: it may
// cap it (level 2 and worse, with a share below 1).
func (t *Throttle) Wants(level int) bool {
	return level >= 2 && level <= levels && t.cfg.Shares[level-1] < 1
}

func (t *Throttle) TopActive() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.top
}

func (t *Throttle) Capacity() (bps, iops float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cap.bps, t.cap.iops
}

func (t *Throttle) ObservePeak(bps float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sen == nil && bps > t.cap.bps {
		t.cap.bps = bps
	}
}

// Steer sets the capped workloads' share of the device's capacity, all
// together (the latency controller's output, internal/control); 0 goes
// back to the fixed rule; 1 lifts the level caps (work conservation).
func (t *Throttle) Steer(share float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	next := max(0, min(share, 1))
	t.guard.lifting(t.share, next, t.now(), t.contended())
	t.share = next
}

// Contention returns the last period the level rule capped a workload
// (in force, or lifted by a steered share of 1) and what the workloads it
// capped moved then, as a part of the device's capacity (0: not known),
// and their read caps then, the same way (0: none in force, or not known).
func (t *Throttle) Contention() (at time.Time, used, capShare float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.contendedAt, t.used, t.capShare
}

// Load returns the share steered (0: none), the most the levels capped
// now can get together (0: none capped), the last period that found a cap
// in force and the last one a cap held its workload back.
func (t *Throttle) Load() (share, most float64, cappedAt, heldAt time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.share, t.shareMost, t.cappedAt, t.heldDevAt
}

func (t *Throttle) Hold(c Ceiling) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ceil = c
}

func (t *Throttle) OpenFiles() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.parents)
	if t.ownSen && t.sen != nil {
		n++ // a shared sensor's descriptor is its owner's
	}
	open := t.opened[:0]
	for _, m := range t.opened {
		if m.cg == nil {
			m.opened = false
			continue
		}
		n += m.cg.KeptFiles()
		open = append(open, m)
	}
	clear(t.opened[len(open):]) // no hold on dropped members
	t.opened = open
	return n
}

func (t *Throttle) InForce(cgroup string) (cgroupfs.Limits, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m, ok := t.members[cgroup]; ok {
		return m.inForce()
	}
	return cgroupfs.Limits{}, nil
}

// Update takes the workloads on the device after an Apply and starts the
// fast loop when there is something to watch.
func (t *Throttle) Update(ms []Member) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running && slices.Equal(ms, t.lastIn) {
		// The same workloads at the same levels as the last Update: it
		// would change nothing (at 1,000 idle workloads, a map look-up
		// each was a fifth of the idle daemon's CPU).
		return
	}
	t.lastIn = append(t.lastIn[:0], ms...)
	t.epoch++
	demoted := 0
	for _, in := range ms {
		m, ok := t.members[in.Cgroup]
		if !ok {
			m = &tmember{cgroup: in.Cgroup, parent: t.parentOf(in.Cgroup)}
			t.members[in.Cgroup] = m
			t.setNew, t.parentsNew = true, true
		}
		m.epoch = t.epoch
		if m.level != in.Level {
			if t.Wants(in.Level) && !t.Wants(m.level) {
				// Newly demoted: what it did while better is no longer
				// a better level's I/O (a boosted stream must not cap
				// itself with its own past). It used its allowance, so
				// it is active — at its new level: the worse levels stay
				// capped meanwhile, with no gap in which their queued
				// requests would be let go at once.
				t.better = time.Time{}
				m.watched()
				m.active = t.now()
			}
			m.level = in.Level
			t.setNew = true
		}
		m.durable = in.Durable
		if t.Wants(m.level) {
			demoted++
		} else {
			m.closeCg()
		}
	}
	for _, m := range t.members {
		if m.epoch != t.epoch {
			t.dropLocked(m)
		}
	}
	woke := t.demoted == 0 && demoted > 0
	t.demoted = demoted
	if !t.running && len(t.members) > 0 {
		t.running = true
		t.stop, t.done, t.wake = make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
		go t.loop(t.stop, t.done, t.wake)
	} else if woke && t.wake != nil {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// Forget stops managing cgroup: the fast loop will not write it again.
func (t *Throttle) Forget(cgroup string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m, ok := t.members[cgroup]; ok {
		t.dropLocked(m)
	}
}

func (t *Throttle) dropLocked(m *tmember) {
	t.lastIn = t.lastIn[:0] // the next Update must add it again if listed
	m.closeCg()
	delete(t.members, m.cgroup)
	t.setNew, t.parentsNew = true, true
}

// Stop ends the fast loop and closes what it keeps open.
func (t *Throttle) Stop() {
	t.mu.Lock()
	running, stop, done := t.running, t.stop, t.done
	t.running = false
	t.mu.Unlock()
	if running {
		close(stop)
		<-done
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropBios()
	for _, m := range t.members {
		t.dropLocked(m)
	}
	t.closeParents()
	if t.ownSen && t.sen != nil {
		t.sen.Close()
		t.sen, t.ownSen = nil, false
	}
}

func (t *Throttle) loop(stop, done, wake chan struct{}) {
	defer close(done)
	// A panic here is a bug. Unrecovered, it would end the process with
	// the caps left in the cgroups until the next start: the loop ends,
	// and the panic goes to the caller's restore (Options.OnPanic), as
	// the daemon's own loop and its source's goroutine do.
	defer func() {
		if p := recover(); p != nil {
			stack := debug.Stack()
			t.log.Error("throttle loop panicked: its caps stay until the originals are restored; this is a bug, please report it with the stack",
				"device", t.name, "panic", fmt.Sprint(p), "stack", string(stack))
			if t.onPanic == nil {
				panic(p)
			}
			t.onPanic(p, stack)
		}
	}()
	timer := time.NewTimer(t.cfg.Period)
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case <-timer.C:
		case <-wake:
			// A workload was demoted while the loop idled: its cap
			// must not wait for the idle wait's end.
			if !timer.Stop() {
				<-timer.C
			}
		}
		timer.Reset(t.step())
	}
}

package actuate

import (
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate/mech"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
	"github.com/ddiskqos/ddiskqos/internal/policy"
)

// The throttle mechanism: throttle.go is its fast loop (reads the
// counters, decides who is active, writes and re-arms the caps);
// throttlecaps.go its pure arithmetic (capacity estimate, caps, held-back
// judgement) and the Ceiling; throttleload.go who is heavy (takes a large
// share of the device) and so may be capped; throttleaccount.go its
// account of its own caps in the device sensor; throttleconfig.go its
// configuration.

// levels is the number of levels, the policy's.
const levels = policy.NumLevels

// throttle is the throttle mechanism on one device.
type throttle struct {
	limitsKnob
	cfg     Throttle
	name    string
	sysRoot string        // where an own device sensor is opened; "" for none
	slice   time.Duration // blk-throttle's slice (throttleSlice)
	dryRun  bool
	log     *slog.Logger
	now     func() time.Time

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
	// bioIno: the members watched in it now, by inode (throttlebios.go).
	bio    BioCounter
	bioIno map[uint64]*tmember
	// applyCaps' scratch, kept between periods: a period at 1,000 demoted
	// allocated 0.4 MB a second in them, a third of what made the daemon
	// collect garbage every 6 ticks at 10,000 workloads (issue 19).
	capIns  []capIn
	capWant []cgroupfs.Limits
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
	// 3.5 MB of a 35 MB heap (issue 19).
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
	// Its load (throttleload.go): the last period's bytes (dOK: a
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

// newThrottle returns the throttle of device d; sen is the device's sensor,
// nil for one of its own (from cfg.SysRoot) or none.
func newThrottle(cfg Config, d Device, sen *devsensor.Device) *throttle {
	tc := cfg.Throttle
	if tc.Shares[0] == 0 {
		tc.Shares = DefaultThrottleShares()
	}
	if tc.Hold == 0 {
		tc.Hold = DefaultThrottleHold
	}
	if tc.Reads == 0 {
		tc.Reads = DefaultThrottleReads
	}
	if tc.Period == 0 {
		tc.Period = DefaultThrottlePeriod
	}
	if tc.Light == 0 {
		tc.Light = DefaultThrottleLight
	}
	t := &throttle{limitsKnob: limitsKnob{h: cfg.Hierarchy, dev: d.Dev}, cfg: tc, name: d.Name, slice: throttleSlice,
		dryRun: cfg.DryRun, log: cfg.Logger, now: time.Now, members: map[string]*tmember{}, sen: sen, parentsNew: true}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if sen == nil && d.Name != "" {
		t.sysRoot = cfg.SysRoot
	}
	return t
}

func (t *throttle) Wants(level int) bool {
	return level >= 2 && level <= levels && t.cfg.Shares[level-1] < 1
}

func (t *throttle) TopActive() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.top
}

func (t *throttle) Capacity() (bps, iops float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cap.bps, t.cap.iops
}

func (t *throttle) ObservePeak(bps float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sen == nil && bps > t.cap.bps {
		t.cap.bps = bps
	}
}

// Steer sets the capped workloads' share of the device's capacity, all
// together (the latency controller's output, internal/control); 0 goes
// back to the fixed rule.
func (t *throttle) Steer(share float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.share = max(0, min(share, 1))
}

// Load returns the share steered (0: none), the most the levels capped
// now can get together (0: none capped), the last period that found a cap
// in force and the last one a cap held its workload back.
func (t *throttle) Load() (share, most float64, cappedAt, heldAt time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.share, t.shareMost, t.cappedAt, t.heldDevAt
}

func (t *throttle) Hold(c Ceiling) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ceil = c
}

func (t *throttle) OpenFiles() int {
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

func (t *throttle) InForce(cgroup string) (cgroupfs.Limits, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m, ok := t.members[cgroup]; ok {
		return m.inForce()
	}
	return cgroupfs.Limits{}, nil
}

// Update takes the workloads on the device after an Apply and starts the
// fast loop when there is something to watch.
func (t *throttle) Update(ms []Member) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running && slices.Equal(ms, t.lastIn) {
		// The same workloads at the same levels as the last Update: it
		// would change nothing (at 1,000 idle workloads, a map look-up
		// each was a fifth of the idle daemon's CPU, issue 19).
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
func (t *throttle) Forget(cgroup string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m, ok := t.members[cgroup]; ok {
		t.dropLocked(m)
	}
}

func (t *throttle) dropLocked(m *tmember) {
	t.lastIn = t.lastIn[:0] // the next Update must add it again if listed
	m.closeCg()
	delete(t.members, m.cgroup)
	t.setNew, t.parentsNew = true, true
}

// Stop ends the fast loop and closes what it keeps open.
func (t *throttle) Stop() {
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

func (t *throttle) loop(stop, done, wake chan struct{}) {
	defer close(done)
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

// step is one period of the fast loop; it returns how long to wait.
func (t *throttle) step() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.steps++
	t.measure(now)
	defer t.account(now)
	if t.demoted == 0 {
		// Nobody to cap: nothing to read but the device's capacity, and
		// the caps of workloads that have just left the capped levels
		// (a boost to level 1) to lift.
		t.top = 0
		if t.inForce {
			if t.setNew {
				t.rebuildWatch() // a dropped member must not be written
				t.syncBios()
			}
			t.applyCaps(now)
		}
		return t.idleWait()
	}
	if t.setNew {
		if t.parentsNew {
			t.rebuildParents()
			t.parentsNew = false
		}
		t.rebuildWatch()
		t.syncBios()
		t.setNew = false
		t.baseOK = false
	}
	// The parents, the demoted, the parents again. What the parents did
	// beyond the demoted workloads is a better level's I/O; since the
	// demoted are read between two reads of the parents, at the time of
	// that read it lies between lo and hi (every counter only grows), and
	// lo == hi when no parent counter moved meanwhile. Growth is proven
	// when lo exceeds the last exact value: a 4 KiB read beside a stream
	// of 1 MiB requests is seen in the first period whose reads were not
	// split by one of the stream's requests (most periods; 8 once, a
	// ~2.5 GB/s stream on a busy host), never invented by the stream's
	// own timing. The demoted are read once a period and the
	// parents (a few) twice: at 1,000 demoted workloads the reads of a
	// period are half those of reading the demoted twice around the
	// parents (issue 19: the fast loop's reads were a quarter of the
	// daemon's CPU at 10,000 workloads).
	// With the kernel's bio counters (throttlebios.go) the parents' count
	// is that other I/O itself: lo == hi always.
	var lo, hi int64
	var reads int
	if t.bio != nil {
		other, n, err := t.readBios(now)
		reads, lo, hi = n, other, other
		if err != nil {
			// The sensor closed, or its table lost a parent: the
			// files from the next period on.
			t.log.Warn("throttle: the kernel's bio counters cannot be read; reading the counter files instead",
				"device", t.name, "err", err)
			t.dropBios()
			t.bio = nil
			t.setNew, t.parentsNew = true, true
		}
	} else {
		sumP1, n, okP1 := t.readParents()
		reads += n
		sumD, n := t.readDemoted(now, true)
		reads += n
		sumP2, n, okP2 := t.readParents()
		reads += n
		if !okP1 || !okP2 {
			t.baseOK = false
			t.setNew, t.parentsNew = true, true
		}
		lo, hi = sumP1-sumD, sumP2-sumD
	}
	t.observeLoad(now)
	switch {
	case !t.baseOK:
		if lo == hi {
			t.base, t.baseOK = lo, true
		}
	case lo > t.base:
		t.better = now
		if lo == hi {
			t.base = lo
		}
	case lo == hi:
		t.base = lo // exact; lower after a cgroup went
	}
	// The best level active within Hold: 1 for the parents' other I/O,
	// else the best current level of a demoted workload that did I/O — its
	// activity counts at the level it has now, so a stream moving down
	// the levels is never capped by what it did one level up.
	t.top = 0
	if !t.better.IsZero() && now.Sub(t.better) < t.cfg.Hold {
		t.top = 1
	} else {
		for _, m := range t.watch {
			if t.Wants(m.level) && !m.active.IsZero() && now.Sub(m.active) < t.cfg.Hold && (t.top == 0 || m.level < t.top) {
				t.top = m.level
			}
		}
	}
	reads += t.applyCaps(now)
	return t.budgetPeriod(reads)
}

// readCost is what one counter read is taken to cost in the read budget
// (Throttle.Reads a second): a leaf cgroup's, measured. A parent's
// recursive counters sum those of every descendant that did I/O on the
// device in the kernel, so at thousands of workloads one parent read
// costs as much as hundreds of leaf reads: a parent read counts as the
// reads of readCost its time makes (parentReads).
const readCost = 10 * time.Microsecond

// parentReads is how many reads a parent read that took took counts as:
// its time in units of readCost, at least 1, and at most one per member
// of the throttle (what a recursive read can sum up), so that a read
// that merely waited for the CPU on a busy host (wall time, not CPU)
// cannot stretch the period of a throttle of a few members.
func (t *throttle) parentReads(took time.Duration) int {
	return min(max(int(took/readCost), 1), max(len(t.members), 1))
}

// budgetPeriod is the period that keeps a step of reads counter reads
// (and writes) within the read budget.
func (t *throttle) budgetPeriod(reads int) time.Duration {
	return max(t.cfg.Period, time.Duration(reads)*time.Second/time.Duration(t.cfg.Reads))
}

// Idle waits of the fast loop while nothing is demoted.
const (
	// idleBusyPeriods: the device moves data, so its capacity is being
	// measured (capacityWindow): read it every 10 periods.
	idleBusyPeriods = 10
	// idleQuietWait: the device did nothing over the last wait and has
	// nothing in flight: reading /sys/block/<dev>/stat ten times a second
	// would only cost the idle host CPU and wake-ups (issue 19: a fifth
	// of an idle daemon's CPU). A demotion wakes the loop at once (Update).
	idleQuietWait = time.Second
)

// idleWait is how long the fast loop waits while nothing is demoted.
func (t *throttle) idleWait() time.Duration {
	busy := t.inForce || !t.devPer.ok || t.devPer.bytes > 0 || t.devLast.Stat.InFlight > 0
	if busy {
		return idleBusyPeriods * t.cfg.Period
	}
	return max(idleQuietWait, idleBusyPeriods*t.cfg.Period)
}

// readParents sums the device's bytes of every parent; reads is what the
// reads count in the budget (parentReads); ok is false when a parent could
// not be read (gone: the parents are rebuilt).
func (t *throttle) readParents() (sum int64, reads int, ok bool) {
	ok = true
	for _, p := range t.parents {
		start := time.Now() // what the read cost, not the loop's clock
		st, err := p.cg.ReadIO()
		reads += t.parentReads(time.Since(start))
		if err != nil {
			ok = false
			continue
		}
		d := cgroupfs.DeviceIn(st.Devices, t.dev)
		sum += int64(d.RBytes + d.WBytes)
	}
	return sum, reads, ok
}

// readDemoted sums the device's bytes of every demoted workload. With mark
// it also records which of them did I/O since the last period (their
// level's activity).
func (t *throttle) readDemoted(now time.Time, mark bool) (sum int64, reads int) {
	for _, m := range t.watch {
		if !t.Wants(m.level) {
			continue
		}
		if m.cg == nil {
			cg, err := openBytes(t.h, m.cgroup)
			if err != nil {
				continue
			}
			m.cg, m.lastOK = cg, false
			if !m.opened {
				m.opened = true
				t.opened = append(t.opened, m)
			}
		}
		st, err := m.cg.ReadIO()
		reads++
		if err != nil {
			continue
		}
		d := cgroupfs.DeviceIn(st.Devices, t.dev)
		b := d.RBytes + d.WBytes
		if mark {
			m.observe(now, b, d.RIOs+d.WIOs)
		}
		sum += int64(b)
	}
	return sum, reads
}

// observe takes a period's read of m's bytes (and requests, 0 where not
// read) on the device: it is active when they moved.
func (m *tmember) observe(now time.Time, b, ios uint64) {
	if m.lastOK && b != m.last {
		m.active = now
	}
	m.dBytes, m.dOK = float64(sub(b, m.last)), m.lastOK
	m.last, m.lastIOs, m.lastOK = b, ios, true
}

// measure updates the device's capacity from its own counters, read
// through its sensor.
func (t *throttle) measure(now time.Time) {
	if t.sen == nil {
		if t.sysRoot == "" || t.senErr {
			return
		}
		sen, err := devsensor.Open(t.sysRoot, t.name, t.cfg.Period)
		if err != nil {
			t.senErr = true
			t.log.Warn("throttle: device counters not readable; capacity from the daemon's ticks", "device", t.name, "err", err)
			return
		}
		t.sen, t.ownSen = sen, true
	}
	r, err := t.sen.Read(now)
	if err != nil {
		t.devPer = devPeriod{}
		return
	}
	t.cap.observe(r.Stat, r.At, t.cappedAt)
	// A reading another consumer took (the same At) is no new period.
	t.devPer = devPeriod{}
	if t.devLastOK && r.At.After(t.devLast.At) {
		t.devPer = periodOf(t.devLast.Stat, r.Stat, r.At.Sub(t.devLast.At))
	}
	if !t.devLastOK || r.At.After(t.devLast.At) {
		t.devLast, t.devLastOK = r, true
	}
}

// applyCaps writes each demoted workload's cap where it changed, and
// re-arms the caps in force of the active ones (see Throttle); it returns
// how many files it wrote.
func (t *throttle) applyCaps(now time.Time) (writes int) {
	calc := capCalc{cfg: t.cfg, slice: t.slice, top: t.top, ceil: t.ceil, bps: t.cap.bps, iops: t.cap.iops, light: t.cfg.Light,
		share: t.share}
	ins := slices.Grow(t.capIns[:0], len(t.watch))[:len(t.watch)]
	t.capIns = ins
	for i, m := range t.watch {
		active := !m.active.IsZero() && now.Sub(m.active) < t.cfg.Hold
		if ranAtCap(m.load.rate, m.limits) {
			t.heldDevAt = now
		}
		held := (!m.heldAt.IsZero() && now.Sub(m.heldAt) < t.cfg.Hold) || ranAtCap(m.load.rate, m.limits)
		ins[i] = capIn{level: m.level, active: active, rate: m.load.rate, depth: m.load.depth, held: held}
		if calc.heavy(ins[i]) {
			m.heavyAt = now
		}
		ins[i].lately = !m.heavyAt.IsZero() && now.Sub(m.heavyAt) < t.cfg.Hold
	}
	wants := calc.caps(ins, t.capWant[:0])
	t.capWant = wants
	_, _, _, t.shareMost = calc.levelShares(ins)
	capped := false
	defer func() {
		if capped {
			t.cappedAt = now
		}
		t.inForce = false
		for _, m := range t.watch {
			if !m.limits.IsZero() {
				t.inForce = true
				break
			}
		}
	}()
	for i, m := range t.watch {
		capped = capped || !m.limits.IsZero()
		want := wants[i]
		capped = capped || !want.IsZero()
		if !m.durable {
			continue // its original is not durable yet: never write
		}
		if want == m.limits && m.err == nil {
			if !want.IsZero() && ins[i].active && !t.dryRun && !overCap(m.load.rate, m.limits) &&
				rearmDue(m.limits, now.Sub(m.wrote), t.cfg.DebtForgiven && bytesBound(m.load.rate, m.limits)) {
				writes++
				t.rearm(m, now)
			}
			continue
		}
		if t.dryRun {
			m.limits = want
			continue
		}
		writes++
		v := mech.LimitsValue(want)
		err := t.Write(m.cgroup, v)
		if err == nil {
			err = mech.Verify(t.limitsKnob, string(mech.Throttle), m.cgroup, v)
		}
		if err != nil {
			gone := errors.Is(err, cgroupfs.ErrCgroupGone)
			if gone {
				// A workload that exited is no warning (issue 18: 1,331
				// WARN lines in 5 minutes of container churn).
				t.log.Debug("throttle: cap not applied, the cgroup is gone", "device", t.name, "cgroup", m.cgroup)
			} else if (m.err == nil) != (err == nil) || (m.err != nil && m.err.Error() != err.Error()) {
				t.log.Warn("throttle: cap not applied", "device", t.name, "cgroup", m.cgroup, "err", err)
			}
			m.err = err
			if gone {
				t.dropLocked(m)
			}
			continue
		}
		m.limits, m.err, m.wrote = want, nil, now
	}
	return writes
}

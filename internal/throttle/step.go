package throttle

import (
	"errors"
	"slices"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
	"github.com/ddiskqos/ddiskqos/internal/mech"
)

// One period of the fast loop: the counters read (the parents', the
// demoted workloads', the device's), the read budget that sets the next
// period, and the caps written or re-armed.

// step is one period of the fast loop; it returns how long to wait.
func (t *Throttle) step() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.steps++
	t.measure(now)
	t.guardLift(now)
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
	// parents (the fast loop's reads were a quarter of the daemon's CPU
	// at 10,000 workloads).
	// With the kernel's bio counters (bios.go) the parents' count
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
// (Config.Reads a second): a leaf cgroup's, measured. A parent's
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
func (t *Throttle) parentReads(took time.Duration) int {
	return min(max(int(took/readCost), 1), max(len(t.members), 1))
}

// budgetPeriod is the period that keeps a step of reads counter reads
// (and writes) within the read budget.
func (t *Throttle) budgetPeriod(reads int) time.Duration {
	return max(t.cfg.Period, time.Duration(reads)*time.Second/time.Duration(t.cfg.Reads))
}

// Idle waits of the fast loop while nothing is demoted.
const (
	// idleBusyPeriods: the device moves data, so its capacity is being
	// measured (capacityWindow): read it every 10 periods.
	idleBusyPeriods = 10
	// idleQuietWait: the device did nothing over the last wait and has
	// nothing in flight: reading /sys/block/<dev>/stat ten times a second
	// would only cost the idle host CPU and wake-ups (a fifth of an idle
	// daemon's CPU). A demotion wakes the loop at once (Update).
	idleQuietWait = time.Second
)

// idleWait is how long the fast loop waits while nothing is demoted.
func (t *Throttle) idleWait() time.Duration {
	busy := t.inForce || !t.devPer.ok || t.devPer.bytes > 0 || t.devLast.Stat.InFlight > 0
	if busy {
		return idleBusyPeriods * t.cfg.Period
	}
	return max(idleQuietWait, idleBusyPeriods*t.cfg.Period)
}

// readParents sums the device's bytes of every parent; reads is what the
// reads count in the budget (parentReads); ok is false when a parent could
// not be read (gone: the parents are rebuilt).
func (t *Throttle) readParents() (sum int64, reads int, ok bool) {
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
func (t *Throttle) readDemoted(now time.Time, mark bool) (sum int64, reads int) {
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
func (t *Throttle) measure(now time.Time) {
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
// re-arms the caps in force of the active ones (see Config); it returns
// how many files it wrote.
func (t *Throttle) applyCaps(now time.Time) (writes int) {
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
	var rate, capRate float64
	contended := false
	for i := range ins {
		if calc.levelCapped(ins[i]) {
			contended, rate, capRate = true, rate+ins[i].rate, capRate+float64(wants[i].RBps)
		}
	}
	if contended {
		t.contendedAt, t.used, t.capShare = now, 0, 0
		if t.cap.bps > 0 {
			t.used = min(rate/t.cap.bps, 1)
			t.capShare = min(capRate/t.cap.bps, 1)
		}
	}
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
	// Raised caps are ramped (pace.go): how many, and whether the lifted
	// ones together reach the capacity.
	nRaise := 0
	var liftBps, liftIOs float64
	// Only where a better level is active: a cap the controller lifts, or
	// raises, for a neighbour of the victims (a workload no longer heavy,
	// or with nobody better left, is let go at once).
	rampOf := func(i int, m *tmember) bool {
		return m.durable && m.level > t.top && t.top != 0 && raising(m.limits, wants[i]) &&
			(!wants[i].IsZero() || (calc.lifted() && calc.levelCapped(ins[i])))
	}
	for i, m := range t.watch {
		if rampOf(i, m) {
			nRaise++
			if wants[i].IsZero() {
				liftBps, liftIOs = liftBps+float64(m.limits.RBps), liftIOs+float64(m.limits.RIOps)
			}
		}
	}
	step := rampStep(t.cap.bps, t.cap.iops, nRaise)
	lifted := t.cap.bps <= 0 || liftBps >= t.cap.bps || (t.cap.iops > 0 && liftIOs >= t.cap.iops)
	for i, m := range t.watch {
		capped = capped || !m.limits.IsZero()
		want := wants[i]
		if m.err == nil && rampOf(i, m) {
			want = ramp(m.limits, want, step, lifted)
		}
		if t.h.Version == 1 {
			want = oneFile(m.limits, want)
		}
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
		err := t.knob.Write(m.cgroup, v)
		if err == nil {
			err = mech.Verify(t.knob, string(mech.Throttle), m.cgroup, v)
		}
		if err != nil {
			gone := errors.Is(err, cgroupfs.ErrCgroupGone)
			if gone {
				// A workload that exited is no warning (it made 1,331
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

// Package sensor is the pipeline's sensing stage: it reads a workload's
// cumulative cgroup I/O counters (and io.pressure when due) and turns each
// reading into what the policy charges (the bytes it moved since the last
// reading, I/O of stacked devices counted once), its rates, the bytes moved
// on each actuated device, and when its counters are next worth reading
// (adaptive polling: a workload whose counters stand still is read less and
// less often, down to MaxPeriod ticks apart, and every tick again once they
// move).
//
// The cgroup handles and their descriptors are the daemon's (it keeps the
// open-file budget); what a reading means is this package's.
package sensor

import (
	"slices"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// Sensor holds what every workload's readings are judged against.
type Sensor struct {
	// Devices are the actuated devices, in the actuator's order:
	// Counters.Active and DeviceBytes are indexed like them.
	Devices []cgroupfs.Dev
	// Stacked maps a stacked device (loop over a file, dm, md) to the disks
	// under it, whose counters show its I/O again.
	Stacked map[cgroupfs.Dev][]cgroupfs.Dev
	// MaxPeriod is the longest polling period in ticks (a power of two)
	// of a workload the Activity source does not vouch for: the polling
	// backstop.
	MaxPeriod uint32
	// ActiveMaxPeriod is the longest polling period (a power of two) of a
	// workload whose cgroup the Activity source knows at the tick: a
	// source that sees every request makes a longer backstop safe.
	// Below MaxPeriod (0 too): MaxPeriod.
	ActiveMaxPeriod uint32
	// Activity, when set, makes a quiet workload it saw do I/O due at
	// once (see Activity and Due).
	Activity Activity

	deltas []devDelta    // Take's scratch
	rec    []overlap     // Take's scratch: what each of deltas reconciled
	dev    []DeviceBytes // indexed like Devices
}

// DeviceBytes is what the workloads moved on one of Sensor.Devices.
type DeviceBytes struct {
	// Bytes (read and written) and Read are this tick's share (see Take).
	Bytes, Read uint64
	// ReadTotal and WriteTotal are since the start.
	ReadTotal, WriteTotal uint64
}

// BeginTick starts a tick: its device bytes are zero until readings are
// taken. Call it before the tick's first Take.
func (s *Sensor) BeginTick() {
	if s.Activity != nil {
		s.Activity.BeginTick()
	}
	if len(s.dev) != len(s.Devices) {
		s.dev = make([]DeviceBytes, len(s.Devices))
	}
	for i := range s.dev {
		s.dev[i].Bytes, s.dev[i].Read = 0, 0
	}
}

// EndTick adds the tick's device bytes to the totals and returns every
// device's, indexed like Devices (valid until the next BeginTick).
func (s *Sensor) EndTick() []DeviceBytes {
	for i := range s.dev {
		s.dev[i].ReadTotal += s.dev[i].Read
		s.dev[i].WriteTotal += s.dev[i].Bytes - s.dev[i].Read
	}
	return s.dev
}

// DeviceBytes returns every device's bytes as of the last EndTick, indexed
// like Devices.
func (s *Sensor) DeviceBytes() []DeviceBytes { return s.dev }

// DefaultQuietTicks is the default quiet span, in intervals, that bounds
// the polling period (see MaxPeriod).
const DefaultQuietTicks = 4

// MaxPeriod is the longest polling period, in ticks, a power of two: the
// largest one not above quietMax/interval (quietMax 0: DefaultQuietTicks
// intervals).
func MaxPeriod(quietMax, interval time.Duration) uint32 {
	if quietMax == 0 {
		quietMax = DefaultQuietTicks * interval
	}
	p := uint32(1)
	for time.Duration(2*p)*interval <= quietMax && p < 1<<10 {
		p *= 2
	}
	return p
}

// PressureEvery: io.pressure of a workload whose counters stand still is
// read at every PressureEvery-th reading of them.
const PressureEvery = 16

// IOCountsEvery: on cgroup v1, where a workload's I/O counts are a file of
// their own (blkio.throttle.io_serviced*), a workload whose bytes move has
// them read at every IOCountsEvery-th reading, and its bytes at every
// reading. The policy, the throttle and the device rates use bytes only;
// the counts are shown (read_ios, write_ios) and lag by at most
// IOCountsEvery-1 readings, and are exact whenever read: I/O of stacked
// devices is counted once over the span since the last count (see Take).
// At 10,000 workloads, 1,000 of them busy, this is 750 of ~4,400 preads a
// tick. A reading after the counts were skipped while the bytes stood
// still, and the first reading, read them at once.
const IOCountsEvery = 4

// Counters is one workload's sensing state.
type Counters struct {
	// Totals since the workload was first read (the baseline reading
	// itself is not charged unless Charge), and the rates of the last
	// reading.
	RBytes, WBytes, RIOs, WIOs uint64
	RBps, WBps                 float64
	// Active[i] is whether the last reading saw I/O on Sensor.Devices[i].
	Active []bool
	// Pressure is the last io.pressure reading, nil before one (v2 only).
	Pressure *snapshot.Pressure

	charge bool // charge the first reading from zero (new since start)
	seen   bool // the counters have a baseline
	last   []cgroupfs.DeviceIO
	// lastIO is the reading the I/O counts were last taken at, while
	// later readings had stale counts (ioLag > 0); else it is last.
	lastIO   []cgroupfs.DeviceIO
	ioLag    uint32 // readings since the I/O counts were read
	lastRead time.Time
	// The counters are read on ticks where (tick+slot)%period == 0.
	period, slot uint32
	reads        uint32 // readings since io.pressure was last due

	// Readings from the kernel's maps (TakeKernel): what they charged
	// since the last file reading, per device (stacked overlap removed),
	// and beyond the files; whether they saw it move since; how many
	// there were since and in all.
	ahead []devDelta
	// lag: per stacked device, its bytes its lower disks had not shown
	// by the last file reading (stackedOverlapLag).
	lag       []devDelta
	kernMoved bool
	sinceFile uint32
	kernTakes uint64
}

// NewCounters starts a workload's sensing state. slot spreads the readings
// of quiet workloads over the ticks; charge says whether its first reading
// counts from zero (a workload that appeared after the source's initial
// listing) or is only a baseline (one of that listing, already running:
// what it did before says nothing about what it does now).
func (s *Sensor) NewCounters(slot uint32, charge bool) *Counters {
	return &Counters{charge: charge, period: 1, slot: slot, Active: make([]bool, len(s.Devices))}
}

// Wake makes the counters due at every tick again (after a reconfiguration
// or new labels: the policy should see them at once).
func (c *Counters) Wake() { c.period = 1 }

// Period is the polling period, in ticks.
func (c *Counters) Period() uint32 { return c.period }

// Due reports whether the counters are read at tick, at the full polling
// period (Sensor.Due bounds it while the activity source does not vouch).
func (c *Counters) Due(tick uint64) bool {
	return c.period <= 1 || (uint32(tick)+c.slot)%c.period == 0
}

// Used reports whether the workload's counters, as last read, show I/O
// on dev: the kernel's totals for its cgroup, so I/O from before the
// daemon saw it counts too. A device it never touched is not used, and
// what ddiskqos sets there does nothing to it (yet).
func (c *Counters) Used(dev cgroupfs.Dev) bool {
	d := cgroupfs.DeviceIn(c.last, dev)
	return d.RBytes+d.WBytes+d.RIOs+d.WIOs > 0
}

// Idle records a tick on which the counters were not read: no activity
// is claimed for it (the bytes wait in the kernel's counters).
func (c *Counters) Idle() { clear(c.Active) }

// Reading is what one reading of the counters gave.
type Reading struct {
	// Delta is the bytes (read + written) to charge.
	Delta uint64
	// Busy: the counters moved (or this was the first reading); the
	// workload is read every tick again. BackedOff: they stood still and
	// the polling period grew; Settled: to MaxPeriod, from below.
	Busy, BackedOff, Settled bool
	// PressureDue says whether io.pressure should be read now: when the
	// counters moved, every PressureEvery-th reading otherwise.
	PressureDue bool
}

// Read reads cg's counters at now, in a tick of dt seconds, folds them into
// c (see Take), and reads cg's io.pressure into c.Pressure when due. An
// error is cgroupfs.Cgroup.ReadIO's: cgroupfs.ErrCgroupGone once the cgroup
// is removed.
func (s *Sensor) Read(c *Counters, cg *cgroupfs.Cgroup, now time.Time, dt float64) (Reading, error) {
	read := cg.ReadIO
	// Busy: the counts every IOCountsEvery-th reading; but with fresh
	// counts after readings from the kernel's maps, which stay allowed
	// only while the files' counts are as fresh as their bytes.
	if c.seen && c.ioLag+1 < IOCountsEvery && c.period == 1 && c.sinceFile == 0 {
		read = cg.ReadBytes // busy: the counts every IOCountsEvery-th
	}
	st, err := read()
	if err != nil {
		return Reading{}, err
	}
	rd := s.Take(c, now, dt, st)
	if rd.PressureDue && cg.HasPressure() {
		if p, err := cg.ReadPressure(); err == nil {
			c.Pressure = pressureOf(c.Pressure, p)
		}
	}
	return rd, nil
}

// Take folds the reading st, taken at now in a tick of dt seconds, into c,
// and adds this tick's share of its bytes per actuated device to the
// tick's DeviceBytes (a workload read less often than every tick brings
// several ticks' bytes: a device's rate must not be made of them).
//
// The bytes are charged since the last reading. The I/O counts, when st has
// them (not StaleIOs), are counted since the last reading that had them,
// and I/O of stacked devices is removed from them in proportion to the
// bytes of that same span: both sides of the proportion cover the same
// requests, however many readings lay between.
//
// What readings from the kernel's maps charged since the last file reading
// (TakeKernel) is removed from what the files show, device by device after
// the stacked overlap (see ReconcileEvery): only the rest is charged, and
// only the rest counts in the tick's DeviceBytes.
func (s *Sensor) Take(c *Counters, now time.Time, dt float64, st cgroupfs.IOStat) Reading {
	span := dt
	if !c.lastRead.IsZero() {
		if x := now.Sub(c.lastRead).Seconds(); x > span {
			span = x
		}
	}
	c.lastRead = now
	base := c.seen || c.charge // deltas are charged (not a baseline only)
	// The baseline of the I/O counts: the last reading, unless readings
	// with stale counts came since.
	ioPrev := c.last
	if c.ioLag > 0 {
		ioPrev = c.lastIO
	}
	ioFresh := !st.StaleIOs
	// A reading whose counts are as fresh as its bytes, after one that was
	// too: one pass counts both (every reading on v2).
	together := ioFresh && c.ioLag == 0
	kern := len(c.ahead) > 0 // readings from the kernel's maps came since the last
	var dr, dw uint64
	clear(c.Active)
	s.deltas = s.deltas[:0]
	for _, cur := range st.Devices {
		if !base {
			continue // baseline only: history before we saw it is not charged
		}
		prev := cgroupfs.DeviceIn(c.last, cur.Dev)
		r, w := sub(cur.RBytes, prev.RBytes), sub(cur.WBytes, prev.WBytes)
		dr += r
		dw += w
		var rIOs, wIOs uint64
		if together {
			rIOs, wIOs = sub(cur.RIOs, prev.RIOs), sub(cur.WIOs, prev.WIOs)
			c.RIOs += rIOs
			c.WIOs += wIOs
		}
		if (len(s.Stacked) > 0 || kern) && r+w > 0 {
			s.deltas = append(s.deltas, devDelta{cur.Dev, r, w, rIOs, wIOs})
		}
		if !kern {
			s.addDevice(c, cur.Dev, r, w, dt/span)
		}
	}
	// I/O of a stacked device that its lower disks show again counts once
	// (over consecutive readings: c.lag).
	var ov overlap
	ov, s.deltas = stackedOverlapLag(s.Stacked, s.deltas, &c.lag)
	dr, dw, c.RIOs, c.WIOs = dr-ov.r, dw-ov.w, c.RIOs-ov.rIOs, c.WIOs-ov.wIOs
	moved := dr+dw > 0
	if kern {
		// Charged ahead from the kernel's maps: the rest is charged, and
		// counts in the devices' bytes (the raw bytes less what was).
		s.rec = s.rec[:0]
		for i := range s.deltas {
			rec := reconcile(c.ahead, &s.deltas[i])
			s.rec = append(s.rec, rec)
			dr, dw, c.RIOs, c.WIOs = dr-rec.r, dw-rec.w, c.RIOs-rec.rIOs, c.WIOs-rec.wIOs
		}
		for _, cur := range st.Devices {
			prev := cgroupfs.DeviceIn(c.last, cur.Dev)
			r, w := sub(cur.RBytes, prev.RBytes), sub(cur.WBytes, prev.WBytes)
			if i := slices.IndexFunc(s.deltas, func(d devDelta) bool { return d.dev == cur.Dev }); i >= 0 {
				r, w = sub(r, s.rec[i].r), sub(w, s.rec[i].w)
			}
			s.addDevice(c, cur.Dev, r, w, dt/span)
		}
	}
	if ioFresh && !together && base {
		s.takeIOs(c, ioPrev, st.Devices)
	}
	switch {
	case ioFresh:
		c.ioLag = 0
	case c.ioLag == 0:
		// The first reading with stale counts: the baseline of the
		// counts stays the last reading.
		c.lastIO = append(c.lastIO[:0], c.last...)
		c.ioLag = 1
	default:
		c.ioLag++
	}
	c.last = append(c.last[:0], st.Devices...)
	first := !c.seen
	c.seen = true
	c.RBytes += dr
	c.WBytes += dw
	c.RBps, c.WBps = float64(dr)/span, float64(dw)/span
	rd := Reading{Delta: dr + dw}
	c.reads++
	if moved || c.kernMoved || c.Pressure == nil || c.reads >= PressureEvery {
		c.reads = 0
		rd.PressureDue = true
	}
	c.ahead = slices.DeleteFunc(c.ahead, func(a devDelta) bool { return a.r+a.w+a.rIOs+a.wIOs == 0 })
	c.kernMoved = false
	c.sinceFile = 0
	s.backOff(c, &rd, moved || first)
	return rd
}

// addDevice adds a reading's r and w bytes on dev, times scale (this
// tick's share of the reading's span), to the tick's DeviceBytes and marks
// c active there.
func (s *Sensor) addDevice(c *Counters, dev cgroupfs.Dev, r, w uint64, scale float64) {
	if r+w == 0 {
		return
	}
	for i, dv := range s.Devices {
		if dv == dev {
			c.Active[i] = true
			s.dev[i].Bytes += uint64(float64(r+w) * scale)
			s.dev[i].Read += uint64(float64(r) * scale)
		}
	}
}

// backOff sets c's polling period after a reading rd: back to every tick
// when it moved, else one step longer while below the longest.
func (s *Sensor) backOff(c *Counters, rd *Reading, moved bool) {
	if moved {
		c.period = 1
		rd.Busy = true
		return
	}
	if c.period < max(s.MaxPeriod, s.ActiveMaxPeriod) {
		prev := c.period
		c.period *= 2
		if c.period > s.MaxPeriod {
			// Beyond the short backstop the activity source wakes it:
			// no need to creep up to the long one.
			c.period = max(c.period, s.ActiveMaxPeriod)
		}
		rd.BackedOff = true
		rd.Settled = c.period >= s.MaxPeriod && prev < s.MaxPeriod
	}
}

// takeIOs counts the I/Os of cur since the reading prev (the last one that
// had counts), stacked devices' once: their lower disks' requests are
// removed in proportion to the bytes of the same span.
func (s *Sensor) takeIOs(c *Counters, prev, cur []cgroupfs.DeviceIO) {
	s.deltas = s.deltas[:0]
	var rIOs, wIOs uint64
	for _, d := range cur {
		p := cgroupfs.DeviceIn(prev, d.Dev)
		ri, wi := sub(d.RIOs, p.RIOs), sub(d.WIOs, p.WIOs)
		// Requests the kernel's maps charged ahead are charged once.
		for j := range c.ahead {
			if a := &c.ahead[j]; a.dev == d.Dev {
				x, y := min(a.rIOs, ri), min(a.wIOs, wi)
				a.rIOs, a.wIOs, ri, wi = a.rIOs-x, a.wIOs-y, ri-x, wi-y
			}
		}
		rIOs += ri
		wIOs += wi
		if len(s.Stacked) > 0 {
			if r, w := sub(d.RBytes, p.RBytes), sub(d.WBytes, p.WBytes); r+w > 0 {
				s.deltas = append(s.deltas, devDelta{d.Dev, r, w, ri, wi})
			}
		}
	}
	ov := stackedOverlap(s.Stacked, s.deltas)
	c.RIOs += rIOs - ov.rIOs
	c.WIOs += wIOs - ov.wIOs
}

// sub is cur-prev, or cur when the counter went backwards (it was reset).
func sub(cur, prev uint64) uint64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// pressureOf is p as the snapshot shows it: prev itself when p reads the
// same (an idle workload's pressure does not move, and the snapshot keeps
// its record while the pointer is the same: no allocation), else a new
// value (published records share prev: it is never written).
func pressureOf(prev *snapshot.Pressure, p cgroupfs.Pressure) *snapshot.Pressure {
	if prev != nil && *prev == pressureValue(p) {
		return prev
	}
	return PressureOf(p)
}

func pressureValue(p cgroupfs.Pressure) snapshot.Pressure {
	return snapshot.Pressure{SomeAvg10: p.Some.Avg10, SomeAvg60: p.Some.Avg60, SomeTotal: p.Some.Total,
		FullAvg10: p.Full.Avg10, FullAvg60: p.Full.Avg60, FullTotal: p.Full.Total}
}

// PressureOf is a PSI reading as the snapshot shows it.
func PressureOf(p cgroupfs.Pressure) *snapshot.Pressure {
	v := pressureValue(p)
	return &v
}

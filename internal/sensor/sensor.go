// Package sensor is the pipeline's sensing stage: it turns one reading of a
// workload's cumulative cgroup I/O counters into what the policy charges
// (the bytes it moved since the last reading, I/O of stacked devices counted
// once), its rates, the actuated devices it was active on, and when its
// counters are next worth reading (adaptive polling: a workload whose
// counters stand still is read less and less often, down to MaxPeriod
// ticks apart, and every tick again once they move).
//
// Reading the files is the daemon's (it owns the cgroup handles and the
// file budget); what a reading means is this package's.
package sensor

import (
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Sensor holds what every workload's readings are judged against.
type Sensor struct {
	// Devices are the actuated devices, in the actuator's order:
	// Counters.Active and the devBytes of Take are indexed like them.
	Devices []cgroupfs.Dev
	// Stacked maps a stacked device (loop over a file, dm, md) to the disks
	// under it, whose counters show its I/O again.
	Stacked map[cgroupfs.Dev][]cgroupfs.Dev
	// MaxPeriod is the longest polling period in ticks (a power of two).
	MaxPeriod uint32

	deltas []devDelta // Take's scratch
}

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

// Counters is one workload's sensing state.
type Counters struct {
	// Totals since the workload was first read (the baseline reading
	// itself is not charged unless Charge), and the rates of the last
	// reading.
	RBytes, WBytes, RIOs, WIOs uint64
	RBps, WBps                 float64
	// Active[i] is whether the last reading saw I/O on Sensor.Devices[i].
	Active []bool

	charge   bool // charge the first reading from zero (new since start)
	seen     bool // the counters have a baseline
	last     []cgroupfs.DeviceIO
	lastRead time.Time
	// The counters are read on ticks where (tick+slot)%period == 0.
	period, slot uint32
	reads        uint32 // readings since io.pressure was last due
}

// NewCounters starts a workload's sensing state. slot spreads the readings
// of quiet workloads over the ticks; charge says whether its first reading
// counts from zero (a workload that appeared after start) or is only a
// baseline (one that was already running: what it did before says nothing
// about what it does now).
func (s *Sensor) NewCounters(slot uint32, charge bool) *Counters {
	return &Counters{charge: charge, period: 1, slot: slot, Active: make([]bool, len(s.Devices))}
}

// Wake makes the counters due at every tick again (after a reconfiguration
// or new labels: the policy should see them at once).
func (c *Counters) Wake() { c.period = 1 }

// Due reports whether the counters are read at tick.
func (c *Counters) Due(tick uint64) bool {
	return c.period <= 1 || (uint32(tick)+c.slot)%c.period == 0
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
	// the polling period grew.
	Busy, BackedOff bool
	// PressureDue says whether io.pressure should be read now: when the
	// counters moved, every PressureEvery-th reading otherwise.
	PressureDue bool
}

// Take folds the reading st, taken at now in a tick of dt seconds, into c,
// and adds this tick's share of its bytes per actuated device to devBytes
// and devRead (a workload read less often than every tick brings several
// ticks' bytes: a device's rate must not be made of them). havePressure
// says whether the workload's io.pressure was ever read.
func (s *Sensor) Take(c *Counters, now time.Time, dt float64, st cgroupfs.IOStat, devBytes, devRead []uint64, havePressure bool) Reading {
	span := dt
	if !c.lastRead.IsZero() {
		if x := now.Sub(c.lastRead).Seconds(); x > span {
			span = x
		}
	}
	c.lastRead = now
	var dr, dw uint64
	clear(c.Active)
	s.deltas = s.deltas[:0]
	for _, cur := range st.Devices {
		prev := cgroupfs.DeviceIn(c.last, cur.Dev)
		if !c.seen && !c.charge {
			continue // baseline only: history before we saw it is not charged
		}
		r, w := sub(cur.RBytes, prev.RBytes), sub(cur.WBytes, prev.WBytes)
		c.RIOs += sub(cur.RIOs, prev.RIOs)
		c.WIOs += sub(cur.WIOs, prev.WIOs)
		dr += r
		dw += w
		if len(s.Stacked) > 0 && r+w > 0 {
			s.deltas = append(s.deltas, devDelta{cur.Dev, r, w, sub(cur.RIOs, prev.RIOs), sub(cur.WIOs, prev.WIOs)})
		}
		for i, dv := range s.Devices {
			if dv == cur.Dev && r+w > 0 {
				c.Active[i] = true
				devBytes[i] += uint64(float64(r+w) * dt / span)
				devRead[i] += uint64(float64(r) * dt / span)
			}
		}
	}
	// I/O of a stacked device that its lower disks show again counts once.
	ov := stackedOverlap(s.Stacked, s.deltas)
	dr, dw, c.RIOs, c.WIOs = dr-ov.r, dw-ov.w, c.RIOs-ov.rIOs, c.WIOs-ov.wIOs
	c.last = append(c.last[:0], st.Devices...)
	first := !c.seen
	c.seen = true
	c.RBytes += dr
	c.WBytes += dw
	c.RBps, c.WBps = float64(dr)/span, float64(dw)/span
	rd := Reading{Delta: dr + dw}
	c.reads++
	if rd.Delta > 0 || !havePressure || c.reads >= PressureEvery {
		c.reads = 0
		rd.PressureDue = true
	}
	// Back off while nothing moves; back to every tick on a change.
	if rd.Delta > 0 || first {
		c.period = 1
		rd.Busy = true
	} else if c.period < s.MaxPeriod {
		c.period *= 2
		rd.BackedOff = true
	}
	return rd
}

// sub is cur-prev, or cur when the counter went backwards (it was reset).
func sub(cur, prev uint64) uint64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

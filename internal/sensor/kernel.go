package sensor

import (
	"math/bits"
	"slices"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// KernelIO is what the kernel's per-request maps (the eBPF latency
// sensor, internal/iolat) saw a workload's cgroups complete on one device
// since the previous tick: its own cgroup's requests and those of the
// cgroups below it, as its counter files add them up.
type KernelIO struct {
	Dev                        cgroupfs.Dev
	RBytes, WBytes, RIOs, WIOs uint64
}

// ReconcileEvery: a workload whose readings are taken from the kernel's
// maps (TakeKernel) has its counter files read at every ReconcileEvery-th
// tick all the same (spread over the ticks by its slot), and at every tick
// the maps cannot vouch for (FromKernel). The files stay the truth: what
// the maps charged ahead of them is subtracted from what they show, device
// by device (see Take), so that at each file reading a workload's charge
// is at least what its files counted, whatever the maps missed (a request
// the kernel ran no program for, a key deleted meanwhile).
//
// It may be more, by a bounded amount that does not grow: the files count
// a request when it is submitted (v1: when it enters blk-throttle, before
// a cap holds it; v2: when it leaves it), the maps when it completes. A
// request in flight (or held by a cap) at a file reading is in that
// reading, and the maps charge it again when it completes; what they
// charged beyond the files stays ahead, and is taken off the next file
// readings' as the files get ahead again. The same holds for a request
// that completed between the tick's read of the maps (at the tick's start)
// and the file reading (later in the same tick): the file reading counts
// it, and the maps charge it at the next tick. So the charge exceeds the
// files by at most the requests of one file reading that the maps had not
// seen complete at the tick's start: those in flight or held at it (one
// 4 KiB request for a reader at queue depth 1; for a stream of 1 MiB
// requests held at queue depth 32 by a cap, up to 32 MiB), and those that
// completed in the tick before it (measured in the v2 test VM: a tick of
// 8-18 ms, two 4 KiB requests of a reader at 250/s), once; never by lost
// or double-counted requests piling up.
//
// Each workload's file tick is at a phase hashed from its slot, so that
// busy workloads whose slots follow a pattern (every 10th one: slots
// 0, 10, 20, ... all even) still spread over all ReconcileEvery ticks. A
// quiet workload (polled less often than every tick) is read from its
// files at each of its readings anyway (FromKernel). At 10,000 workloads,
// 1,000 of them busy, this is 125 file readings a tick for the busy ones
// instead of 1,000.
const ReconcileEvery = 8

// FromKernel reports whether c's reading at tick may be taken from the
// kernel's maps (TakeKernel) rather than its files, given that the maps'
// record of this tick is complete (every request they counted is placed,
// none uncounted): c is busy (its last reading moved: a workload that
// wakes from a quiet spell has its files read, so its first charge is
// exact), it has a file reading to reconcile against whose I/O counts are
// as fresh as its bytes, and tick is not its file tick.
func (s *Sensor) FromKernel(c *Counters, tick uint64) bool {
	return c.seen && c.period == 1 && c.ioLag == 0 && (uint32(tick)+reconcilePhase(c.slot))%ReconcileEvery != 0
}

// reconcilePhase is slot's phase among the ReconcileEvery ticks: the top
// bits of a Fibonacci hash (ReconcileEvery is a power of two).
func reconcilePhase(slot uint32) uint32 {
	return (slot * 0x9e3779b9) >> (32 - bits.TrailingZeros32(ReconcileEvery))
}

// TakeKernel folds into c, at now in a tick of dt seconds, what the
// kernel's maps saw its cgroups complete since the previous tick (kio; nil
// or empty: nothing), as Take does a file reading: the bytes and I/Os are
// charged at once (I/O of stacked devices once), and recorded as charged
// ahead of the files until the next file reading (Take). A lower disk of
// a stacked device is not taken: its requests complete before the stacked
// device's, and a tick's boundary between the two would show the lower's
// as I/O of their own (measured: 8 KiB too many in 4 MiB, never given
// back); I/O straight to it is charged at the next file reading, which
// tells the two apart over a span with no such boundary inside. Only
// devices the files have shown for c are taken: the files' view of where c does I/O
// stays the one the charge follows (on v1, a device whose throttle was
// never configured counts nothing in the files), and I/O on a device that
// is new to c waits for its next file reading.
//
// The polling period follows the charge as in Take. No io.pressure is due
// (nothing was read from c's cgroup); the next file reading reads it when
// the maps saw c move meanwhile.
func (s *Sensor) TakeKernel(c *Counters, now time.Time, dt float64, kio []KernelIO) Reading {
	span := dt
	if !c.lastRead.IsZero() {
		if x := now.Sub(c.lastRead).Seconds(); x > span {
			span = x
		}
	}
	c.lastRead = now
	clear(c.Active)
	s.deltas = s.deltas[:0]
	for _, k := range kio {
		if k.RBytes+k.WBytes+k.RIOs+k.WIOs == 0 || !hasDev(c.last, k.Dev) || s.lower(k.Dev) {
			continue
		}
		s.deltas = append(s.deltas, devDelta{k.Dev, k.RBytes, k.WBytes, k.RIOs, k.WIOs})
	}
	stackedOverlap(s.Stacked, s.deltas)
	var dr, dw uint64
	for _, d := range s.deltas {
		if d.r+d.w+d.rIOs+d.wIOs == 0 {
			continue
		}
		c.ahead = addAhead(c.ahead, d)
		dr += d.r
		dw += d.w
		c.RIOs += d.rIOs
		c.WIOs += d.wIOs
		// The maps' bytes are this tick's (they are read every tick):
		// the device's share needs no spreading over a longer span.
		for i, dv := range s.Devices {
			if dv == d.dev && d.r+d.w > 0 {
				c.Active[i] = true
				s.dev[i].Bytes += d.r + d.w
				s.dev[i].Read += d.r
			}
		}
	}
	c.kernTakes++
	c.sinceFile++
	c.RBytes += dr
	c.WBytes += dw
	c.RBps, c.WBps = float64(dr)/span, float64(dw)/span
	rd := Reading{Delta: dr + dw}
	if rd.Delta > 0 {
		c.kernMoved = true
	}
	s.backOff(c, &rd, rd.Delta > 0)
	return rd
}

// KernelTakes is how many of c's readings were taken from the kernel's
// maps since it was made.
func (c *Counters) KernelTakes() uint64 { return c.kernTakes }

// lower reports whether dev is a lower disk of a stacked device.
func (s *Sensor) lower(dev cgroupfs.Dev) bool {
	for _, ls := range s.Stacked {
		if slices.Contains(ls, dev) {
			return true
		}
	}
	return false
}

// hasDev reports whether the reading devs lists dev.
func hasDev(devs []cgroupfs.DeviceIO, dev cgroupfs.Dev) bool {
	for i := range devs {
		if devs[i].Dev == dev {
			return true
		}
	}
	return false
}

// addAhead adds d to the device's entry of ahead.
func addAhead(ahead []devDelta, d devDelta) []devDelta {
	for i := range ahead {
		if ahead[i].dev == d.dev {
			ahead[i].r += d.r
			ahead[i].w += d.w
			ahead[i].rIOs += d.rIOs
			ahead[i].wIOs += d.wIOs
			return ahead
		}
	}
	return append(ahead, d)
}

// reconcile removes from d, one device's delta of a file reading (stacked
// overlap already removed), what the kernel's maps charged ahead of it on
// that device; what they charged beyond it stays ahead, for the next file
// reading. It returns what it removed.
func reconcile(ahead []devDelta, d *devDelta) (o overlap) {
	for j := range ahead {
		a := &ahead[j]
		if a.dev != d.dev {
			continue
		}
		o.r, o.w, o.rIOs, o.wIOs = min(a.r, d.r), min(a.w, d.w), min(a.rIOs, d.rIOs), min(a.wIOs, d.wIOs)
		a.r, a.w, a.rIOs, a.wIOs = a.r-o.r, a.w-o.w, a.rIOs-o.rIOs, a.wIOs-o.wIOs
		d.r, d.w, d.rIOs, d.wIOs = d.r-o.r, d.w-o.w, d.rIOs-o.rIOs, d.wIOs-o.wIOs
		return o
	}
	return o
}

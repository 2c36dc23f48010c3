package throttle

import (
	"math"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Who makes others wait. A demoted workload is capped only while it is
// heavy — it takes a large share of the device — and a better level is
// active; a light one is never capped to protect another, whatever its
// level (a 400 KB/s level-2 service was capped to protect level-1 health
// checks before this rule).
//
// A workload is heavy while any of these holds (heavy):
//
//   - share: its bytes/s, smoothed over shareWindow, reach Light of the
//     device's capacity (default 5 %). 5 % is the share a capped workload
//     gets by default (MaxBurst / slice = 5 ms / 100 ms), so a workload
//     left uncapped never moves more than a capped one may, and one moving
//     less than that keeps the device busy less than what the caps are
//     built to let through beside a victim.
//   - depth: its requests in flight, smoothed likewise, reach deepInFlight:
//     a queue of its own that another's request lands behind (a 4 KiB
//     flood at QD32 moves few bytes but holds the queue). v1 has no
//     per-cgroup in-flight count: unless Config.InFlight measures it
//     (the kernel's per-request hooks), it is estimated as the device's
//     mean requests in flight (class/block/<dev>/stat's time_in_queue over
//     the period) times the workload's part of the device's bytes — its
//     part of the queue weighted by size, so a 4 KiB reader that waits
//     behind a 1 MiB stream is not counted as holding the stream's queue.
//   - held: its cap holds it back (it ran at heldFrac of what the cap
//     allowed, in bytes or requests): a capped workload's own rate is the
//     cap's doing, and judging it light on it would lift the cap, let the
//     burst through and cap it again.
//   - lately: it was heavy within Hold. A stream pausing between files
//     stays capped while idle (a cap costs an idle workload nothing) instead
//     of coming back uncapped with a whole queue at once.
//
// Requests per second are not compared with the device's IOPS capacity:
// that capacity is the most requests the device was seen to complete, and
// seen with 1 MiB requests it is ~100 on a 100 MiB/s volume, which would
// make a 4 KiB reader at 100/s "take the whole device".

// The load rule's constants.
const (
	// DefaultLight: see Config.Light.
	DefaultLight = 0.05
	// shareWindow is the time constant over which a workload's share and
	// depth are smoothed: one blk-throttle slice, so a burst within a slice
	// counts whole, and one 1 MiB read of a health check (0.6 % of a
	// 1.7 GB/s device over the window) does not make it heavy.
	shareWindow = 100 * time.Millisecond
	// deepInFlight is the depth (requests in flight, smoothed) at which a
	// workload is heavy whatever its bytes: more than a synchronous client
	// with readahead keeps queued.
	deepInFlight = 4
)

// InFlight gives a cgroup's requests in flight on a device, for the
// throttle's load rule; a sensor of the kernel's per-request hooks (eBPF)
// implements it. Without one the throttle estimates it from the device's
// counters.
type InFlight interface {
	// InFlight returns the cgroup's mean requests in flight on dev since
	// the previous call for it — issued to the device and not completed,
	// not those blk-throttle holds back; ok false when not known (the
	// estimate is used then).
	InFlight(cgroup string, dev cgroupfs.Dev) (requests float64, ok bool)
}

// load is one workload's recent use of the device, smoothed over
// shareWindow: bytes/s and requests in flight.
type load struct {
	at    time.Time
	rate  float64 // bytes/s
	depth float64 // requests in flight
}

// add folds in the period since the last add, ending at now, in which the
// workload moved bytes and had depth requests in flight (depth < 0: not
// known this period, the last value decays). The first add only starts
// the clock.
func (l *load) add(now time.Time, bytes, depth float64) {
	if l.at.IsZero() || !now.After(l.at) {
		l.at = now
		return
	}
	dt := now.Sub(l.at)
	l.at = now
	decay := math.Exp(-dt.Seconds() / shareWindow.Seconds())
	l.rate = l.rate*decay + bytes/dt.Seconds()*(1-decay)
	if depth >= 0 {
		l.depth = l.depth*decay + depth*(1-decay)
	} else {
		l.depth *= decay
	}
}

// devPeriod is what the device did over one period of the fast loop, from
// two readings of its counters.
type devPeriod struct {
	bytes float64
	depth float64 // mean requests in flight
	ok    bool
}

// periodOf is the device's period between readings prev and cur taken dt
// apart.
func periodOf(prev, cur cgroupfs.BlockStat, dt time.Duration) devPeriod {
	ms := float64(dt) / float64(time.Millisecond)
	if ms <= 0 {
		return devPeriod{}
	}
	return devPeriod{bytes: float64(sub(cur.Bytes(), prev.Bytes())),
		depth: float64(sub(cur.TimeInQueueMs, prev.TimeInQueueMs)) / ms, ok: true}
}

// estDepth is a workload's requests in flight estimated from the device's
// period d in which it moved bytes: the device's mean depth times its part
// of the device's bytes (-1: not known).
func (d devPeriod) estDepth(bytes float64) float64 {
	if !d.ok {
		return -1
	}
	if d.bytes <= 0 {
		return 0
	}
	return d.depth * min(1, bytes/d.bytes)
}

// heavy reports whether a workload takes a large share of the device (see
// the rule above): share of the capacity in bytes, depth in requests,
// held by its cap.
func (c capCalc) heavy(m capIn) bool {
	return m.held || m.lately || m.depth >= deepInFlight || (c.bps > 0 && m.rate >= c.light*c.bps)
}

// ranAtCap reports whether a workload moving rate bytes/s runs at its
// limits l (in bytes; requests are judged over capacityWindow by account).
func ranAtCap(rate float64, l cgroupfs.Limits) bool {
	return l.RBps > 0 && rate >= heldFrac*float64(l.RBps)
}

// bytesBound reports whether a workload moving rate bytes/s runs at its
// bytes cap in l for the re-arm's rule (bytesBoundFrac).
func bytesBound(rate float64, l cgroupfs.Limits) bool {
	return l.RBps > 0 && rate >= bytesBoundFrac*float64(l.RBps)
}

// observeLoad folds the period just read into each demoted workload's
// load: its bytes, and its requests in flight as Config.InFlight
// measures them or as estimated from the device's period.
func (t *Throttle) observeLoad(now time.Time) {
	for _, m := range t.watch {
		if !t.Wants(m.level) {
			continue
		}
		if !m.dOK {
			// No difference of two reads (the cgroup just opened: newly
			// demoted, or back from a boost): the last estimate stands,
			// neither decayed over the time it was not read nor diluted.
			m.load.at = now
			continue
		}
		depth := t.devPer.estDepth(m.dBytes)
		if t.cfg.InFlight != nil {
			if n, ok := t.cfg.InFlight.InFlight(m.cgroup, t.dev); ok {
				depth = n
			}
		}
		m.load.add(now, m.dBytes, depth)
	}
}

package throttle

import (
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
)

// The throttle's arithmetic, pure: the device's capacity estimate from its
// counters, the caps that follow from it, and whether a capped workload was
// held back by its cap. throttle.go is the loop that reads the counters and
// writes the caps.

// The arithmetic's constants.
const (
	// throttleMinIOPS is the lowest IOPS cap set on a workload.
	throttleMinIOPS = 50
	// throttleSlice is blk-throttle's slice: HZ/10 on every device on
	// 6.18.2+ and 6.19 ("block/blk-throttle: Fix throttle slice time for
	// SSDs", DFL_THROTL_SLICE) and on 6.1 without
	// CONFIG_BLK_DEV_THROTTLING_LOW. Only 6.10–6.18.1 used HZ/50 on a
	// device that was non-rotational at its first limit: assuming the
	// longer slice there makes a cap smaller than MaxBurst allows, never a
	// burst longer (and re-arming shrinks the burst on every kernel).
	// The 20 ms once assumed for non-rotational devices made a 25 % cap a
	// 25 ms burst on the host's 6.18.
	throttleSlice = 100 * time.Millisecond
	// capacityWindow is the span over which the device's rate is measured.
	capacityWindow = 200 * time.Millisecond
	// capBusyMinMs: a window busy at least this long also measures the
	// device's rate while busy (capacity.observe).
	capBusyMinMs = 20
	// The least a Ceiling gives one workload (the kernel takes no IOPS
	// limit below 2).
	ceilingMinIOPS = 2
	ceilingMinBps  = 4096
)

// capacity is the device's capacity estimate: its own counters' highest
// rate over windows of capacityWindow, lowered when the device stays busy
// yet delivers less, each request longer in flight (a cloud volume out of
// burst credits), while none of the throttle's own caps were in force;
// never an all-time peak. The zero capacity has measured nothing.
type capacity struct {
	win       cgroupfs.BlockStat
	winAt     time.Time
	bps, iops float64
	lat       float64 // ms a request spent in flight when the capacity was last raised
}

// observe folds in a reading s of the device's counters taken at now;
// cappedAt is the last period that found a cap of the throttle in force.
// It reports whether a window closed (the estimate may have moved).
func (c *capacity) observe(s cgroupfs.BlockStat, now, cappedAt time.Time) bool {
	if c.winAt.IsZero() || now.Before(c.winAt) {
		c.win, c.winAt = s, now
		return false
	}
	dt := now.Sub(c.winAt)
	if dt < capacityWindow {
		return false
	}
	secs := dt.Seconds()
	ios := sub(s.IOs(), c.win.IOs())
	rate := float64(sub(s.Bytes(), c.win.Bytes())) / secs
	iops := float64(ios) / secs
	// The device's window as the busy/slowed judgement sees it (its
	// length in whole ms, as the throttle always took it).
	per := devsensor.Period{Secs: float64(dt.Milliseconds()) / 1000, IOs: ios,
		BusyMs: sub(s.IOTicksMs, c.win.IOTicksMs), QueueMs: sub(s.TimeInQueueMs, c.win.TimeInQueueMs)}
	lat := per.LatencyMs()
	uncapped := cappedAt.Before(c.winAt)
	c.win, c.winAt = s, now
	// What the device moves while busy (its rate over the time it had
	// I/O in flight) is a lower bound of its capacity too: a paced
	// neighbour's rate is its own pace, not the device's. On the host's
	// stacked loop device a 50 MB/s backup alone set the capacity at
	// ~70 MB/s, so it counted as 70-86 % of the device, its cap at the
	// controller's most share (60 %) held it back for good, and
	// TestRealV1NoHarm kept 70-89 % of its rate where no victim needed
	// a cap. Busy at least capBusyMinMs of the window (io_ticks moves by
	// jiffies: a few ms are no measure), and only with none of our caps
	// in force: a capped stream's few requests find a burst-credit
	// device's bucket full and are served at its burst speed (the VM's
	// qemu-throttled disk: a capacity from them set a 60 % share above
	// the disk's 100 MiB/s, and TestRealV2LatencyEffect's victim waited
	// 160-190 ms a read).
	if per.BusyMs >= capBusyMinMs && uncapped {
		busy := float64(per.BusyMs) / 1000
		rate = max(rate, rate*secs/busy)
		iops = max(iops, float64(ios)/busy)
	}
	switch {
	case rate > c.bps || iops > c.iops:
		c.bps = max(c.bps, rate)
		c.iops = max(c.iops, iops)
		c.lat = lat
	case rate > 0 && uncapped && per.Slowed(c.lat):
		// Busy all the time yet below its best in both bytes and
		// requests, each request in flight longer than at its best (the
		// one busy/slowed judgement, devsensor's, as devhealth's), with
		// nobody held back by a cap of ours over the window (a capped
		// stream beside a reader that keeps the device busy delivers less
		// by our doing; following that would shrink the caps period after
		// period): the device has slowed down. Follow it.
		c.bps = 0.8*c.bps + 0.2*rate
		c.iops = 0.8*c.iops + 0.2*iops
	}
	return true
}

// sub is cur - prev for a counter, cur itself when it went backwards (the
// device was attached again).
func sub(cur, prev uint64) uint64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// capIn is one watched workload as the cap arithmetic sees it.
type capIn struct {
	level  int
	active bool // did I/O on the device within Hold
	// Its load (load.go): bytes/s and requests in flight, smoothed
	// over shareWindow; held: its cap in force holds it back; lately: it
	// was heavy within Hold.
	rate, depth  float64
	held, lately bool
}

// capCalc is what the caps of one period depend on besides the workloads.
type capCalc struct {
	cfg   Config
	slice time.Duration // blk-throttle's slice on the device
	top   int           // the best level active within Hold (0: none)
	ceil  Ceiling
	bps   float64 // the device's capacity
	iops  float64
	light float64 // Config.Light: the share below which a workload is light
	// share is the latency controller's share for the capped levels
	// together (Steer); 0: each level's share bounded by MaxBurst/slice;
	// 1 or more: lifted, no level caps at all (the controller's work
	// conservation: nobody waits), the Ceiling still bounds.
	share float64
}

// lifted reports whether the steered share lifts the level caps.
func (c capCalc) lifted() bool { return c.share >= 1 }

// levelCapped reports whether the level rule caps m (before any lift): a
// heavy workload of a managed level worse than top, on a device whose
// capacity is measured.
func (c capCalc) levelCapped(m capIn) bool {
	return c.wants(m.level) && c.top != 0 && m.level > c.top && c.bps > 0 && c.heavy(m)
}

// wants reports whether the throttle manages level (Shares below 1).
func (c capCalc) wants(level int) bool {
	return level >= 2 && level <= levels && c.cfg.Shares[level-1] < 1
}

// caps returns each workload's limits (in ms's order, appended to out): a
// heavy workload (see heavy) of a managed level worse than top gets its
// level's share of the capacity, split evenly among its level's active
// heavy workloads, several capped levels' shares scaled so their sum is
// the largest of them, each share at most MaxBurst/slice — or, steered by
// the latency controller (share > 0), their sum the share instead;
// never below Min bytes/s and throttleMinIOPS; lifted (share 1), none. A light workload is not
// capped, whatever its level. The Ceiling bounds the held levels' workloads further, a
// better level active or not, heavy or not. The zero Limits is uncapped.
func (c capCalc) caps(ms []capIn, out []cgroupfs.Limits) []cgroupfs.Limits {
	active, heavy, sum, top := c.levelShares(ms)
	// The capped levels' shares, their sum scaled to the largest.
	var scale [levels]float64
	for l := 2; l <= levels; l++ {
		scale[l-1] = c.cfg.Shares[l-1]
		if sum > top && top > 0 {
			scale[l-1] *= top / sum
		}
		if c.share > 0 && c.share < 1 && top > 0 {
			// Steered: the levels' sum (top) scaled to the share, down or
			// up (the work-conserving controller's slow start goes past
			// the levels' own shares before it lifts).
			scale[l-1] *= c.share / top
		}
	}
	held := 0 // the held levels' active workloads, who share the ceiling
	for l := 2; l <= levels; l++ {
		if c.ceil.holds(l) {
			held += active[l-1]
		}
	}
	for _, m := range ms {
		want := cgroupfs.Limits{}
		if !c.lifted() && c.levelCapped(m) {
			n := float64(max(heavy[m.level-1], 1))
			share := scale[m.level-1]
			if c.cfg.MaxBurst > 0 && c.share == 0 {
				share = min(share, c.cfg.MaxBurst.Seconds()/c.slice.Seconds())
			}
			b := uint64(share * c.bps / n)
			b = max(b, c.cfg.Min)
			want = cgroupfs.Limits{RBps: b, WBps: b}
			if c.iops > 0 {
				io := max(uint64(share*c.iops/n), throttleMinIOPS)
				want.RIOps, want.WIOps = io, io
			}
		}
		if c.wants(m.level) && c.ceil.holds(m.level) {
			want = c.ceil.bound(want, max(held, 1))
		}
		out = append(out, want)
	}
	return out
}

// levelShares counts the active and the heavy workloads of each managed
// level, and sums the shares of the levels to cap (heavy, worse than top):
// their sum and the largest, which is what they get together unsteered.
func (c capCalc) levelShares(ms []capIn) (active, heavy [levels]int, sum, top float64) {
	for _, m := range ms {
		if c.wants(m.level) && m.active {
			active[m.level-1]++
			if c.heavy(m) {
				heavy[m.level-1]++
			}
		}
	}
	for l := 2; l <= levels; l++ {
		if c.top != 0 && l > c.top && heavy[l-1] > 0 {
			sum += c.cfg.Shares[l-1]
			top = max(top, c.cfg.Shares[l-1])
		}
	}
	return active, heavy, sum, top
}

// heldFrac: a capped workload that moved at least this share of what its
// cap allowed over a window ran at its cap (blk-throttle lets a backlogged
// group through at its limit, give or take a slice). It is below the 0.8
// it once was because a re-armed cap does not deliver its whole rate: a
// write drops the fraction of a request the time since the last one
// allowed (see rearmDue, about a sixth of the cap on average). Measured in
// the host scenario (loop device, 6.18): a QD32 streamer under re-armed
// caps of 101 MB/s and 160 IOPS moved 77-83 MB/s and 121-125 IOPS, 0.76-
// 0.78 of both, second after second; judged against 0.8 it was never
// held, so the latency controller (which raises only a share that holds
// someone back) froze its share while the victims were well inside their
// target. 0.7 keeps a margin under that loss.
const heldFrac = 0.7

// bytesBoundFrac: a workload moving at least this share of its bytes cap
// runs at it for the re-arm's rule (rearmDue's bytesBound): re-armed every
// period where the kernel forgives request debt. Kept at the value the
// re-arm was measured with; heldFrac, the judgement of who is held back,
// is lower.
const bytesBoundFrac = 0.8

// heldBack reports whether a capped workload that moved bytes and ios
// over a window was held back by caps that allowed allowBytes and
// allowIOs over it (0: that unit uncapped). ios < 0: not known.
func heldBack(bytes, ios, allowBytes, allowIOs float64) bool {
	return (allowBytes > 0 && bytes >= heldFrac*allowBytes) || (allowIOs > 0 && ios >= 0 && ios >= heldFrac*allowIOs)
}

// Ceiling bounds the caps of the workloads at level From and worse on one
// device, whether or not a better level is active: together, the ones that
// did I/O within Hold get at most Bps bytes/s and IOPS requests/s, split
// evenly (a bound of 0 leaves that unit alone). It holds a volume's bulk
// work to its baseline while its burst credit runs low. Only levels the
// throttle manages (Shares below 1) are held. The zero Ceiling bounds
// nothing.
type Ceiling struct {
	From      int
	Bps, IOPS float64
}

// holds reports whether c bounds a workload at level.
func (c Ceiling) holds(level int) bool { return c.From >= 2 && level >= c.From }

// bound lowers l to c's share for one of n held workloads.
func (c Ceiling) bound(l cgroupfs.Limits, n int) cgroupfs.Limits {
	lower := func(have, bound uint64) uint64 {
		if have == 0 || bound < have {
			return bound
		}
		return have
	}
	if c.Bps > 0 {
		b := max(uint64(c.Bps/float64(n)), ceilingMinBps)
		l.RBps, l.WBps = lower(l.RBps, b), lower(l.WBps, b)
	}
	if c.IOPS > 0 {
		io := max(uint64(c.IOPS/float64(n)), ceilingMinIOPS)
		l.RIOps, l.WIOps = lower(l.RIOps, io), lower(l.WIOps, io)
	}
	return l
}

package throttle

import (
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// fakeThrottleTree is a v1 blkio tree in a temporary directory: a parent
// "/p" with the given children, and a sysfs with loop0's stat file. The
// test moves the counters by hand and steps the fast loop with its own
// clock.
type fakeThrottleTree struct {
	t     *testing.T
	h     cgroupfs.Hierarchy
	sys   string
	bytes map[string]uint64 // per cgroup, including "/p"
	stat  cgroupfs.BlockStat
	bios  *fakeBios // counts each read where the kernel's bio counters would; nil: none
}

var fakeDev = cgroupfs.Dev{Major: 7, Minor: 0}

func newFakeThrottleTree(t *testing.T, children ...string) *fakeThrottleTree {
	root, sys := testkit.FakeV1Throttle(t, children...)
	f := &fakeThrottleTree{t: t, h: cgroupfs.Hierarchy{Version: 1, Mount: root}, sys: sys, bytes: map[string]uint64{}}
	for _, cg := range append([]string{"/p"}, children...) {
		f.bytes[cg] = 0
	}
	f.flush()
	return f
}

// read adds n bytes read by cgroup cg (and so by its parent /p).
func (f *fakeThrottleTree) read(cg string, n uint64) {
	f.bytes[cg] += n
	f.bytes["/p"] += n
	if f.bios != nil {
		f.bios.add(cg, n)
	}
}

// device advances loop0's own counters by bytes and ios over busyMs, one
// request in flight while busy.
func (f *fakeThrottleTree) device(bytes, ios, busyMs uint64) { f.deviceQD(bytes, ios, busyMs, 1) }

// deviceQD is device with depth requests in flight while busy.
func (f *fakeThrottleTree) deviceQD(bytes, ios, busyMs, depth uint64) {
	f.stat.ReadSectors += bytes / 512
	f.stat.ReadIOs += ios
	f.stat.IOTicksMs += busyMs
	f.stat.TimeInQueueMs += busyMs * depth
}

func (f *fakeThrottleTree) flush() {
	for cg, b := range f.bytes {
		body := fmt.Sprintf("7:0 Read %d\n7:0 Write 0\n7:0 Sync %d\n7:0 Async 0\n7:0 Total %d\nTotal %d\n", b, b, b, b)
		if err := os.WriteFile(filepath.Join(f.h.Mount, cg, "blkio.throttle.io_service_bytes_recursive"), []byte(body), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	s := f.stat
	line := fmt.Sprintf("%d 0 %d 0 %d 0 %d 0 %d %d %d 0 0 0 0 0 0\n", s.ReadIOs, s.ReadSectors, s.WriteIOs, s.WriteSectors, s.InFlight, s.IOTicksMs, s.TimeInQueueMs)
	if err := os.WriteFile(filepath.Join(f.sys, "class", "block", "loop0", "stat"), []byte(line), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeThrottleTree) limits(cg string) cgroupfs.Limits {
	l, err := f.h.ReadLimits(cg, fakeDev)
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

// TestThrottleFastLoopRules drives the throttle's fast loop step by step on
// a fake tree: who is capped, by how much, when caps come off, and how the
// capacity follows the device.
// The same rules hold whether a period reads the counter files or the
// kernel's bio counters (bios.go).
func TestThrottleFastLoopRules(t *testing.T) {
	t.Parallel()
	for _, bios := range []bool{false, true} {
		t.Run(fmt.Sprintf("bios=%v", bios), func(t *testing.T) {
			t.Parallel()
			testThrottleFastLoopRules(t, bios)
		})
	}
}

func testThrottleFastLoopRules(t *testing.T, bios bool) {
	f := newFakeThrottleTree(t, "/p/hi", "/p/l2", "/p/l4")
	th := New(Config{Shares: [4]float64{1, 0.6, 0.45, 0.3}, Min: 1 << 20},
		Options{Hierarchy: f.h, Name: "loop0", Dev: fakeDev, SysRoot: f.sys})
	defer th.Stop()
	if bios {
		f.bios = newFakeBios(f)
		th.SetBios(f.bios)
	}
	now := time.Unix(1000, 0)
	th.now = func() time.Time { return now }
	step := func(d time.Duration) {
		now = now.Add(d)
		f.flush()
		th.step()
	}
	th.mu.Lock() // Update would start the goroutine: set members by hand
	for cg, l := range map[string]int{"/p/hi": 1, "/p/l2": 2, "/p/l4": 4} {
		th.members[cg] = &tmember{cgroup: cg, level: l, durable: true}
	}
	th.demoted, th.setNew = 2, true
	th.mu.Unlock()

	// The device runs 1000 MiB/s, 1000 IOPS for the level-4 stream alone:
	// capacity learnt, nobody capped.
	for range 5 {
		f.read("/p/l4", 40<<20)
		f.device(200<<20, 200, 200)
		step(200 * time.Millisecond)
	}
	if l := f.limits("/p/l4"); !l.IsZero() {
		t.Fatalf("l4 capped %+v with nobody better doing I/O", l)
	}
	if math.Abs(th.cap.bps-1000*(1<<20)) > 1<<20 || math.Abs(th.cap.iops-1000) > 1 {
		t.Fatalf("capacity %.0f B/s %.0f IOPS, want 1000 MiB/s and 1000 IOPS", th.cap.bps, th.cap.iops)
	}

	// A level-1 read: l4 (the only active demoted level, streaming at 20 %
	// of the device) gets 30 % of the device, in bytes and IOPS; l2 is
	// idle, so light: not capped.
	f.read("/p/hi", 4096)
	f.read("/p/l4", 1<<20)
	step(10 * time.Millisecond)
	if th.top != 1 {
		t.Fatalf("top %d after a level-1 read, want 1", th.top)
	}
	want4 := uint64(0.3 * th.cap.bps)
	if l := f.limits("/p/l4"); l.RBps != want4 || l.RIOps != 300 {
		t.Fatalf("l4 limits %+v, want rbps %d riops 300", l, want4)
	}
	if l := f.limits("/p/l2"); !l.IsZero() {
		t.Fatalf("idle l2 capped %+v", l)
	}

	// l2 streams too (500 MiB/s): the two capped levels' shares (0.6 +
	// 0.3) are scaled to sum to 0.6.
	f.read("/p/l2", 5<<20)
	f.read("/p/hi", 4096)
	step(10 * time.Millisecond)
	f.read("/p/l2", 5<<20)
	f.read("/p/hi", 4096)
	step(10 * time.Millisecond)
	l2, l4 := f.limits("/p/l2").RBps, f.limits("/p/l4").RBps
	if sum := float64(l2+l4) / th.cap.bps; math.Abs(sum-0.6) > 0.01 || l2 <= l4 {
		t.Fatalf("l2 %d + l4 %d = %.2f of capacity, want 0.6 with l2 > l4", l2, l4, sum)
	}

	// The level-1 reader stops: l2 is now the best active level, so l4
	// stays capped (below l2) while l2 itself is uncapped; once l2 stops as
	// well, within the hold, everybody is uncapped.
	for range 30 {
		f.read("/p/l2", 1<<20)
		f.read("/p/l4", 1<<20)
		step(10 * time.Millisecond)
	}
	if th.top != 2 || !f.limits("/p/l2").IsZero() || f.limits("/p/l4").IsZero() {
		t.Fatalf("top %d, l2 %+v, l4 %+v: want l2 uncapped and l4 capped below it", th.top, f.limits("/p/l2"), f.limits("/p/l4"))
	}
	for range 30 {
		f.read("/p/l4", 1<<20)
		step(10 * time.Millisecond)
	}
	if th.top != 4 || !f.limits("/p/l4").IsZero() {
		t.Fatalf("top %d, l4 %+v: want nobody capped with l4 alone", th.top, f.limits("/p/l4"))
	}
	if bios && (th.bio == nil || len(th.parents) != 1 || !th.parents[0].bioW || f.bios.watched() != 3) {
		t.Fatalf("bio counters: in use %v, %d keys watched; want the parent and both demoted", th.bio != nil, f.bios.watched())
	}

	// The device slows to half (a volume out of burst credits) while
	// busy all the time: the capacity follows it down instead of keeping
	// the old peak.
	for range 20 {
		f.device(100<<20, 100, 200)
		step(200 * time.Millisecond)
	}
	if th.cap.bps > 520*(1<<20) || th.cap.bps < 500*(1<<20) {
		t.Fatalf("capacity %.0f MiB/s after the device slowed to 500, want it near 500", th.cap.bps/(1<<20))
	}
	// Idle (not busy): the capacity stays.
	c := th.cap.bps
	for range 5 {
		f.device(1<<20, 1, 5)
		step(200 * time.Millisecond)
	}
	if th.cap.bps != c {
		t.Fatalf("capacity moved from %.0f to %.0f on an idle device", c, th.cap.bps)
	}
}

// TestThrottleReadBudget: with many demoted workloads the fast loop's
// period grows so its reads per second stay bounded; a period reads each
// demoted workload once and the parent twice. A parent read that took
// longer than readCost counts by its time, within one read per member.
func TestThrottleReadBudget(t *testing.T) {
	t.Parallel()
	var names []string
	for i := range 200 {
		names = append(names, fmt.Sprintf("/p/w%03d", i))
	}
	f := newFakeThrottleTree(t, names...)
	th := New(Config{}, Options{Hierarchy: f.h, Name: "loop0", Dev: fakeDev, SysRoot: f.sys})
	defer th.Stop()
	th.mu.Lock()
	for _, cg := range names {
		th.members[cg] = &tmember{cgroup: cg, level: 4, durable: true}
	}
	th.demoted, th.setNew = len(names), true
	th.mu.Unlock()
	period := th.step()
	reads := float64(len(names)+2) / period.Seconds()
	if period <= DefaultPeriod || reads > DefaultReads*1.01 {
		t.Fatalf("period %s for %d demoted workloads: %.0f reads/s, want %d (each demoted once, the parent twice)",
			period, len(names), reads, DefaultReads)
	}
	for _, tc := range []struct {
		reads int
		want  time.Duration
	}{
		{1, DefaultPeriod},
		{5, DefaultPeriod},
		{50, 100 * time.Millisecond},
		{1000, 2 * time.Second},
	} {
		if got := th.budgetPeriod(tc.reads); got != tc.want {
			t.Errorf("%d reads: period %s, want %s", tc.reads, got, tc.want)
		}
	}
	// A parent read counts by its time, within one read per member.
	for _, tc := range []struct {
		took time.Duration
		want int
	}{
		{time.Microsecond, 1},
		{30 * time.Microsecond, 3},
		{5 * time.Millisecond, len(names)}, // 500 reads' time, 200 members
	} {
		if got := th.parentReads(tc.took); got != tc.want {
			t.Errorf("a parent read of %s counts %d reads, want %d", tc.took, got, tc.want)
		}
	}
}

// TestThrottleBurstBound: while a better level is active, a cap is at most
// capacity × MaxBurst / slice, the slice being blk-throttle's: 100 ms on
// every device (6.18.2+, 6.19, 6.1 without THROTTLING_LOW), whether or not
// the device says it is rotational (20 ms was once assumed for
// non-rotational ones: a 25 % cap, a 25 ms burst on the host's kernel).
func TestThrottleBurstBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rotational string
		share      float64 // of capacity, for level 4 at share 0.3
	}{
		{"1", 0.005 / 0.1}, // 5 ms of a 100 ms slice
		{"0", 0.005 / 0.1},
		{"", 0.005 / 0.1},
	} {
		t.Run("rotational="+tc.rotational, func(t *testing.T) {
			f := newFakeThrottleTree(t, "/p/hi", "/p/l4")
			if tc.rotational != "" {
				q := filepath.Join(f.sys, "class", "block", "loop0", "queue")
				if err := os.MkdirAll(q, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(q, "rotational"), []byte(tc.rotational+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			th := New(Config{Shares: [4]float64{1, 0.6, 0.45, 0.3}, Min: 1 << 20, MaxBurst: 5 * time.Millisecond},
				Options{Hierarchy: f.h, Name: "loop0", Dev: fakeDev, SysRoot: f.sys})
			defer th.Stop()
			now := time.Unix(1000, 0)
			th.now = func() time.Time { return now }
			step := func(d time.Duration) {
				now = now.Add(d)
				f.flush()
				th.step()
			}
			th.mu.Lock()
			th.members["/p/hi"] = &tmember{cgroup: "/p/hi", level: 1, durable: true}
			th.members["/p/l4"] = &tmember{cgroup: "/p/l4", level: 4, durable: true}
			th.demoted, th.setNew = 1, true
			th.mu.Unlock()
			for range 5 {
				f.read("/p/l4", 40<<20)
				f.device(200<<20, 200, 200)
				step(200 * time.Millisecond)
			}
			f.read("/p/hi", 4096)
			step(10 * time.Millisecond)
			want := uint64(tc.share * th.cap.bps)
			near := func(a, b uint64) bool { return max(a, b)-min(a, b) <= 1 } // float rounding
			if l := f.limits("/p/l4"); !near(l.RBps, want) || !near(l.RIOps, uint64(tc.share*th.cap.iops)) {
				t.Fatalf("l4 limits %+v, want rbps %d (%.2f of %.0f B/s) and riops %d", l, want, tc.share, th.cap.bps, uint64(tc.share*th.cap.iops))
			}
		})
	}
}

// newStepper is a throttle on f's loop0 with members at the given levels,
// stepped by hand on its own clock.
func newStepper(t *testing.T, f *fakeThrottleTree, levels map[string]int) (*Throttle, func(time.Duration)) {
	t.Helper()
	th := New(Config{Shares: [4]float64{1, 0.6, 0.45, 0.3}, Min: 1 << 20},
		Options{Hierarchy: f.h, Name: "loop0", Dev: fakeDev, SysRoot: f.sys})
	t.Cleanup(th.Stop)
	now := time.Unix(1000, 0)
	th.now = func() time.Time { return now }
	th.mu.Lock() // Update would start the goroutine: set members by hand
	for cg, l := range levels {
		th.members[cg] = &tmember{cgroup: cg, level: l, durable: true}
		if th.Wants(l) {
			th.demoted++
		}
	}
	th.setNew = true
	th.mu.Unlock()
	return th, func(d time.Duration) {
		now = now.Add(d)
		f.flush()
		th.step()
	}
}

// TestThrottleCapacityIgnoresOwnCaps: a level-1 reader keeps the device
// busy while the level-4 stream is capped; the device then delivers what
// the caps let through, which says nothing about what it can do. The
// capacity stays at what it measured (it used to follow the capped rate
// down, period after period, shrinking the caps with it: 96.5 MiB/s
// estimated on a loop device doing 458).
func TestThrottleCapacityIgnoresOwnCaps(t *testing.T) {
	t.Parallel()
	f := newFakeThrottleTree(t, "/p/hi", "/p/l4")
	th, step := newStepper(t, f, map[string]int{"/p/hi": 1, "/p/l4": 4})
	for range 5 { // 1000 MiB/s, 1000 IOPS: the stream alone
		f.read("/p/l4", 40<<20)
		f.device(200<<20, 200, 200)
		step(200 * time.Millisecond)
	}
	c := th.cap.bps
	if math.Abs(c-1000*(1<<20)) > 1<<20 {
		t.Fatalf("capacity %.0f MiB/s, want 1000", c/(1<<20))
	}
	// 4 s of the reader (busy all the time) beside the capped stream: the
	// device delivers 30 % of its capacity plus the reader's 20 MiB/s.
	for range 400 {
		f.read("/p/hi", 4096)
		f.read("/p/l4", 3<<20)
		f.device(3<<20+200<<10, 4, 10)
		step(10 * time.Millisecond)
	}
	if l := f.limits("/p/l4"); l.RBps == 0 {
		t.Fatal("the stream was not capped beside the reader")
	}
	if th.cap.bps != c {
		t.Fatalf("capacity moved from %.0f to %.0f MiB/s while the device delivered what our caps let through",
			c/(1<<20), th.cap.bps/(1<<20))
	}
	// The reader stops; the caps come off within the hold, and from then
	// on a busy device that delivers less has slowed: followed.
	for range 40 {
		f.read("/p/l4", 1<<20)
		f.device(1<<20, 1, 10)
		step(10 * time.Millisecond)
	}
	if !f.limits("/p/l4").IsZero() {
		t.Fatalf("stream still capped %+v after the reader stopped", f.limits("/p/l4"))
	}
	for range 20 {
		f.device(100<<20, 100, 200)
		step(200 * time.Millisecond)
	}
	if th.cap.bps > 520*(1<<20) || th.cap.bps < 500*(1<<20) {
		t.Fatalf("capacity %.0f MiB/s after the uncapped device slowed to 500, want it near 500", th.cap.bps/(1<<20))
	}
}

// TestThrottleCeiling: a Ceiling holds the levels from From down to its
// bytes/s and IOPS whether or not a better level is active, split between
// their active workloads, lower than the share caps where both apply; the
// levels above From are left alone, and the zero Ceiling lifts it.
func TestThrottleCeiling(t *testing.T) {
	t.Parallel()
	f := newFakeThrottleTree(t, "/p/hi", "/p/l2", "/p/l3", "/p/l4")
	th, step := newStepper(t, f, map[string]int{"/p/hi": 1, "/p/l2": 2, "/p/l3": 3, "/p/l4": 4})
	for range 5 { // 1000 MiB/s, 1000 IOPS
		f.read("/p/l4", 40<<20)
		f.device(200<<20, 200, 200)
		step(200 * time.Millisecond)
	}
	th.Hold(Ceiling{From: 3, IOPS: 20})
	for range 2 { // l4 streams, nobody better
		f.read("/p/l4", 1<<20)
		step(10 * time.Millisecond)
	}
	if l := f.limits("/p/l4"); l != (cgroupfs.Limits{RIOps: 20, WIOps: 20}) {
		t.Fatalf("held l4 alone: %+v, want 20 IOPS and bytes unbounded", l)
	}
	for range 2 { // l2 streams too: itself not held
		f.read("/p/l2", 1<<20)
		f.read("/p/l4", 1<<20)
		step(10 * time.Millisecond)
	}
	if l := f.limits("/p/l2"); !l.IsZero() {
		t.Fatalf("l2 (above From) capped %+v", l)
	}
	// l3 streams too: the two held workloads share the 20 IOPS (a cap in
	// force changes one v1 file a period: up to four periods).
	for range 4 {
		f.read("/p/l3", 10<<20)
		f.read("/p/l4", 1<<20)
		step(10 * time.Millisecond)
	}
	if l3, l4 := f.limits("/p/l3"), f.limits("/p/l4"); l3.WIOps != 10 || l4.WIOps != 10 {
		t.Fatalf("l3 %+v, l4 %+v: want 10 IOPS each", l3, l4)
	}
	// A level-1 reader: l4's share cap (30 % of the device) in bytes, the
	// ceiling's IOPS, the lower of the two; a ceiling in bytes below the
	// share cap wins there too.
	th.Hold(Ceiling{From: 4, IOPS: 20, Bps: 8 << 20})
	for range 4 {
		f.read("/p/hi", 4096)
		f.read("/p/l3", 10<<20)
		f.read("/p/l4", 1<<20)
		step(10 * time.Millisecond)
	}
	if l := f.limits("/p/l4"); l != (cgroupfs.Limits{RBps: 8 << 20, WBps: 8 << 20, RIOps: 20, WIOps: 20}) {
		t.Fatalf("held l4 beside a level-1 reader: %+v, want 8 MiB/s and 20 IOPS", l)
	}
	if l := f.limits("/p/l3"); l.RIOps <= 20 || l.RBps <= 8<<20 {
		t.Fatalf("l3 (no longer held) %+v, want its share cap, above the ceiling", l)
	}
	th.Hold(Ceiling{})
	for range 30 { // beyond the hold: the reader is gone
		f.read("/p/l4", 1<<20)
		step(10 * time.Millisecond)
	}
	if l := f.limits("/p/l4"); !l.IsZero() {
		t.Fatalf("l4 still capped %+v after the ceiling was lifted", l)
	}
}

// TestThrottleCapacityIgnoresShallowDemand: the capacity was measured with
// 8 requests in flight; a stream with one request in flight keeps the
// device busy all the time yet gets less through, each request no slower
// than at the peak: the demand is shallow, the device has not slowed, and
// the capacity stays. A device that has slowed makes the same demand wait
// longer per request: followed.
func TestThrottleCapacityIgnoresShallowDemand(t *testing.T) {
	t.Parallel()
	f := newFakeThrottleTree(t, "/p/l4")
	th, step := newStepper(t, f, map[string]int{"/p/l4": 4})
	for range 5 { // 1000 MiB/s, 1000 IOPS, 8 in flight: 8 ms a request
		f.deviceQD(200<<20, 200, 200, 8)
		step(200 * time.Millisecond)
	}
	c := th.cap.bps
	for range 20 { // one 1 MiB request at a time, 2 ms each: 500 MiB/s
		f.deviceQD(100<<20, 100, 200, 1)
		step(200 * time.Millisecond)
	}
	if th.cap.bps != c {
		t.Fatalf("capacity moved from %.0f to %.0f MiB/s under a shallow stream whose requests were faster than at the peak",
			c/(1<<20), th.cap.bps/(1<<20))
	}
	for range 20 { // 8 in flight again, 500 MiB/s: 16 ms a request
		f.deviceQD(100<<20, 100, 200, 8)
		step(200 * time.Millisecond)
	}
	if th.cap.bps > 520*(1<<20) || th.cap.bps < 500*(1<<20) {
		t.Fatalf("capacity %.0f MiB/s after the device slowed to 500 under the same demand, want it near 500", th.cap.bps/(1<<20))
	}
}

// TestThrottleLiftsCapsOfPromoted: a capped workload that is boosted to
// level 1, leaving no demoted workload on the device, has its cap lifted
// at the next period (the loop used to skip writing caps with nobody
// demoted, so a held writer kept the baseline at level 1).
func TestThrottleLiftsCapsOfPromoted(t *testing.T) {
	t.Parallel()
	f := newFakeThrottleTree(t, "/p/w")
	th, step := newStepper(t, f, map[string]int{"/p/w": 4})
	th.Hold(Ceiling{From: 2, IOPS: 20})
	f.read("/p/w", 1<<20)
	step(10 * time.Millisecond)
	f.read("/p/w", 1<<20)
	step(10 * time.Millisecond)
	if l := f.limits("/p/w"); l.WIOps != 20 {
		t.Fatalf("held writer %+v, want 20 IOPS", l)
	}
	th.mu.Lock() // as Update does for a boost to level 1
	th.members["/p/w"].level = 1
	th.demoted, th.setNew = 0, true
	th.mu.Unlock()
	step(10 * time.Millisecond)
	if l := f.limits("/p/w"); !l.IsZero() {
		t.Fatalf("writer boosted to level 1 still capped %+v", l)
	}
}

// TestThrottlePeriodWatchesDemotedOnly checks that a fast-loop period looks
// at the demoted workloads (and caps still to lift), not at every workload
// on the device: beside 500 level-1 workloads, one demoted stream is all a
// period reads, and a boosted stream stays watched until its cap is off.
func TestThrottlePeriodWatchesDemotedOnly(t *testing.T) {
	t.Parallel()
	names := []string{"/p/l4"}
	for i := range 500 {
		names = append(names, fmt.Sprintf("/p/w%d", i))
	}
	f := newFakeThrottleTree(t, names...)
	th := New(Config{Shares: [4]float64{1, 0.6, 0.45, 0.3}, Min: 1 << 20},
		Options{Hierarchy: f.h, Name: "loop0", Dev: fakeDev, SysRoot: f.sys})
	defer th.Stop()
	now := time.Unix(1000, 0)
	th.now = func() time.Time { return now }
	step := func() {
		now = now.Add(200 * time.Millisecond) // a capacity window each
		f.flush()
		th.step()
	}
	th.mu.Lock()
	for i, cg := range names {
		th.members[cg] = &tmember{cgroup: cg, level: min(1+3*(1-min(i, 1)), 4), durable: true}
	}
	th.demoted, th.setNew = 1, true
	th.mu.Unlock()
	for range 3 {
		f.read("/p/l4", 40<<20)
		f.device(40<<20, 40, 200)
		step()
	}
	f.read("/p/w7", 4096) // a better level: l4 capped
	f.read("/p/l4", 40<<20)
	f.device(40<<20+4096, 41, 200)
	step()
	if l := f.limits("/p/l4"); l.IsZero() {
		t.Fatal("l4 not capped after a level-1 read")
	}
	if len(th.watch) != 1 || th.watch[0].cgroup != "/p/l4" {
		t.Fatalf("a period watches %d members, want only the demoted /p/l4", len(th.watch))
	}
	// Boosted to level 1 with its cap on: watched until the cap is lifted.
	th.mu.Lock()
	th.members["/p/l4"].level, th.setNew = 1, true
	th.mu.Unlock()
	th.rebuildWatch()
	if len(th.watch) != 1 {
		t.Fatalf("boosted stream with a cap in force not watched (%d members watched)", len(th.watch))
	}
	th.mu.Lock()
	th.applyCaps(now)
	th.mu.Unlock()
	if l := f.limits("/p/l4"); !l.IsZero() {
		t.Fatalf("boosted stream still capped %+v", l)
	}
	th.rebuildWatch()
	if len(th.watch) != 0 {
		t.Fatalf("%d members watched with nobody demoted or capped", len(th.watch))
	}
}

// TestThrottleAccountsCapsInSensor: given the device's sensor, the throttle
// reads the device through it (the capacity is learnt from the same
// readings) and adds to it what its caps allowed: the capped time, the
// caps integrated over it, and the time a capped stream ran at its cap;
// a capped stream that does less than its cap is not held back.
func TestThrottleAccountsCapsInSensor(t *testing.T) {
	t.Parallel()
	f := newFakeThrottleTree(t, "/p/hi", "/p/l4")
	sen, err := devsensor.Open(f.sys, "loop0", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer sen.Close()
	th := New(Config{Shares: [4]float64{1, 0.6, 0.45, 0.3}, Min: 1 << 20},
		Options{Hierarchy: f.h, Name: "loop0", Dev: fakeDev, Sensor: sen})
	defer th.Stop()
	now := time.Unix(1000, 0)
	th.now = func() time.Time { return now }
	step := func(d time.Duration) {
		now = now.Add(d)
		f.flush()
		th.step()
	}
	th.mu.Lock()
	for cg, l := range map[string]int{"/p/hi": 1, "/p/l4": 4} {
		th.members[cg] = &tmember{cgroup: cg, level: l, durable: true}
	}
	th.demoted, th.setNew = 1, true
	th.mu.Unlock()
	// 1000 MiB/s, 1000 IOPS with the stream alone: the capacity.
	for range 5 {
		f.read("/p/l4", 200<<20)
		f.device(200<<20, 200, 200)
		step(200 * time.Millisecond)
	}
	if math.Abs(th.cap.bps-1000*(1<<20)) > 1<<20 || th.OpenFiles() != 2 {
		t.Fatalf("capacity %.0f B/s through the shared sensor, %d files kept (want 1000 MiB/s; the parent and l4, not the sensor)",
			th.cap.bps, th.OpenFiles())
	}
	r0, err := sen.Read(now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r0.Caps != (devsensor.Caps{}) {
		t.Fatalf("caps %+v before any cap", r0.Caps)
	}
	// A level-1 reader beside it: l4 capped at 300 MiB/s, and it runs at
	// that (3 MiB per 10 ms) for 1 s.
	for range 100 {
		f.read("/p/hi", 4096)
		f.read("/p/l4", 3<<20)
		step(10 * time.Millisecond)
	}
	if l := f.limits("/p/l4"); l.RBps != uint64(0.3*th.cap.bps) {
		t.Fatalf("l4 limits %+v", l)
	}
	r1, _ := sen.Read(now.Add(2 * time.Hour))
	c := r1.Caps.Sub(r0.Caps)
	if c.CappedSecs < 0.95 || c.CappedSecs > 1.01 || c.HeldSecs < 0.7 || c.HeldSecs > 1.01 ||
		math.Abs(c.Bytes-0.3*th.cap.bps*c.CappedSecs) > 0.01*c.Bytes || math.Abs(c.IOs-300*c.CappedSecs) > 3 {
		t.Fatalf("caps over 1 s at the cap: %+v; want ~1 s capped and held, 300 MiB and 300 I/Os allowed per second", c)
	}
	// Now it does a third of its cap (10 % of the device, still heavy):
	// capped, not held back.
	for range 100 {
		f.read("/p/hi", 4096)
		f.read("/p/l4", 1<<20)
		step(10 * time.Millisecond)
	}
	r2, _ := sen.Read(now.Add(3 * time.Hour))
	c = r2.Caps.Sub(r1.Caps)
	if c.CappedSecs < 0.95 || c.HeldSecs > 0.21 {
		t.Fatalf("caps over 1 s at a third of the cap: %+v; want ~1 s capped, held at most one window", c)
	}
}

// fakeInFlight is a per-cgroup in-flight source (what an eBPF sensor
// gives) with fixed values.
type fakeInFlight map[string]float64

func (f fakeInFlight) InFlight(cgroup string, dev cgroupfs.Dev) (float64, bool) {
	n, ok := f[cgroup]
	return n, ok
}

// TestThrottleCapsWhoMakesOthersWait drives the fast loop on a fake tree
// with a level-1 reader, a light level-2 reader (400 KB/s), a level-4
// streamer and an idle level-3 workload: the streamer is capped and its cap
// re-armed every period, the light reader is never capped; a 4 KiB flood
// that moves few bytes but holds the device's queue (32 in flight) is
// capped; and an in-flight source, when given, is believed over the
// estimate.
func TestThrottleCapsWhoMakesOthersWait(t *testing.T) {
	t.Parallel()
	f := newFakeThrottleTree(t, "/p/hi", "/p/l2", "/p/l3", "/p/l4")
	th, step := newStepper(t, f, map[string]int{"/p/hi": 1, "/p/l2": 2, "/p/l3": 3, "/p/l4": 4})
	for range 5 { // 1000 MiB/s, 1000 IOPS: the stream alone
		f.read("/p/l4", 40<<20)
		f.device(200<<20, 200, 200)
		step(200 * time.Millisecond)
	}
	rearms := func() uint64 { th.mu.Lock(); defer th.mu.Unlock(); return th.rearms }
	// The level-1 and the light level-2 reader read 4 KiB a period beside
	// the streamer's 3 MiB; the device holds 32 requests in flight.
	r0 := rearms()
	for i := range 50 {
		f.read("/p/hi", 4096)
		f.read("/p/l2", 4096)
		f.read("/p/l4", 3<<20)
		f.deviceQD(3<<20+8192, 5, 10, 32)
		step(10 * time.Millisecond)
		if l := f.limits("/p/l2"); !l.IsZero() {
			t.Fatalf("period %d: the light level-2 reader capped %+v", i, l)
		}
		if l := f.limits("/p/l3"); !l.IsZero() {
			t.Fatalf("period %d: the idle level-3 workload capped %+v", i, l)
		}
	}
	want4 := uint64(0.3 * th.cap.bps)
	if l := f.limits("/p/l4"); l.RBps != want4 {
		t.Fatalf("streamer limits %+v, want rbps %d", l, want4)
	}
	// Its cap did not change, and was written again after the first
	// period: the re-arm, every period, or as often as its request cap
	// allows rearmMinIOs (300 IOPS here: every second period).
	every := math.Ceil(rearmMinIOs / (float64(f.limits("/p/l4").RIOps) * 0.01))
	if n := rearms() - r0; float64(n) < 45/every {
		t.Fatalf("%d re-arms in 50 periods of a capped active streamer, want one every %.0f", n, every)
	}
	// Someone clears the file: the next period's re-arm writes it back.
	if err := os.WriteFile(filepath.Join(f.h.Mount, "/p/l4", "blkio.throttle.read_bps_device"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.read("/p/hi", 4096)
	f.read("/p/l4", 3<<20)
	step(10 * time.Millisecond)
	if l := f.limits("/p/l4"); l.RBps != want4 {
		t.Fatalf("streamer limits %+v after the file was cleared, want rbps %d re-armed", l, want4)
	}
	// Its cap leaks (its requests wait at the device, not in blk-throttle:
	// it moves three times its cap): not re-armed, so the slice runs and
	// holds it; back at its cap, the re-arm resumes.
	r1 := rearms()
	for range 20 {
		f.read("/p/hi", 4096)
		f.read("/p/l4", 9<<20)
		f.deviceQD(9<<20+4096, 10, 10, 32)
		step(10 * time.Millisecond)
	}
	if n := rearms() - r1; n > 4 {
		t.Fatalf("%d re-arms in 20 periods of a streamer moving 3× its cap, want at most the 3-4 before its smoothed rate shows it", n)
	}
	r2 := rearms()
	for range 40 {
		f.read("/p/hi", 4096)
		f.read("/p/l4", 3<<20)
		f.deviceQD(3<<20+4096, 5, 10, 32)
		step(10 * time.Millisecond)
	}
	if n := rearms() - r2; float64(n) < 20/every {
		t.Fatalf("%d re-arms in 40 periods back at its cap, want the re-arm to resume within ~15", n)
	}
	if l := f.limits("/p/l4"); l.RBps != want4 {
		t.Fatalf("streamer limits %+v after it leaked, want rbps %d", l, want4)
	}

	// The streamer stops; level 3 floods the device with 4 KiB requests:
	// 4 % of its bytes (light by bytes), but 32 requests in flight, nearly
	// all its own: capped. The light reader still is not.
	for range 10 {
		f.read("/p/hi", 4096)
		f.read("/p/l2", 4096)
		f.read("/p/l3", 400<<10)
		f.deviceQD(400<<10+8192, 102, 10, 32)
		step(10 * time.Millisecond)
	}
	if l := f.limits("/p/l3"); l.IsZero() {
		th.mu.Lock()
		ld := th.members["/p/l3"].load
		th.mu.Unlock()
		t.Fatalf("the 4 KiB flood holding the queue was not capped (rate %.0f B/s, depth %.1f)", ld.rate, ld.depth)
	}
	if l := f.limits("/p/l2"); !l.IsZero() {
		t.Fatalf("the light level-2 reader capped %+v beside the flood", l)
	}

	// An in-flight source says the level-2 reader keeps 8 requests in
	// flight and the flood none: believed over the estimate (the flood's
	// depth decays within ~200 ms, and it stays capped a Hold after).
	th.mu.Lock()
	th.cfg.InFlight = fakeInFlight{"/p/l2": 8, "/p/l3": 0}
	th.mu.Unlock()
	for range 60 {
		f.read("/p/hi", 4096)
		f.read("/p/l2", 4096)
		f.read("/p/l3", 400<<10)
		f.deviceQD(400<<10+8192, 102, 10, 32)
		step(10 * time.Millisecond)
	}
	if l := f.limits("/p/l2"); l.IsZero() {
		t.Fatal("level-2 reader with 8 requests in flight (measured) not capped")
	}
	if l := f.limits("/p/l3"); !l.IsZero() {
		t.Fatalf("flood measured with nothing in flight still capped %+v", l)
	}
}

// TestThrottleParentsFollowMembership: the parents a period reads are
// opened again when members come or go, not when a member's level
// changes (every demotion used to list and sort every member's
// directory); a member no Update lists any more is dropped.
func TestThrottleParentsFollowMembership(t *testing.T) {
	t.Parallel()
	f := newFakeThrottleTree(t, "/p/a", "/p/b", "/q", "/q/c")
	th, step := newStepper(t, f, map[string]int{"/p/a": 4, "/p/b": 1})
	th.mu.Lock()
	th.running = true // no goroutine: the test steps
	th.mu.Unlock()
	t.Cleanup(func() {
		th.mu.Lock()
		th.running = false
		th.mu.Unlock()
	})
	parents := func() []string {
		var out []string
		for _, p := range th.parents {
			out = append(out, p.rel)
		}
		return out
	}
	step(200 * time.Millisecond)
	if got := parents(); !slices.Equal(got, []string{"/p"}) {
		t.Fatalf("parents %q, want /p", got)
	}
	p0 := th.parents[0]
	th.Update([]Member{{Cgroup: "/p/a", Level: 4, Durable: true}, {Cgroup: "/p/b", Level: 3, Durable: true}})
	if !th.setNew || th.parentsNew {
		t.Fatalf("after a level change: setNew %v parentsNew %v, want true, false", th.setNew, th.parentsNew)
	}
	step(200 * time.Millisecond)
	if len(th.parents) != 1 || th.parents[0] != p0 {
		t.Fatalf("parents opened again after a level change: %q", parents())
	}
	th.Update([]Member{{Cgroup: "/p/a", Level: 4, Durable: true}, {Cgroup: "/q/c", Level: 2, Durable: true}})
	if _, ok := th.members["/p/b"]; ok || len(th.members) != 2 {
		t.Fatalf("members %d, /p/b kept: want /p/a and /q/c", len(th.members))
	}
	step(200 * time.Millisecond)
	if got := parents(); !slices.Equal(got, []string{"/p", "/q"}) {
		t.Fatalf("parents after /q/c came %q, want /p and /q", got)
	}
}

// TestThrottleRearmsRequestCapsSparingly: on a disk of 200 IOPS the
// streamer's cap limits requests too (60 IOPS). A re-arm every 10 ms
// would allow 0.6 of a request per write, which the kernel truncates to
// none (the writer under a 50 IOPS cap did 14 IOPS in the v2 VM): it is
// re-armed only once its cap has allowed rearmMinIOs requests.
func TestThrottleRearmsRequestCapsSparingly(t *testing.T) {
	t.Parallel()
	f := newFakeThrottleTree(t, "/p/hi", "/p/l4")
	th, step := newStepper(t, f, map[string]int{"/p/hi": 1, "/p/l4": 4})
	for range 5 { // 50 MiB/s, 200 IOPS: the stream alone
		f.read("/p/l4", 10<<20)
		f.deviceQD(10<<20, 40, 200, 32)
		step(200 * time.Millisecond)
	}
	rearms := func() uint64 { th.mu.Lock(); defer th.mu.Unlock(); return th.rearms }
	step1 := func() {
		f.read("/p/hi", 4096)
		f.read("/p/l4", 128<<10) // below its 15 MiB/s bytes cap
		f.deviceQD(128<<10+4096, 2, 10, 32)
		step(10 * time.Millisecond)
	}
	for range 5 {
		step1()
	}
	l := f.limits("/p/l4")
	if l.RIOps == 0 || l.RIOps > 100 {
		t.Fatalf("streamer limits %+v, want a request cap below 100 IOPS", l)
	}
	r0 := rearms()
	for range 60 {
		step1()
	}
	every := rearmMinIOs / (float64(l.RIOps) * 0.01) // periods between re-arms
	n := rearms() - r0
	if float64(n) > 60/every+1 || n < 3 {
		t.Fatalf("%d re-arms in 60 periods of a streamer capped at %d IOPS, want one every %.1f periods (at least %d requests allowed by each)", n, l.RIOps, every, rearmMinIOs)
	}
	if got := f.limits("/p/l4"); got != l {
		t.Fatalf("streamer limits %+v changed to %+v", l, got)
	}
	// On a kernel that forgives request debt (6.16+) the streamer, at its
	// bytes cap (128 KiB a period against 15 MiB/s), is re-armed every
	// period: its bytes cap is what holds it.
	th.mu.Lock()
	th.cfg.DebtForgiven = true
	th.mu.Unlock()
	r1 := rearms()
	for range 30 {
		step1()
	}
	if n := rearms() - r1; n < 28 {
		t.Fatalf("%d re-arms in 30 periods of a streamer at its bytes cap on a kernel that forgives request debt, want one a period", n)
	}
	// Below its bytes cap, its request cap may be what holds it: sparing
	// again.
	r2 := rearms()
	for range 60 {
		f.read("/p/hi", 4096)
		f.read("/p/l4", 32<<10)
		f.deviceQD(32<<10+4096, 2, 10, 32)
		step(10 * time.Millisecond)
	}
	if n := rearms() - r2; float64(n) > 60/every+2 {
		t.Fatalf("%d re-arms in 60 periods of a streamer below its bytes cap, want one every %.1f periods", n, every)
	}
}

func TestRearmDue(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		l     cgroupfs.Limits
		since time.Duration
		want  bool
	}{
		{cgroupfs.Limits{RBps: 8 << 20, WBps: 8 << 20}, 10 * time.Millisecond, true}, // bytes only: every period
		{cgroupfs.Limits{RBps: 8 << 20, RIOps: 1000, WIOps: 1000}, 10 * time.Millisecond, true},
		{cgroupfs.Limits{RIOps: 50, WIOps: 50}, 10 * time.Millisecond, false}, // half a request allowed
		{cgroupfs.Limits{RIOps: 50, WIOps: 50}, 39 * time.Millisecond, false},
		{cgroupfs.Limits{RIOps: 50, WIOps: 50}, 40 * time.Millisecond, true},
		{cgroupfs.Limits{RIOps: 1000, WIOps: 20}, 90 * time.Millisecond, false}, // the smaller one counts
		{cgroupfs.Limits{WIOps: 20}, 100 * time.Millisecond, true},
		{cgroupfs.Limits{RIOps: 200}, 10 * time.Millisecond, true},
		{cgroupfs.Limits{RIOps: 199}, 10 * time.Millisecond, false},
	} {
		if got := rearmDue(c.l, c.since, false); got != c.want {
			t.Errorf("rearmDue(%+v, %v) = %v, want %v", c.l, c.since, got, c.want)
		}
		// Bytes-bound on a kernel that forgives request debt: always.
		if !rearmDue(c.l, c.since, true) {
			t.Errorf("rearmDue(%+v, %v, bytes-bound) = false, want true", c.l, c.since)
		}
	}
}

// TestThrottleIdleWait: with nobody demoted the fast loop reads the
// device every 10 periods while it moves data (its capacity is being
// measured) and once a second while it is quiet; a demotion ends an idle
// wait at once.
func TestThrottleIdleWait(t *testing.T) {
	t.Parallel()
	f := newFakeThrottleTree(t, "/p/a")
	th, _ := newStepper(t, f, map[string]int{"/p/a": 1})
	now := time.Unix(1000, 0)
	th.now = func() time.Time { return now }
	step := func(d time.Duration) time.Duration {
		now = now.Add(d)
		f.flush()
		return th.step()
	}
	if w := step(0); w != 100*time.Millisecond {
		t.Fatalf("first idle wait %v, want 100ms (the device not yet read twice)", w)
	}
	if w := step(100 * time.Millisecond); w != time.Second {
		t.Fatalf("idle wait on a quiet device %v, want 1s", w)
	}
	f.device(64<<20, 64, 100)
	if w := step(time.Second); w != 100*time.Millisecond {
		t.Fatalf("idle wait on a device that moved 64 MiB %v, want 100ms", w)
	}
	if w := step(100 * time.Millisecond); w != time.Second {
		t.Fatalf("idle wait once the device is quiet again %v, want 1s", w)
	}
	f.stat.InFlight = 1 // a request the device has not completed yet
	if w := step(time.Second); w != 100*time.Millisecond {
		t.Fatalf("idle wait with a request in flight %v, want 100ms", w)
	}
	f.stat.InFlight = 0

	// Update signals a running loop when the first workload is demoted,
	// not when one stays at a level it had.
	th.mu.Lock()
	th.running, th.wake = true, make(chan struct{}, 1) // no goroutine: the test reads wake
	th.mu.Unlock()
	t.Cleanup(func() { th.mu.Lock(); th.running = false; th.mu.Unlock() })
	th.Update([]Member{{Cgroup: "/p/a", Level: 1, Durable: true}})
	select {
	case <-th.wake:
		t.Fatal("woken with nobody demoted")
	default:
	}
	th.Update([]Member{{Cgroup: "/p/a", Level: 4, Durable: true}})
	select {
	case <-th.wake:
	default:
		t.Fatal("a demotion did not wake the idle loop")
	}
	if w := step(10 * time.Millisecond); w > 100*time.Millisecond {
		t.Fatalf("wait with a demoted workload %v, want at most the read budget's", w)
	}
}

// TestThrottleUpdateSkipsSameList: an Update with the list of the last one
// (the same workloads, levels and durability: every tick of an idle host)
// changes nothing and is skipped; a changed level is taken; a member
// forgotten meanwhile is added again by the same list.
func TestThrottleUpdateSkipsSameList(t *testing.T) {
	t.Parallel()
	f := newFakeThrottleTree(t, "/p/a", "/p/b")
	th, _ := newStepper(t, f, nil)
	th.mu.Lock()
	th.running = true // no goroutine: nothing steps
	th.mu.Unlock()
	t.Cleanup(func() { th.mu.Lock(); th.running = false; th.mu.Unlock() })
	list := []Member{{Cgroup: "/p/a", Level: 1, Durable: true}, {Cgroup: "/p/b", Level: 4, Durable: true}}
	th.Update(list)
	e := th.epoch
	th.Update(slices.Clone(list))
	if th.epoch != e {
		t.Fatalf("the same list again: Update ran (epoch %d, was %d)", th.epoch, e)
	}
	list[1].Level = 3
	th.Update(list)
	if th.epoch != e+1 || th.members["/p/b"].level != 3 {
		t.Fatalf("a changed level: epoch %d, /p/b at level %d; want %d and 3", th.epoch, th.members["/p/b"].level, e+1)
	}
	th.Forget("/p/a")
	th.Update(list)
	if _, ok := th.members["/p/a"]; !ok {
		t.Fatal("a member forgotten, then listed again: not added back")
	}
}

// fakeBios is the kernel's bio counters over a fake tree: a read is counted
// to the nearest watched one of its cgroup and the cgroup's ancestors.
type fakeBios struct {
	f       *fakeThrottleTree
	counts  map[uint64]uint64 // by inode, the watched
	lookups int               // calls of Each
	err     error             // every Each fails with it
}

func newFakeBios(f *fakeThrottleTree) *fakeBios {
	return &fakeBios{f: f, counts: map[uint64]uint64{}}
}

func (b *fakeBios) Watch(ino uint64, dev cgroupfs.Dev) error {
	if dev != fakeDev {
		return fmt.Errorf("watch on %s, the tree is %s", dev, fakeDev)
	}
	b.counts[ino] = 0
	return nil
}

func (b *fakeBios) Unwatch(ino uint64, dev cgroupfs.Dev) error {
	delete(b.counts, ino)
	return nil
}

func (b *fakeBios) Each(dev cgroupfs.Dev, fn func(ino, bytes uint64)) error {
	b.lookups++
	if b.err != nil {
		return b.err
	}
	if dev != fakeDev {
		return fmt.Errorf("each of %s, the tree is %s", dev, fakeDev)
	}
	for ino, n := range b.counts {
		fn(ino, n)
	}
	return nil
}

func (b *fakeBios) watched() int { return len(b.counts) }

func (b *fakeBios) add(cg string, n uint64) {
	for c := cg; ; c = path.Dir(c) {
		ino, err := b.f.h.DirIno(c)
		if err != nil {
			b.f.t.Fatal(err)
		}
		if _, ok := b.counts[ino]; ok {
			b.counts[ino] += n
			return
		}
		if c == "/" {
			return
		}
	}
}

// TestThrottleBios: with the kernel's bio counters a period reads no
// counter file: one read of the counters of every demoted workload and
// parent, which count a tenth of a file read each in the budget (at 1,000
// demoted, periods of 202 ms instead of over 2 s); a demoted workload boosted to level 1 is no longer
// watched, so its I/O is a better level's; and when the counters fail (the
// sensor closed), the periods read the files again.
func TestThrottleBios(t *testing.T) {
	t.Parallel()
	var names []string
	for i := range 1000 {
		names = append(names, fmt.Sprintf("/p/w%04d", i))
	}
	f := newFakeThrottleTree(t, append([]string{"/p/hi"}, names...)...)
	levels := map[string]int{"/p/hi": 1}
	for _, cg := range names {
		levels[cg] = 4
	}
	th, step := newStepper(t, f, levels)
	f.bios = newFakeBios(f)
	th.SetBios(f.bios)
	period := th.step()
	if want := th.budgetPeriod((len(names) + 1 + biosPerRead - 1) / biosPerRead); period != want || period > 250*time.Millisecond {
		t.Errorf("period %s at %d demoted with bio counters, want %s", period, len(names), want)
	}
	if f.bios.lookups != 1 || f.bios.watched() != len(names)+1 {
		t.Errorf("a period read the counters %d times, %d watched; want once, %d (each demoted and the parent)", f.bios.lookups, f.bios.watched(), len(names)+1)
	}
	for _, m := range th.watch {
		if m.cg != nil {
			t.Fatalf("%s: its counter file opened with bio counters in use", m.cgroup)
		}
	}

	// w0000 streams; then it is boosted to level 1 and streams on: a
	// better level's I/O, so w0001 (streaming too) is capped.
	for range 5 {
		f.read("/p/w0000", 8<<20)
		f.read("/p/w0001", 8<<20)
		f.device(16<<20, 16, 100)
		step(100 * time.Millisecond)
	}
	if !f.limits("/p/w0001").IsZero() {
		t.Fatalf("w0001 capped %+v with no better level active", f.limits("/p/w0001"))
	}
	th.mu.Lock()
	th.members["/p/w0000"].level, th.setNew = 1, true
	th.demoted--
	th.mu.Unlock()
	step(10 * time.Millisecond)
	f.read("/p/w0000", 1<<20)
	f.read("/p/w0001", 1<<20)
	step(10 * time.Millisecond)
	if th.top != 1 || f.limits("/p/w0001").IsZero() {
		t.Fatalf("top %d, w0001 %+v after the boosted w0000 read: want w0001 capped below level 1", th.top, f.limits("/p/w0001"))
	}

	// The sensor closes: the files from the next period on, and the
	// caps still follow a better level.
	f.bios.err = fmt.Errorf("closed")
	step(10 * time.Millisecond)
	if th.bio != nil || f.bios.watched() != 0 {
		t.Fatalf("bio counters still in use (%d watched) after they failed", f.bios.watched())
	}
	for range 40 {
		f.read("/p/w0001", 1<<20)
		step(10 * time.Millisecond)
	}
	if th.top != 4 || !f.limits("/p/w0001").IsZero() {
		t.Fatalf("top %d, w0001 %+v once the better level stopped (files): want it uncapped", th.top, f.limits("/p/w0001"))
	}
	f.read("/p/hi", 4096)
	f.read("/p/w0001", 1<<20)
	step(10 * time.Millisecond)
	if th.top != 1 || f.limits("/p/w0001").IsZero() {
		t.Fatalf("top %d, w0001 %+v after a level-1 read (files): want it capped", th.top, f.limits("/p/w0001"))
	}
}

// TestThrottleChangesOneFileAPeriod: on v1 a cap in force that the
// controller raises changes one limit file a period, the read bytes first
// (pace.go's oneFile: a second write in the same jiffy drops the group's
// debt); the cap wanted is reached all the same.
func TestThrottleChangesOneFileAPeriod(t *testing.T) {
	t.Parallel()
	f := newFakeThrottleTree(t, "/p/hi", "/p/l4")
	th, step := newStepper(t, f, map[string]int{"/p/hi": 1, "/p/l4": 4})
	for range 5 { // 1000 MiB/s, 1000 IOPS
		f.read("/p/l4", 40<<20)
		f.device(200<<20, 200, 200)
		step(200 * time.Millisecond)
	}
	run := func() {
		f.read("/p/hi", 4096)
		f.read("/p/l4", 1<<20)
		step(10 * time.Millisecond)
	}
	th.Steer(0.05)
	for range 6 {
		run()
	}
	before := f.limits("/p/l4")
	if before.RBps == 0 || before.RIOps == 0 || before.WBps == 0 || before.WIOps == 0 {
		t.Fatalf("l4 beside a level-1 reader: %+v, want a cap on all four files", before)
	}
	th.Steer(0.3)
	run()
	after := f.limits("/p/l4")
	if after.RBps <= before.RBps || after.RIOps != before.RIOps || after.WBps != before.WBps || after.WIOps != before.WIOps {
		t.Fatalf("one period after a raise: %+v from %+v, want the read bytes raised and nothing else", after, before)
	}
	for range 200 {
		run()
	}
	if l := f.limits("/p/l4"); l.RBps < 5*before.RBps || l.WIOps < 5*before.WIOps {
		t.Fatalf("after 2 s at a share of 30 %%: %+v from %+v, want all four files raised", l, before)
	}
}

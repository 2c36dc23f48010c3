package actuate

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
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
}

var fakeDev = cgroupfs.Dev{Major: 7, Minor: 0}

func newFakeThrottleTree(t *testing.T, children ...string) *fakeThrottleTree {
	root, sys := t.TempDir(), t.TempDir()
	f := &fakeThrottleTree{t: t, h: cgroupfs.Hierarchy{Version: 1, Mount: root}, sys: sys, bytes: map[string]uint64{}}
	for _, cg := range append([]string{"/p"}, children...) {
		dir := filepath.Join(root, cg)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, file := range v1ThrottleFiles {
			if err := os.WriteFile(filepath.Join(dir, file), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		f.bytes[cg] = 0
	}
	if err := os.MkdirAll(filepath.Join(sys, "class", "block", "loop0"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.flush()
	return f
}

var v1ThrottleFiles = []string{"blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device",
	"blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device"}

// read adds n bytes read by cgroup cg (and so by its parent /p).
func (f *fakeThrottleTree) read(cg string, n uint64) {
	f.bytes[cg] += n
	f.bytes["/p"] += n
}

// device advances loop0's own counters by bytes and ios over busyMs.
func (f *fakeThrottleTree) device(bytes, ios, busyMs uint64) {
	f.stat.ReadSectors += bytes / 512
	f.stat.ReadIOs += ios
	f.stat.IOTicksMs += busyMs
}

func (f *fakeThrottleTree) flush() {
	for cg, b := range f.bytes {
		body := fmt.Sprintf("7:0 Read %d\n7:0 Write 0\n7:0 Sync %d\n7:0 Async 0\n7:0 Total %d\nTotal %d\n", b, b, b, b)
		if err := os.WriteFile(filepath.Join(f.h.Mount, cg, "blkio.throttle.io_service_bytes_recursive"), []byte(body), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	s := f.stat
	line := fmt.Sprintf("%d 0 %d 0 %d 0 %d 0 0 %d 0 0 0 0 0 0 0\n", s.ReadIOs, s.ReadSectors, s.WriteIOs, s.WriteSectors, s.IOTicksMs)
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
func TestThrottleFastLoopRules(t *testing.T) {
	t.Parallel()
	f := newFakeThrottleTree(t, "/p/hi", "/p/l2", "/p/l4")
	th := newThrottle(Config{Hierarchy: f.h, SysRoot: f.sys,
		Throttle: Throttle{Shares: [4]float64{1, 0.6, 0.45, 0.3}, Min: 1 << 20}},
		Device{Name: "loop0", Dev: fakeDev, Mech: host.MechThrottle})
	defer th.Stop()
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
	if math.Abs(th.capBps-1000*(1<<20)) > 1<<20 || math.Abs(th.capIOPS-1000) > 1 {
		t.Fatalf("capacity %.0f B/s %.0f IOPS, want 1000 MiB/s and 1000 IOPS", th.capBps, th.capIOPS)
	}

	// A level-1 read: l4 (the only active demoted level) gets 30 % of the
	// device, in bytes and IOPS; l2 is idle but capped too, at its share.
	f.read("/p/hi", 4096)
	f.read("/p/l4", 1<<20)
	step(10 * time.Millisecond)
	if th.top != 1 {
		t.Fatalf("top %d after a level-1 read, want 1", th.top)
	}
	want4 := uint64(0.3 * th.capBps)
	if l := f.limits("/p/l4"); l.RBps != want4 || l.RIOps != 300 {
		t.Fatalf("l4 limits %+v, want rbps %d riops 300", l, want4)
	}
	if l := f.limits("/p/l2"); l.RBps != uint64(0.6*th.capBps) {
		t.Fatalf("l2 limits %+v, want rbps %d", l, uint64(0.6*th.capBps))
	}

	// l2 becomes active too: the two capped levels' shares (0.6 + 0.3)
	// are scaled to sum to 0.6.
	f.read("/p/l2", 1<<20)
	f.read("/p/hi", 4096)
	step(10 * time.Millisecond)
	f.read("/p/l2", 1<<20)
	f.read("/p/hi", 4096)
	step(10 * time.Millisecond)
	l2, l4 := f.limits("/p/l2").RBps, f.limits("/p/l4").RBps
	if sum := float64(l2+l4) / th.capBps; math.Abs(sum-0.6) > 0.01 || l2 <= l4 {
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

	// The device slows to half (a volume out of burst credits) while
	// busy all the time: the capacity follows it down instead of keeping
	// the old peak.
	for range 20 {
		f.device(100<<20, 100, 200)
		step(200 * time.Millisecond)
	}
	if th.capBps > 520*(1<<20) || th.capBps < 500*(1<<20) {
		t.Fatalf("capacity %.0f MiB/s after the device slowed to 500, want it near 500", th.capBps/(1<<20))
	}
	// Idle (not busy): the capacity stays.
	c := th.capBps
	for range 5 {
		f.device(1<<20, 1, 5)
		step(200 * time.Millisecond)
	}
	if th.capBps != c {
		t.Fatalf("capacity moved from %.0f to %.0f on an idle device", c, th.capBps)
	}
}

// TestThrottleReadBudget: with many demoted workloads the fast loop's
// period grows so its reads per second stay bounded.
func TestThrottleReadBudget(t *testing.T) {
	t.Parallel()
	var names []string
	for i := range 200 {
		names = append(names, fmt.Sprintf("/p/w%03d", i))
	}
	f := newFakeThrottleTree(t, names...)
	th := newThrottle(Config{Hierarchy: f.h, SysRoot: f.sys}, Device{Name: "loop0", Dev: fakeDev, Mech: host.MechThrottle})
	defer th.Stop()
	th.mu.Lock()
	for _, cg := range names {
		th.members[cg] = &tmember{cgroup: cg, level: 4, durable: true}
	}
	th.demoted, th.setNew = len(names), true
	th.mu.Unlock()
	period := th.step()
	reads := float64(len(names)+1) / period.Seconds()
	if period <= DefaultThrottlePeriod || reads > throttleReadBudget*1.01 {
		t.Fatalf("period %s for %d demoted workloads: %.0f reads/s, want at most %d", period, len(names), reads, throttleReadBudget)
	}
}

// TestThrottleBurstBound: while a better level is active, a cap is at most
// capacity × MaxBurst / slice, the slice being blk-throttle's on the
// device: 100 ms when it says it is rotational, 20 ms when not.
func TestThrottleBurstBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rotational string
		share      float64 // of capacity, for level 4 at share 0.3
	}{
		{"1", 0.005 / 0.1},  // 5 ms of a 100 ms slice
		{"0", 0.005 / 0.02}, // 5 ms of a 20 ms slice
		{"", 0.005 / 0.1},   // unknown: the longer slice
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
			th := newThrottle(Config{Hierarchy: f.h, SysRoot: f.sys,
				Throttle: Throttle{Shares: [4]float64{1, 0.6, 0.45, 0.3}, Min: 1 << 20, MaxBurst: 5 * time.Millisecond}},
				Device{Name: "loop0", Dev: fakeDev, Mech: host.MechThrottle})
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
			want := uint64(tc.share * th.capBps)
			near := func(a, b uint64) bool { return max(a, b)-min(a, b) <= 1 } // float rounding
			if l := f.limits("/p/l4"); !near(l.RBps, want) || !near(l.RIOps, uint64(tc.share*th.capIOPS)) {
				t.Fatalf("l4 limits %+v, want rbps %d (%.2f of %.0f B/s) and riops %d", l, want, tc.share, th.capBps, uint64(tc.share*th.capIOPS))
			}
		})
	}
}

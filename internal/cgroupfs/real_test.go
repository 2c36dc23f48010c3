package cgroupfs

// Real-kernel tests. The TestRealV1* tests run on the host (cgroup v1 blkio,
// a loop device made for the test); the TestRealV2* tests run inside the
// nested test VM (make test-v2), where cgroup2 is mounted at /sys/fs/cgroup
// and /dev/vda is a disk capped by qemu at 100 MiB/s. Both drive the same
// code: two cgroups, one O_DIRECT sequential reader in each, on disjoint
// halves of the device.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

func TestMain(m *testing.M) { testkit.Main(m, workload.MaybeRunFromEnv) }

// realEnv is a hierarchy, a test parent cgroup in it, and a block device.
type realEnv struct {
	h       Hierarchy
	base    string // the test's parent cgroup, relative to h.Mount
	devName string // e.g. loop3, vda
	devPath string
	dev     Dev
	size    int64 // bytes of the device the readers may use
}

// child creates the cgroup base/name and returns its relative path.
func (e realEnv) child(t *testing.T, name string) string {
	t.Helper()
	rel := e.base + "/" + name
	p, err := e.h.Path(rel)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Cgroup(t, p)
	return rel
}

func testCgroupName(t *testing.T) string {
	return fmt.Sprintf("/ddiskqos-test-%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), os.Getpid())
}

// v1Env is this host's v1 blkio hierarchy with a fresh 512 MiB loop
// device whose v1 accounting is enabled.
func v1Env(t *testing.T) realEnv {
	t.Helper()
	e := newV1Env(t, 512)
	if err := e.h.EnableV1Accounting(e.dev); err != nil {
		t.Fatal(err)
	}
	return e
}

// newV1Env is the v1 blkio hierarchy, a test parent cgroup and a brand-new
// loop device of sizeMiB, accounting left as the kernel has it.
func newV1Env(t *testing.T, sizeMiB int) realEnv {
	t.Helper()
	testkit.HostOnly(t)
	testkit.NeedRoot(t)
	l, err := DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	m, ok := l.V1Controller("blkio")
	testkit.Need(t, ok, "cgroup v1 blkio hierarchy not mounted (layout %s)", l.Mode)
	loop := testkit.LoopDevice(t, sizeMiB)
	e := realEnv{h: Hierarchy{Version: 1, Mount: m.Mountpoint}, base: testCgroupName(t),
		devName: loop.Name, devPath: loop.Path, dev: Dev{loop.Major, loop.Minor}, size: int64(sizeMiB) << 20}
	p, _ := e.h.Path(e.base)
	testkit.Cgroup(t, p)
	return e
}

// v2Env is the test VM's unified hierarchy and its throttled disk.
func v2Env(t *testing.T) realEnv {
	t.Helper()
	testkit.VMOnly(t)
	l, err := DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Need(t, l.Mode == ModeV2, "the VM should mount cgroup2 only, layout is %s", l.Mode)
	disk := testkit.VMDisk(t)
	e := realEnv{h: Hierarchy{Version: 2, Mount: l.Unified}, base: testCgroupName(t),
		devName: disk.Name, devPath: disk.Path, dev: Dev{Major: disk.Major, Minor: disk.Minor}, size: disk.Size}
	p, _ := e.h.Path(e.base)
	testkit.Cgroup(t, p)
	ctl, err := os.ReadFile(filepath.Join(l.Unified, "cgroup.subtree_control"))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Need(t, strings.Contains(string(ctl), "io"), "io controller not enabled in the root's cgroup.subtree_control (%q)", ctl)
	if err := os.WriteFile(filepath.Join(p, "cgroup.subtree_control"), []byte("+io"), 0); err != nil {
		t.Fatalf("enable io below %s: %v", p, err)
	}
	return e
}

// reader is one O_DIRECT sequential reader placed in a cgroup.
type reader struct {
	cgroup string // relative cgroup path
	offset int64
	span   int64
}

type readResult struct {
	res     workload.Result
	counted uint64 // bytes the cgroup's counters grew by on the device
}

// runReaders starts every reader in its cgroup, lets them read for d, and
// returns what each read and what its cgroup's counters saw.
func runReaders(t *testing.T, e realEnv, d time.Duration, rs []reader) []readResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
	defer cancel()
	procs := make([]*workload.Proc, len(rs))
	before := make([]uint64, len(rs))
	cgs := make([]*Cgroup, len(rs))
	for i, r := range rs {
		args := []string{"--wait-stdin", "--json", "--direct", "--loop",
			"--duration", d.String(), "--offset", fmt.Sprint(r.offset), "--span", fmt.Sprint(r.span),
			"read", e.devPath}
		p, err := workload.Start(ctx, os.Args[0], []string{workload.EnvMain + "=1"}, args)
		if err != nil {
			t.Fatal(err)
		}
		procs[i] = p
		t.Cleanup(func() { p.Kill(); p.Wait() })
		if err := e.h.AddProcess(r.cgroup, p.Pid()); err != nil {
			t.Fatal(err)
		}
		c, err := e.h.Open(r.cgroup)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cgs[i] = c
		s, err := c.ReadIO()
		if err != nil {
			t.Fatal(err)
		}
		d, _ := s.Device(e.dev)
		before[i] = d.RBytes
	}
	for _, p := range procs {
		if err := p.Go(); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]readResult, len(rs))
	for i, p := range procs {
		res, err := p.Wait()
		if err != nil {
			t.Fatalf("reader %d in %s: %v", i, rs[i].cgroup, err)
		}
		s, err := cgs[i].ReadIO()
		if err != nil {
			t.Fatal(err)
		}
		d, _ := s.Device(e.dev)
		out[i] = readResult{res: res, counted: d.RBytes - before[i]}
	}
	return out
}

// assertCounted checks that a cgroup's counters saw the bytes its reader read.
func assertCounted(t *testing.T, name string, r readResult) {
	t.Helper()
	read := uint64(r.res.Bytes)
	if read == 0 {
		t.Fatalf("%s: reader read nothing", name)
	}
	// The counters may run slightly ahead (a request in flight at the end).
	if r.counted < read || r.counted > read+read/50+(4<<20) {
		t.Errorf("%s: reader read %d bytes, cgroup counters grew by %d", name, read, r.counted)
	}
}

func mibps(r readResult) float64 { return r.res.BytesPerSec / (1 << 20) }

// weightSplit runs a high- and a low-weight reader, first with equal weights
// (the control) and then with 1000 vs 10 (on the weight file k's own scale,
// scale: iocost's io.weight divides by 10), and asserts the weights decide.
func weightSplit(t *testing.T, e realEnv, k string, scale func(Weight) uint64, d time.Duration, minRatio float64) {
	hi, lo := e.child(t, "hi"), e.child(t, "lo")
	half := e.size / 2
	rs := []reader{{hi, 0, half}, {lo, half, half}}

	for _, cg := range []string{hi, lo} {
		if err := e.h.SetDeviceWeight(cg, k, e.dev, scale(100)); err != nil {
			t.Fatal(err)
		}
	}
	eq := runReaders(t, e, d, rs)
	t.Logf("%s equal weights: %.1f vs %.1f MiB/s", k, mibps(eq[0]), mibps(eq[1]))

	if err := e.h.SetDeviceWeight(hi, k, e.dev, scale(1000)); err != nil {
		t.Fatal(err)
	}
	if err := e.h.SetDeviceWeight(lo, k, e.dev, scale(10)); err != nil {
		t.Fatal(err)
	}
	for cg, want := range map[string]Weight{hi: 1000, lo: 10} {
		w, err := e.h.ReadWeights(cg, k)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := w.Device(e.dev); !ok || got != scale(want) {
			t.Fatalf("%s: %s weight on %s reads back %d (set %v), want %d", cg, k, e.dev, got, ok, scale(want))
		}
	}
	// The disk below the loop device is shared: when another package's
	// test saturates it, the loop device's queue is not where requests
	// wait and no scheduler on it can split anything (seen here once,
	// 1.15x beside a host benchmark's tail). One more run then; two
	// runs that both show no split fail.
	eqRatio := eq[0].res.BytesPerSec / max(eq[1].res.BytesPerSec, 1)
	var got []readResult
	var ratio float64
	for attempt := 1; ; attempt++ {
		got = runReaders(t, e, d, rs)
		ratio = got[0].res.BytesPerSec / max(got[1].res.BytesPerSec, 1)
		t.Logf("%s weights 1000 vs 10, run %d: %.1f vs %.1f MiB/s (%.1fx; equal weights %.2fx)", k, attempt, mibps(got[0]), mibps(got[1]), ratio, eqRatio)
		if attempt == 2 || ratio >= minRatio && ratio >= 2*eqRatio {
			break
		}
	}
	for i, r := range append(eq, got...) {
		assertCounted(t, fmt.Sprintf("%s run %d", k, i), r)
	}
	if ratio < minRatio {
		t.Errorf("%s weights 1000 vs 10 split bandwidth only %.2fx (want >= %.0fx)", k, ratio, minRatio)
	}
	if ratio < 2*eqRatio {
		t.Errorf("%s weights 1000 vs 10 gave %.2fx, not clearly more than equal weights' %.2fx", k, ratio, eqRatio)
	}

	// Reset puts the default weight back on that device.
	if err := e.h.ResetDeviceWeight(lo, k, e.dev); err != nil {
		t.Fatal(err)
	}
	w, err := e.h.ReadWeights(lo, k)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := w.Device(e.dev); ok {
		t.Errorf("after reset %s still has weight %d on %s", lo, v, e.dev)
	}
}

// throttle caps one reader and checks the cap holds and is removed again.
func throttle(t *testing.T, e realEnv, limit uint64, d time.Duration, tolerance float64) {
	cg := e.child(t, "capped")
	if err := e.h.SetLimits(cg, e.dev, Limits{RBps: limit}); err != nil {
		t.Fatal(err)
	}
	if l, err := e.h.ReadLimits(cg, e.dev); err != nil || l != (Limits{RBps: limit}) {
		t.Fatalf("limits read back %+v, %v", l, err)
	}
	got := runReaders(t, e, d, []reader{{cg, 0, e.size}})[0]
	assertCounted(t, "capped reader", got)
	rate := got.res.BytesPerSec
	t.Logf("read_bps %d MiB/s: reader got %.2f MiB/s over %s", limit>>20, rate/(1<<20), got.res.Elapsed)
	// The cap holds: never more than the limit (and the tolerance). How
	// far below it a reader stays is not the cap's claim: three clean-clone
	// CI runs here, with other packages' tests beside it, got 14.95, 16.25
	// and 9.80 of 20 MiB/s while the same test alone gets 20.04-20.11 (the
	// earlier CI runs of the same code passed; not traced). The unthrottled
	// reader of this device moves ~800 MB/s, so any rate at or under the
	// limit shows the cap.
	if rate > float64(limit)*(1+tolerance) || rate <= 0 {
		t.Errorf("rate %.2f MiB/s: want at most %.0f%% above the %d MiB/s limit", rate/(1<<20), tolerance*100, limit>>20)
	}
	if err := e.h.SetLimits(cg, e.dev, Limits{}); err != nil {
		t.Fatal(err)
	}
	if l, err := e.h.ReadLimits(cg, e.dev); err != nil || !l.IsZero() {
		t.Fatalf("after removal limits read %+v, %v", l, err)
	}
}

// same is the scale of BFQ's weight files: 10..1000 as it is.
func same(w Weight) uint64 { return uint64(w) }

func TestRealV1BFQWeightSplit(t *testing.T) {
	e := v1Env(t)
	testkit.SetScheduler(t, e.devName, "bfq")
	// 5x and more on a quiet host (7-9x measured); the host's disk is
	// shared with the rest of the suite (benchmarks stream on other loop
	// devices over the same disk) and gave 2.6-3.1x then. 2x is still far
	// from what equal weights give (about 1x, also checked: at least twice
	// the equal-weight ratio).
	weightSplit(t, e, "blkio.bfq.weight_device", same, 3*time.Second, 2)
}

func TestRealV1ThrottleHolds(t *testing.T) {
	e := v1Env(t)
	testkit.SetScheduler(t, e.devName, "none")
	throttle(t, e, 20<<20, 3*time.Second, 0.15)
}

func TestRealV2BFQWeightSplit(t *testing.T) {
	e := v2Env(t)
	testkit.SetScheduler(t, e.devName, "bfq")
	weightSplit(t, e, "io.bfq.weight", same, 4*time.Second, 5)
}

func TestRealV2IOCostWeightSplit(t *testing.T) {
	e := v2Env(t)
	testkit.SetScheduler(t, e.devName, "none")
	enableIOCost(t, e)
	weightSplit(t, e, "io.weight", func(w Weight) uint64 { return uint64(w) / 10 }, 4*time.Second, 3)
}

func TestRealV2IOMaxHolds(t *testing.T) {
	e := v2Env(t)
	throttle(t, e, 4<<20, 3*time.Second, 0.15)
}

func TestRealV2StatAndPressure(t *testing.T) {
	e := v2Env(t)
	cg := e.child(t, "reader")
	got := runReaders(t, e, 2*time.Second, []reader{{cg, 0, e.size}})[0]
	assertCounted(t, "reader", got)
	c, err := e.h.Open(cg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.ReadPressure()
	testkit.Need(t, err == nil, "io.pressure of %s: %v (PSI off?)", cg, err)
	t.Logf("io.pressure after a 2 s capped read: %+v", p)
	if !p.HasFull {
		t.Errorf("cgroup io.pressure has no full line: %+v", p)
	}
	if p.Some.Total == 0 {
		t.Errorf("a reader stalled on a capped disk for 2 s yet some.total is 0")
	}
	hp, err := ReadHostPressure("/proc/pressure/io")
	if err != nil || hp.Some.Total < p.Some.Total {
		t.Errorf("host pressure %+v (%v) below the cgroup's %+v", hp, err, p)
	}
}

// enableIOCost turns iocost on for the test device with a fixed vrate and a
// linear model of half the VM disk's 100 MiB/s cap. iocost shapes only what
// it believes saturates the device: with the model equal to the cap, two
// queue-depth-1 readers at 1000 vs 10 split 64 vs 38 MiB/s (1.7x); with
// the model at half, 51 vs 2.7 MiB/s (18.5x). A real host calibrates
// io.cost.model to its disk (or sets latency targets in io.cost.qos).
func enableIOCost(t *testing.T, e realEnv) {
	t.Helper()
	qos := filepath.Join(e.h.Mount, "io.cost.qos")
	model := filepath.Join(e.h.Mount, "io.cost.model")
	_, err := os.Stat(qos)
	testkit.Need(t, err == nil, "iocost not built into this kernel (%s: %v)", qos, err)
	if err := os.WriteFile(model, []byte(fmt.Sprintf("%s ctrl=user model=linear rbps=52428800 rseqiops=12800 rrandiops=12800 wbps=52428800 wseqiops=12800 wrandiops=12800", e.dev)), 0); err != nil {
		t.Fatalf("set %s: %v", model, err)
	}
	if err := os.WriteFile(qos, []byte(e.dev.String()+" enable=1 ctrl=user rpct=0 rlat=0 wpct=0 wlat=0 min=100 max=100"), 0); err != nil {
		t.Fatalf("enable iocost in %s: %v", qos, err)
	}
	t.Cleanup(func() {
		os.WriteFile(qos, []byte(e.dev.String()+" enable=0"), 0)
		os.WriteFile(model, []byte(e.dev.String()+" ctrl=auto"), 0)
	})
}

// BenchmarkRealV1ReadIO measures one sensor read of a real v1 blkio cgroup:
// the kept descriptor re-read with pread (what the daemon does) against
// opening, reading and closing the files each time.
func BenchmarkRealV1ReadIO(b *testing.B) {
	testkit.NeedRoot(b)
	l, err := DetectLayout("/proc/self/mountinfo")
	if err != nil {
		b.Fatal(err)
	}
	m, ok := l.V1Controller("blkio")
	testkit.Need(b, ok, "cgroup v1 blkio hierarchy not mounted (layout %s)", l.Mode)
	h := Hierarchy{Version: 1, Mount: m.Mountpoint}
	rel := fmt.Sprintf("/ddiskqos-bench-%d", os.Getpid())
	if _, err := h.Create(rel); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Remove(rel) })
	b.Run("kept-fd", func(b *testing.B) {
		c, err := h.Open(rel)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.ReadIO(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open-read-close", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, err := h.Open(rel)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.ReadIO(); err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
	})
}

// TestRealV1AccountingNeedsEnabling shows why the daemon enables v1
// accounting per disk: on a brand-new disk the v1 byte counters stay at
// zero until a throttle rule has been written for it, even a no-op one,
// since Linux 6.9 (blk-throttle is set up lazily); before 6.9 they count
// from the start. The loop device is created for the test (LOOP_CTL_ADD at
// a free index), so no rule was ever written for it — by this test: any
// daemon that starts meanwhile enables accounting on every disk it sees,
// so `make test` runs it in its quiet step, alone (Makefile).
func TestRealV1AccountingNeedsEnabling(t *testing.T) {
	e := newV1Env(t, 64)
	lazy, release := kernelAtLeast(t, 6, 9)
	if l, err := e.h.ReadLimits("/", e.dev); err != nil || !l.IsZero() {
		t.Fatalf("the new device %s already has a root throttle rule: %+v, %v", e.dev, l, err)
	}
	cg := e.child(t, "r")
	rs := []reader{{cg, 0, e.size}}

	before := runReaders(t, e, 500*time.Millisecond, rs)[0]
	t.Logf("kernel %s, fresh disk %s, no throttle rule: read %d bytes, counters grew by %d", release, e.dev, before.res.Bytes, before.counted)
	if before.res.Bytes == 0 {
		t.Fatal("reader read nothing")
	}
	if lazy {
		if before.counted != 0 {
			t.Errorf("kernel %s: counters grew by %d before any throttle rule for %s; want 0", release, before.counted, e.dev)
		}
	} else {
		assertCounted(t, "before enabling (kernel before 6.9)", before)
	}
	if err := e.h.EnableV1Accounting(e.dev); err != nil {
		t.Fatal(err)
	}
	if err := e.h.EnableV1Accounting(e.dev); err != nil { // idempotent
		t.Fatal(err)
	}
	after := runReaders(t, e, 500*time.Millisecond, rs)[0]
	assertCounted(t, "after enabling", after)
	// The no-op rule limits nothing.
	if l, err := e.h.ReadLimits("/", e.dev); err != nil || !l.IsZero() {
		t.Fatalf("root limits on %s after enabling: %+v, %v", e.dev, l, err)
	}
}

// kernelAtLeast reports whether the running kernel is major.minor or later,
// and its release string.
func kernelAtLeast(t *testing.T, major, minor int) (bool, string) {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	release := unix.ByteSliceToString(u.Release[:])
	var ma, mi int
	if _, err := fmt.Sscanf(release, "%d.%d", &ma, &mi); err != nil {
		t.Fatalf("kernel release %q: %v", release, err)
	}
	return ma > major || ma == major && mi >= minor, release
}

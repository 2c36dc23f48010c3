package devhealth

// The lab: TestRealV2* run inside the test VM (make test-v2), whose second
// disk qemu throttles like a gp2 volume (vmrig.DefaultBurst): a burst of
// IOPSMax while its bucket lasts, then a floor of IOPS.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/vmrig"
)

// burstDisk finds the VM's burst disk and the throttling qemu applies to it.
func burstDisk(t *testing.T) (name string, b vmrig.BurstDisk) {
	t.Helper()
	if !testkit.InVM() {
		t.Skip("the burst-disk lab runs inside the test VM: make test-v2")
	}
	name, b, err := vmrig.FindBurstDisk(os.Getenv(vmrig.BurstEnv), "/sys/block")
	testkit.Need(t, err == nil, "burst disk: %v", err)
	return name, b
}

// readers keeps n O_DIRECT 4 KiB random readers on dev until stop, asking
// for rate reads per second together (each on a fixed schedule: one that
// falls behind keeps a request in flight).
func readers(t *testing.T, dev string, n int, rate float64) (stop func()) {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	size, err := f.Seek(0, 2)
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer unix.Munmap(buf)
			every := time.Duration(float64(n) / rate * float64(time.Second))
			next := time.Now().Add(time.Duration(i) * every / time.Duration(n))
			for !done.Load() {
				time.Sleep(time.Until(next))
				next = next.Add(every)
				off := rand.Int64N(size/4096) * 4096
				if _, err := f.ReadAt(buf, off); err != nil {
					t.Errorf("read %s at %d: %v", dev, off, err)
					return
				}
			}
		}()
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			done.Store(true)
			wg.Wait()
			f.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

type point struct {
	s         Sample
	free, mod Status // the detector alone; with the model
}

// TestRealV2BurstExhaustion drives the burst disk at full demand through
// its burst into its floor: the detector alone (no configuration) says
// exhausted within 10 s of the burst's end; the model, given qemu's
// figures, estimates the time to empty within 20 % over the last minute
// before it; once demand stops, the device is recovering.
func TestRealV2BurstExhaustion(t *testing.T) {
	name, b := burstDisk(t)
	model, err := Plain(Bucket{Baseline: float64(b.IOPS), Burst: float64(b.IOPSMax), Size: float64(b.IOPSMax * b.MaxLength)}, Bucket{})
	if err != nil {
		t.Fatal(err)
	}
	sf, err := cgroupfs.OpenBlockStat(filepath.Join("/sys/block", name, "stat"))
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	free, mod := NewTracker(Model{}), NewTracker(model)

	prev, err := sf.Read()
	if err != nil {
		t.Fatal(err)
	}
	last := time.Now()
	// Demand: half the burst rate, well above the floor (what a guest
	// under emulation on a loaded host sustains steadily).
	pace := float64(b.IOPSMax) / 2
	stop := readers(t, "/dev/"+name, 8, pace)
	var pts []point
	var firedAt time.Time
	// The burst lasts IOPSMax*MaxLength/(pace-IOPS) s; give it twice that.
	limit := 2 * time.Duration(float64(b.IOPSMax*b.MaxLength)/(pace-float64(b.IOPS))*float64(time.Second))
	t0 := last
	sample := func() point {
		time.Sleep(time.Until(last.Add(time.Second)))
		cur, err := sf.Read()
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		s := Delta(prev, cur, now, now.Sub(last).Seconds())
		prev, last = cur, now
		p := point{s: s}
		p.free, _ = free.Observe(s)
		p.mod, _ = mod.Observe(s)
		pts = append(pts, p)
		t.Logf("+%5.1fs %4.0f IOPS util %3.0f%% depth %4.1f | free %-9s | model %-9s balance %5.1f%% tte %6.1fs",
			now.Sub(t0).Seconds(), s.iops(), 100*s.util(), s.depth(), p.free.State, p.mod.State, 100*p.mod.Balance, p.mod.TimeToEmpty)
		return p
	}
	for time.Since(t0) < limit {
		p := sample()
		if firedAt.IsZero() && p.free.State == Exhausted {
			firedAt = p.s.At
			t.Logf("detector: %s", p.free.Reason)
		}
		if !firedAt.IsZero() && time.Since(firedAt) > 8*time.Second {
			break
		}
	}
	stop()
	if firedAt.IsZero() {
		t.Fatalf("no exhaustion detected in %v", limit)
	}
	for i := 0; i < 5; i++ {
		sample()
	}

	// Where the burst really ended: the samples split into a burst (rate
	// above the midpoint of burst and floor) and a floor; inside the sample
	// that straddles both, the end is interpolated from its rate.
	busy := pts[:len(pts)-5]
	rates := make([]float64, len(busy))
	for i, p := range busy {
		rates[i] = p.s.iops()
	}
	hi := slices.Max(rates)
	lo := median(rates[len(rates)-6:])
	mid := (hi + lo) / 2
	k := 0 // the first sample of the floor
	for i, r := range rates {
		if r >= mid {
			k = i + 1
		}
	}
	if k <= 2 || lo > float64(b.IOPS)*1.5 {
		t.Fatalf("no burst then floor in the series (burst peak %.0f, floor %.0f IOPS, qemu's %d/%d)", hi, lo, b.IOPSMax, b.IOPS)
	}
	burst := median(rates[1:k]) // the first sample may be partial
	if rates[k-1] < mid {
		t.Fatal("internal: straddle search")
	}
	sk := busy[k].s
	x := math.Max(0, math.Min(1, (rates[k]-lo)/(burst-lo)))
	emptyAt := sk.At.Add(-time.Duration((1 - x) * sk.Secs * float64(time.Second)))
	lag := firedAt.Sub(emptyAt)
	t.Logf("burst %.0f IOPS for %.1fs, floor %.0f IOPS (qemu: %d, %d for %ds); detected %.1fs after the burst ended",
		burst, emptyAt.Sub(t0).Seconds(), lo, b.IOPSMax, b.IOPS, b.MaxLength, lag.Seconds())
	if lag > 10*time.Second || lag < 0 {
		t.Errorf("exhaustion detected %.1fs after the burst ended, want within 0..10s", lag.Seconds())
	}

	// The model's time-to-empty over the last minute before the end:
	// within 20 % from 60 to 10 s before it; in the last 10 s, where the
	// guest's own jitter (a second of emulation stalled) is a larger
	// share, within 2 s.
	var worst, sum, worstAbs float64
	n := 0
	for _, p := range busy[:k] {
		left := emptyAt.Sub(p.s.At).Seconds()
		switch {
		case left > 60 || left < 1:
		case left >= 10:
			e := math.Abs(p.mod.TimeToEmpty-left) / left
			worst = math.Max(worst, e)
			sum += e
			n++
		default:
			worstAbs = math.Max(worstAbs, math.Abs(p.mod.TimeToEmpty-left))
		}
	}
	if n < 20 {
		t.Fatalf("only %d samples 10..60 s before the end: burst too short to judge", n)
	}
	t.Logf("time-to-empty: %d estimates 10..60 s before the end, mean error %.1f%%, worst %.1f%%; last 10 s worst %.1fs",
		n, 100*sum/float64(n), 100*worst, worstAbs)
	if worst > 0.2 || worstAbs > 2 {
		t.Errorf("time-to-empty off by up to %.1f%% (10..60 s before the end; want within 20%%) and %.1fs in the last 10 s (want within 2 s)",
			100*worst, worstAbs)
	}
	if st := mod.Status(); st.Balance > 0.05 {
		t.Errorf("model balance %.1f%% after the burst ended", 100*st.Balance)
	}
	if st := free.Status(); st.State != Recovering {
		t.Errorf("5 s after demand stopped: %s (%s), want recovering", st.State, st.Reason)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestRealV2StalledWriterDState: writers in a cgroup whose writes io.max
// holds to a trickle sit in D state; CountDState counts them, procs_blocked
// sees them host-wide, and an idle cgroup counts none.
func TestRealV2StalledWriterDState(t *testing.T) {
	name, _ := burstDisk(t)
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	h := cgroupfs.Hierarchy{Version: 2, Mount: l.Unified}
	devText, err := os.ReadFile(filepath.Join("/sys/block", name, "dev"))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cgroupfs.ParseDev(strings.TrimSpace(string(devText)))
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("ddq-dstate-%d", os.Getpid())
	testkit.Cgroup(t, filepath.Join(h.Mount, base))
	for _, c := range []string{"stalled", "idle"} {
		testkit.Cgroup(t, filepath.Join(h.Mount, base, c))
	}
	if err := os.WriteFile(filepath.Join(h.Mount, base, "cgroup.subtree_control"), []byte("+io"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.SetLimits(base+"/stalled", dev, cgroupfs.Limits{WIOps: 2}); err != nil { // 2: the kernel's least
		t.Fatal(err)
	}
	start := func(cg string, argv ...string) {
		fd, err := os.Open(filepath.Join(h.Mount, base, cg))
		if err != nil {
			t.Fatal(err)
		}
		defer fd.Close()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fd.Fd())}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %v in %s: %v", argv, cg, err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	const writers = 3
	for i := 0; i < writers; i++ {
		start("stalled", "dd", "if=/dev/zero", "of=/dev/"+name, "bs=4k", "count=100000", "oflag=direct",
			fmt.Sprintf("seek=%d", 1000*i))
	}
	start("idle", "sleep", "600")
	stalled, err := h.Open(base + "/stalled")
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	idle, err := h.Open(base + "/idle")
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	time.Sleep(2 * time.Second)
	var maxD, maxBlocked int
	var buf []byte
	procStat, err := cgroupfs.OpenProcStat("/proc")
	if err != nil {
		t.Fatal(err)
	}
	defer procStat.Close()
	for i := 0; i < 20; i++ {
		tc, b, err := stalled.CountDState("/proc", 64, buf)
		buf = b
		if err != nil {
			t.Fatal(err)
		}
		if tc.Seen < writers || tc.D > tc.Seen {
			t.Fatalf("stalled cgroup: %+v, want %d tasks seen", tc, writers)
		}
		maxD = max(maxD, tc.D)
		it, _, err := idle.CountDState("/proc", 64, nil)
		if err != nil || it.D != 0 || it.Seen != 1 {
			t.Fatalf("idle cgroup: %+v %v, want 1 task, none in D", it, err)
		}
		pb, err := procStat.ProcsBlocked()
		if err != nil {
			t.Fatal(err)
		}
		maxBlocked = max(maxBlocked, int(pb))
		time.Sleep(100 * time.Millisecond)
	}
	p, err := stalled.ReadPressure()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stalled cgroup: up to %d of %d writers in D; procs_blocked up to %d; io.pressure some avg10 %.1f%% full avg10 %.1f%%",
		maxD, writers, maxBlocked, p.Some.Avg10, p.Full.Avg10)
	if maxD < writers-1 {
		t.Errorf("at most %d of %d stalled writers seen in D state", maxD, writers)
	}
	if maxBlocked < maxD {
		t.Errorf("procs_blocked at most %d, below the %d D tasks counted in one cgroup", maxBlocked, maxD)
	}
	if p.Some.Total == 0 {
		t.Error("stalled cgroup has no io.pressure")
	}
}

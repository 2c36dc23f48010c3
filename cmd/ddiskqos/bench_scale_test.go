package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/bench/scale"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
	"golang.org/x/sys/unix"
)

// envRunAsMain makes this test binary the ddiskqos command (TestMain runs
// it on the arguments), for tests in the VM, which cannot build one.
const envRunAsMain = "DDISKQOS_TEST_RUN_AS_MAIN"

// TestMain lets the bench's load generators re-execute this test binary
// as `ddiskqos workload` (DDISKQOS_WORKLOAD_MAIN=1), and makes it ddiskqos
// itself when run under that name or with envRunAsMain.
func TestMain(m *testing.M) {
	code := testkit.Run(m, workload.MaybeRunFromEnv, runAsMainFromEnv)
	if binDir != "" {
		os.RemoveAll(binDir) // see buildBinary
	}
	os.Exit(code)
}

// runAsMainFromEnv runs ddiskqos on the arguments and exits, when the test
// binary runs under that name (asMain, run_docker_v2_real_test.go) or with
// envRunAsMain.
func runAsMainFromEnv() {
	if os.Getenv(envRunAsMain) == "1" || filepath.Base(os.Args[0]) == asMain {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
}

// benchScale runs `ddiskqos bench scale` with args plus --json and a short
// window, and checks that it ran and reported numbers (not how fast).
func benchScale(t *testing.T, n int, args ...string) scale.Result {
	t.Helper()
	testkit.NeedRoot(t)
	t.Setenv(workload.EnvMain, "1") // the readers are this binary
	out := filepath.Join(t.TempDir(), "scale.json")
	args = append([]string{"--workloads", strconv.Itoa(n), "--duration", "3s", "--warmup", "1s", "--json", "--out", out}, args...)
	var stdout, stderr bytes.Buffer
	if code := runBenchScale(args, &stdout, &stderr); code != 0 {
		t.Fatalf("bench scale %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
	}
	var res scale.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("result: %v: %s", err, stdout.String())
	}
	file, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(file, stdout.Bytes()) {
		t.Fatalf("--out file differs from stdout (%v)", err)
	}
	if res.Workloads != n || res.Ticks < 2 || res.CPUPerTickMS.Mean <= 0 || res.WallPerTickMS.Mean <= 0 ||
		res.RSSMiB <= 0 || res.FirstScan.WallMS <= 0 || res.MetricsPlain.Status != 200 || res.MetricsGzip.Status != 200 ||
		res.Series < n {
		t.Fatalf("bench scale reported too little: %+v", res)
	}
	// Figures checked against what the test measures itself: the
	// ticks the window's length allows, and this process's own peak RSS
	// (the bench runs the daemon in-process), which bounds the reported one.
	iv, err1 := time.ParseDuration(res.Interval)
	win, err2 := time.ParseDuration(res.Duration)
	if err1 != nil || err2 != nil || iv <= 0 {
		t.Fatalf("interval %q, duration %q: %v %v", res.Interval, res.Duration, err1, err2)
	}
	if want := int(win / iv); res.Ticks < want/2 || res.Ticks > want+2 {
		t.Errorf("%d ticks in a %s window at %s, want about %d", res.Ticks, win, iv, want)
	}
	if hwm := vmHWMMiB(t); res.RSSPeakMiB > hwm+1 || res.RSSMiB > res.RSSPeakMiB+1 {
		t.Errorf("RSS %.1f MiB, peak %.1f MiB reported; this process's VmHWM is %.1f MiB", res.RSSMiB, res.RSSPeakMiB, hwm)
	}
	if res.ReadsPerTick < float64(res.IOWorkloads) {
		t.Errorf("%.0f counter reads per tick, fewer than the %d workloads doing I/O", res.ReadsPerTick, res.IOWorkloads)
	}
	if res.Churn.Removed != n/10 || res.Churn.Added != n/10 || res.Churn.WallMS <= 0 {
		t.Fatalf("churn: %+v", res.Churn)
	}
	// Everything it made is gone.
	mount := res.Hierarchy
	ents, _ := os.ReadDir(mount)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "ddiskqos-bench-scale-") {
			t.Errorf("left behind: %s/%s", mount, e.Name())
		}
	}
	// The device's number may already be another one's (loopdev hands
	// out free indexes, and other tests make loop devices meanwhile): it
	// is left over only if it still reads the bench's own file.
	if b, _ := os.ReadFile("/sys/block/" + res.Device + "/loop/backing_file"); strings.Contains(string(b), "ddiskqos-bench-scale-") {
		t.Errorf("loop device %s still attached to %s", res.Device, b)
	}
	t.Logf("%d workloads on %s: %.2f ms CPU/tick, %.0f reads/tick, RSS %.1f MiB, first scan %.0f ms, /metrics %.0f ms",
		n, res.Cgroup, res.CPUPerTickMS.Mean, res.ReadsPerTick, res.RSSMiB, res.FirstScan.WallMS, res.MetricsPlain.WallMS)
	return res
}

// TestRealBenchScale is `ddiskqos bench scale --workloads 1000` on this
// host's I/O hierarchy (cgroup v1 here), ten of them reading.
func TestRealBenchScale(t *testing.T) {
	res := benchScale(t, 1000)
	if res.IOWorkloads != 10 {
		t.Errorf("io workloads %d, want 10", res.IOWorkloads)
	}
}

// Settings of TestRealV2ScaleVersusV1 for docs/bench/scale-vm.sh, which
// runs it at the sizes with the bench's full window: the sizes
// (blank- or comma-separated), the bench's flags instead of the test's
// short ones, and whether to print each run's report to stdout as a line
// "scale-vm-result scale-vm-vV-N.json JSON".
const (
	envScaleVMSizes   = "DDISKQOS_SCALE_VM_SIZES"
	envScaleFlags     = "DDISKQOS_SCALE_FLAGS"
	envScaleVMResults = "DDISKQOS_SCALE_VM_RESULTS"
)

// TestRealV2ScaleVersusV1 is `ddiskqos bench scale` at 1,000 cgroups on
// cgroup v2 and then on cgroup v1 blkio mounted inside the same test VM
// (same boot, kernel and emulated CPU), so that v2 ÷ v1 cancels the
// emulation. Each run must complete with every figure benchScale checks
// (the first full scan tracking all N workloads, the ticks its window
// allows, CPU per tick, counters read, churn, /metrics, nothing left
// behind); CPU per tick v2 ÷ v1 is logged,
// not judged: under emulation on a shared 2-core host it moved 2–5× with
// the host's load (docs/bench/scale.md).
func TestRealV2ScaleVersusV1(t *testing.T) {
	testkit.VMOnly(t)
	testkit.NeedRoot(t)
	sizes := []int{1000}
	if s := os.Getenv(envScaleVMSizes); s != "" {
		sizes = nil
		for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 {
				t.Fatalf("%s=%q: %q is not a number of cgroups", envScaleVMSizes, s, f)
			}
			sizes = append(sizes, n)
		}
	}
	// One reader per 1,000 cgroups: under emulation 10 reader processes
	// take the VM's two vCPUs, and the daemon is what is measured.
	flags := []string{"--duration", "10s", "--warmup", "3s", "--io-fraction", "0.001", "--scratch", os.TempDir()}
	if s := os.Getenv(envScaleFlags); s != "" {
		flags = strings.Fields(s)
	}
	for _, n := range sizes {
		var v2, v1 scale.Result
		for _, version := range []string{"v2", "v1"} {
			t.Run(fmt.Sprintf("%s-%d", version, n), func(t *testing.T) {
				start := time.Now()
				if version == "v1" {
					ioToV1Blkio(t)
				}
				res := benchScale(t, n, flags...)
				if res.Cgroup != version {
					t.Fatalf("bench ran on cgroup %s (%s), want %s", res.Cgroup, res.Hierarchy, version)
				}
				if res.CPUPerTickMS.P95 <= 0 || res.IOWorkloads < 1 {
					t.Fatalf("CPU per tick %+v, %d workloads doing I/O", res.CPUPerTickMS, res.IOWorkloads)
				}
				t.Logf("%s at %d: %d ticks, CPU per tick mean %.1f ms (user %.1f, sys %.1f), p95 %.1f ms; in %s",
					version, n, res.Ticks, res.CPUPerTickMS.Mean, res.UserPerTickMS, res.SysPerTickMS, res.CPUPerTickMS.P95,
					time.Since(start).Round(time.Second))
				if version == "v2" {
					v2 = res
				} else {
					v1 = res
				}
				if os.Getenv(envScaleVMResults) == "1" {
					js, err := json.Marshal(res)
					if err != nil {
						t.Fatal(err)
					}
					fmt.Printf("scale-vm-result scale-vm-%s-%d.json %s\n", version, n, js)
				}
			})
		}
		if v2.Ticks > 0 && v1.Ticks > 0 {
			t.Logf("%d cgroups, CPU per tick v2 ÷ v1: mean %.0f / %.0f ms = %.2f×, p95 %.0f / %.0f ms = %.2f× (reported, not judged)",
				n, v2.CPUPerTickMS.Mean, v1.CPUPerTickMS.Mean, v2.CPUPerTickMS.Mean/v1.CPUPerTickMS.Mean,
				v2.CPUPerTickMS.P95, v1.CPUPerTickMS.P95, v2.CPUPerTickMS.P95/v1.CPUPerTickMS.P95)
		}
	}
}

// v1BlkioMount is where ioToV1Blkio mounts the v1 blkio hierarchy.
const v1BlkioMount = "/run/blkio-v1"

// ioToV1Blkio moves the io controller from cgroup2 to a v1 blkio hierarchy
// mounted at v1BlkioMount, which the bench then finds as the I/O
// hierarchy (a mounted v1 blkio wins, cgroupfs.Layout.IOHierarchy); the
// test's cleanup unmounts it and gives io back to cgroup2. The VM boots
// with io enabled in the root's cgroup.subtree_control (test/vm/init) and
// no other cgroup holding it once the tests before have removed theirs.
func ioToV1Blkio(t *testing.T) {
	t.Helper()
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Need(t, l.Unified != "" && len(l.V1) == 0, "a pure cgroup-v2 VM (layout %s)", l.Mode)
	ctl := filepath.Join(l.Unified, "cgroup.subtree_control")
	if err := os.WriteFile(ctl, []byte("-io"), 0); err != nil {
		t.Fatalf("take io off %s: %v (cgroups that enable io for their children: %v)", ctl, err, holdingIO(l.Unified))
	}
	mounted := false
	t.Cleanup(func() { giveIOBack(t, ctl, mounted) })
	if err := os.MkdirAll(v1BlkioMount, 0o755); err != nil {
		t.Fatal(err)
	}
	// The io controller leaves cgroup2 once no cgroup holds it (dying
	// ones are released asynchronously).
	if err := retryFor(time.Minute, func() error { return unix.Mount("blkio", v1BlkioMount, "cgroup", 0, "blkio") }); err != nil {
		b, _ := os.ReadFile(ctl)
		t.Fatalf("mount -t cgroup -o blkio at %s: %v for a minute; %s: %q", v1BlkioMount, err, ctl, strings.TrimSpace(string(b)))
	}
	mounted = true
}

// giveIOBack undoes ioToV1Blkio: it unmounts the v1 blkio hierarchy
// (when mounted) and enables io in cgroup2's root again.
//
// A v1 hierarchy is destroyed at its unmount only if its root has no
// children then, dying ones included (cgroup_kill_sb: "If @root doesn't
// have any children, start killing it"); unmounted earlier, it lives on
// with nobody to unmount it again, and io stays bound to it. The bench's
// 1,000 cgroups are released one by one by the kernel's workers, which
// under software emulation takes from seconds to minutes (a CI run of
// stop 31 unmounted too early, and every VM test after it found no io in
// cgroup2). So it waits for the hierarchy's count of cgroups to fall to 1
// (its root) before the unmount, dropping the page cache every 10 s
// meanwhile (this runs in the test VM only: a dying cgroup may be pinned
// by pages or writeback structures charged to it), and gives up once the
// count has stood still for a minute (or after ten). Should the hierarchy
// still outlive its unmount, mounting it again and unmounting it childless
// destroys it.
func giveIOBack(t *testing.T, ctl string, mounted bool) {
	start := time.Now()
	if mounted {
		dropped, drops := time.Now(), 0
		n, err := untilStalled(time.Minute, 10*time.Minute, func() error {
			if n := blkioCgroups(); n > 1 {
				if time.Since(dropped) > 10*time.Second {
					unix.Sync()
					_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
					dropped, drops = time.Now(), drops+1
				}
				return fmt.Errorf("%d cgroups", n)
			}
			return nil
		}, blkioCgroups)
		if drops > 0 {
			t.Logf("dropped the page cache %d times while waiting for the v1 hierarchy's cgroups to go", drops)
		}
		if err != nil {
			t.Errorf("the v1 blkio hierarchy at %s still counts %d cgroups after %v (want 1, its root): unmounting it now leaves it alive", v1BlkioMount, n, time.Since(start).Round(time.Second))
		}
		if err := unix.Unmount(v1BlkioMount, 0); err != nil {
			t.Errorf("unmount %s: %v", v1BlkioMount, err)
		}
	}
	enable := func() error { return os.WriteFile(ctl, []byte("+io"), 0) }
	err := retryFor(10*time.Second, enable)
	if err != nil && mounted && blkioCgroups() == 1 {
		t.Logf("io not back in cgroup2 10 s after the unmount (%v), the hierarchy alive and childless: mounting and unmounting it again", err)
		if err = unix.Mount("blkio", v1BlkioMount, "cgroup", 0, "blkio"); err == nil {
			if err = unix.Unmount(v1BlkioMount, 0); err == nil {
				err = retryFor(30*time.Second, enable)
			}
		}
	}
	if err != nil {
		t.Errorf("give io back to cgroup2: write +io to %s: %v (after %v; the v1 blkio hierarchy counts %d cgroups)", ctl, err, time.Since(start).Round(time.Second), blkioCgroups())
		return
	}
	t.Logf("io back in cgroup2 after %v", time.Since(start).Round(time.Second))
}

// holdingIO lists the cgroups under root whose cgroup.subtree_control
// enables io: while one does, the root cannot give io up.
func holdingIO(root string) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == root {
			return nil
		}
		if b, err := os.ReadFile(filepath.Join(p, "cgroup.subtree_control")); err == nil && slices.Contains(strings.Fields(string(b)), "io") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// untilStalled calls fn every second until it succeeds, and returns its
// last error once progress (a count that falls while work is done; -1:
// unknown) has not fallen for stall, or max has passed; n is the last
// count.
func untilStalled(stall, max time.Duration, fn func() error, progress func() int) (n int, err error) {
	start, moved := time.Now(), time.Now()
	n = progress()
	for {
		if err = fn(); err == nil {
			return n, nil
		}
		now := time.Now()
		if now.Sub(moved) > stall || now.Sub(start) > max {
			return n, err
		}
		time.Sleep(time.Second)
		if m := progress(); m >= 0 && (n < 0 || m < n) {
			n, moved = m, time.Now()
		}
	}
}

// blkioCgroups is the number of cgroups of the blkio controller's
// hierarchy, dying ones included (/proc/cgroups), or -1.
func blkioCgroups() int {
	b, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] == "blkio" {
			if n, err := strconv.Atoi(f[2]); err == nil {
				return n
			}
		}
	}
	return -1
}

// retryFor calls fn every second until it succeeds or d has passed, and
// returns its last error.
func retryFor(d time.Duration, fn func() error) error {
	_, err := untilStalled(d, d, fn, func() int { return -1 })
	return err
}

func TestBenchScaleUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{},
		{"--workloads", "0"},
		{"--workloads", "10", "--io-fraction", "2"},
		{"--workloads", "10", "--duration", "1s", "--interval", "1s"},
		{"--workloads", "10", "extra"},
		{"--bogus"},
	} {
		var stdout, stderr bytes.Buffer
		if code := runBenchScale(args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, code, stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := runBenchScale([]string{"--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "--workloads N") {
		t.Errorf("--help: exit %d: %s", code, stdout.String())
	}
}

// vmHWMMiB is this process's peak resident set size from /proc/self/status.
func vmHWMMiB(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" && f[2] == "kB" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", l, err)
			}
			return kb / 1024
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

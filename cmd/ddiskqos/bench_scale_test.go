package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/bench/scale"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
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

// TestRealV2BenchScale is the same inside the cgroup-v2 test VM.
func TestRealV2BenchScale(t *testing.T) {
	if !testkit.InVM() {
		t.Skip("cgroup v2 tests run inside the test VM: make test-v2")
	}
	res := benchScale(t, 1000, "--scratch", os.TempDir())
	if res.Cgroup != "v2" {
		t.Errorf("cgroup %s in the VM, want v2", res.Cgroup)
	}
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

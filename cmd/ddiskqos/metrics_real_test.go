package main

// The daemon's /metrics as Prometheus and Grafana see it: the real binary
// on real cgroups and a real loop device, its output checked by promtool
// (Debian package prometheus), and the Grafana dashboard in deploy/grafana
// checked against the metric names it really exports.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/metrics"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// dashboardPath lists the metric names the Grafana dashboard
// (deploy/grafana/ddiskqos.json) queries; see dashboardMetrics.
const dashboardPath = "../../deploy/grafana/metrics.txt"

// v2OnlyFamilies are exported only where the kernel has per-cgroup PSI
// (cgroup v2): the host test cannot see them, the VM can.
var v2OnlyFamilies = []string{
	"ddiskqos_workload_pressure_io_stalled_seconds_total",
	"ddiskqos_workload_pressure_io_waiting_seconds_total",
}

// TestRealMetricsPromtoolAndDashboard starts the daemon on a loop device
// whose scheduler is none (the throttle mechanism) with a bulk stream at
// level 4 and a paced reader above it, so that per-workload (the bulk
// stream's cap too), per-device (throughput, caps, the disk's own
// counters), host PSI, error and level-change series are all
// there; and a second daemon whose Docker engine is unreachable, for the
// source's series. promtool must find nothing in either output, and every
// metric the dashboard queries must be among those exported.
func TestRealMetricsPromtoolAndDashboard(t *testing.T) {
	r := newRunRig(t) // skips in the VM
	testkit.SetScheduler(t, r.loop.Name, "none")
	metricsPromtoolAndDashboard(t, r)
}

// TestRealV2MetricsPromtoolAndDashboard is the same inside the cgroup-v2
// test VM, on its test disk, where the per-workload PSI series exist too.
// The daemon and the workloads are this test binary (see TestMain): the
// VM has no Go toolchain to build one.
func TestRealV2MetricsPromtoolAndDashboard(t *testing.T) {
	testkit.VMOnly(t)
	testkit.NeedRoot(t)
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Need(t, l.Unified != "", "no cgroup2 (layout %s)", l.Mode)
	vd := testkit.VMDisk(t)
	disk, name, dev := vd.Path, vd.Name, cgroupfs.Dev{Major: vd.Major, Minor: vd.Minor}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The VM's init leaves the loopback interface down; the daemon's API
	// listens on 127.0.0.1. Up is harmless in the throwaway VM.
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set lo up: %v: %s", err, out)
	}
	t.Setenv(envRunAsMain, "1")
	r := &runRig{bin: self, addr: testkit.FreeAddr(t), state: filepath.Join(t.TempDir(), "state.json"),
		lock: filepath.Join(t.TempDir(), "ddiskqos.lock"), h: cgroupfs.Hierarchy{Version: 2, Mount: l.Unified},
		parent: fmt.Sprintf("/ddiskqos-test-metrics-%d", os.Getpid()),
		loop:   testkit.Loop{Name: name, Path: disk, Major: dev.Major, Minor: dev.Minor}, dev: dev}
	testkit.SetScheduler(t, name, "none")
	p, _ := r.h.Path(r.parent)
	testkit.Cgroup(t, p)
	if err := os.WriteFile(filepath.Join(p, "cgroup.subtree_control"), []byte("+io"), 0); err != nil {
		t.Fatal(err)
	}
	metricsPromtoolAndDashboard(t, r, v2OnlyFamilies...)
}

func metricsPromtoolAndDashboard(t *testing.T, r *runRig, wantToo ...string) {
	promtool, err := exec.LookPath("promtool")
	testkit.Need(t, err == nil, "promtool not found (Debian package prometheus)")
	_, err = os.Stat("/proc/pressure/io")
	testkit.Need(t, err == nil, "no /proc/pressure/io (kernel without PSI)")
	small, bulk := r.child(t, "small"), r.child(t, "bulk")
	d := r.start(t, "--boost-after", "10m")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The daemon's start can take long in the VM (software emulation) on
	// a busy host: wait for its API before timing the levels.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, err := r.snapshot(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the daemon's API never answered: %v", err)
		}
	}
	stream := startIn(t, ctx, r, bulk, "--direct", "--loop", "--duration", "90s", "read", r.loop.Path)
	r.waitLevel(t, "bulk", 4)
	reader := startIn(t, ctx, r, small, "--direct", "--iops", "100", "--bs", "4k", "--duration", "90s", "randread", r.loop.Path)

	want := []string{
		"ddiskqos_info", "ddiskqos_workload_level", "ddiskqos_workload_io_bytes_total",
		"ddiskqos_device_info", "ddiskqos_device_io_bytes_total", "ddiskqos_device_level_cap_bytes_per_second",
		"ddiskqos_device_capacity_bytes_per_second", "ddiskqos_workload_cap_bytes_per_second",
		"ddiskqos_device_disk_io_bytes_total", "ddiskqos_device_disk_io_time_seconds_total",
		"ddiskqos_host_pressure_io_waiting_seconds_total", "ddiskqos_scan_errors_total",
		"ddiskqos_level_changes_total", "ddiskqos_tick_duration_seconds", "ddiskqos_sense_workloads_total",
		"ddiskqos_build_info",
	}
	want = append(want, wantToo...)
	body := waitMetrics(t, r.addr, want, time.Minute)
	for _, p := range []*workload.Proc{stream, reader} {
		p.Stop()
		p.Wait()
	}
	// A second daemon, Docker-sourced with no engine to reach: degraded,
	// with ddiskqos_source_up 0. --dry-run: it writes nothing.
	r2 := &runRig{addr: testkit.FreeAddr(t), lock: filepath.Join(t.TempDir(), "ddiskqos.lock")}
	d2 := exec.Command(r.bin, "run", "--source", "docker", "--docker-host", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"),
		"--dry-run", "--interval", "100ms", "--listen", r2.addr, "--state-file", filepath.Join(t.TempDir(), "state.json"),
		"--devices", r.loop.Name)
	d2.Env = r2.env()
	var logs2 bytes.Buffer
	d2.Stderr = &logs2
	if err := d2.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d2.ProcessState == nil {
			d2.Process.Kill()
			d2.Wait()
		}
		if t.Failed() {
			t.Logf("docker-sourced daemon log:\n%s", logs2.String())
		}
	})
	body2 := waitMetrics(t, r2.addr, []string{"ddiskqos_source_up", "ddiskqos_source_errors_total"}, 2*time.Minute)
	stopWith(t, d2, syscall.SIGTERM)
	stopWith(t, d, syscall.SIGTERM)

	for name, b := range map[string][]byte{"cgroup-sourced": body, "docker-sourced": body2} {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(b)
		out, err := cmd.CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("promtool check metrics on the %s daemon's /metrics (%d bytes): %v\n%s", name, len(b), err, out)
		} else {
			t.Logf("promtool check metrics: %s daemon's /metrics (%d bytes) clean", name, len(b))
		}
	}

	exported := exportedNames(t, body)
	for n := range exportedNames(t, body2) {
		exported[n] = true
	}
	// Only the v2 families may be missing, and only off v2; they must
	// still be what the metrics package declares.
	declared := declaredNames()
	if !bytes.Contains(body, []byte(`cgroup_mode="v2"`)) {
		for _, n := range v2OnlyFamilies {
			if !declared[n] {
				t.Errorf("%s: not declared by internal/metrics", n)
			}
			exported[n] = true
		}
	}
	used := dashboardMetrics(t, dashboardPath)
	if len(used) == 0 {
		t.Fatal("the dashboard queries no metric")
	}
	for _, n := range used {
		if !exported[n] {
			t.Errorf("dashboard queries %s, which the daemon does not export", n)
		}
	}
	t.Logf("dashboard: %d metrics, all exported: %s", len(used), strings.Join(used, " "))
}

// startIn starts `ddiskqos workload args...` in cgroup cg and lets it go.
func startIn(t *testing.T, ctx context.Context, r *runRig, cg string, args ...string) *workload.Proc {
	t.Helper()
	p, err := workload.StartIn(ctx, r.bin, nil, append([]string{"workload", "--wait-stdin", "--json"}, args...),
		func(pid int) error { return r.h.AddProcess(cg, pid) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(); p.Wait() })
	return p
}

// waitMetrics scrapes http://addr/metrics until every family in want has a
// sample, and returns that scrape.
func waitMetrics(t *testing.T, addr string, want []string, within time.Duration) []byte {
	t.Helper()
	deadline := time.Now().Add(within)
	var missing []string
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusOK {
				have := exportedNames(t, b)
				missing = missing[:0]
				for _, n := range want {
					if !have[n] {
						missing = append(missing, n)
					}
				}
				if len(missing) == 0 {
					return b
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics of %s: after %s still no %v (last error %v)", addr, within, missing, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// exportedNames is every metric name a scrape holds samples of: each
// family's name, and for histograms and summaries the series names
// PromQL sees (_bucket, _sum, _count).
func exportedNames(t *testing.T, body []byte) map[string]bool {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	names := map[string]bool{}
	for name, mf := range mfs {
		if len(mf.GetMetric()) == 0 {
			continue
		}
		names[name] = true
		switch mf.GetType().String() {
		case "HISTOGRAM":
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case "SUMMARY":
			names[name+"_sum"], names[name+"_count"] = true, true
		}
	}
	return names
}

// declaredNames is the names of the descriptors the metrics package's
// snapshot collector declares.
func declaredNames() map[string]bool {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		metrics.NewCollector(nil).Describe(ch)
		close(ch)
	}()
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range ch {
		if m := re.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	return names
}

// dashboardMetrics returns the metric names the Grafana dashboard queries,
// from deploy/grafana/metrics.txt: Prometheus's PromQL parser extracts
// them in deploy/grafana's own module (its test fails while that file
// differs from the dashboard), which keeps github.com/prometheus/prometheus
// out of this module.
func dashboardMetrics(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			names = append(names, l)
		}
	}
	return names
}

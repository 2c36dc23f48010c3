package daemon

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devhealth"
	"github.com/ddiskqos/ddiskqos/internal/health"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestHealthStage runs the loop over a fake sys, proc and cgroup tree: a
// device that bursts then sits on a floor while busy is logged and
// published as exhausted (the model says the same), a workload that did
// I/O has its tasks in D counted, and the host's blocked tasks are read.
// A model for a device the daemon does not act on is refused.
func TestHealthStage(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mount, sys, proc := filepath.Join(root, "cg"), filepath.Join(root, "sys"), filepath.Join(root, "proc")
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ioStat := func(n int) {
		write(filepath.Join(mount, "c", "io.stat"), fmt.Sprintf("7:0 rbytes=%d wbytes=0 rios=%d wios=0 dbytes=0 dios=0\n", n*4096, n))
	}
	ioStat(0)
	write(filepath.Join(mount, "c", "cgroup.threads"), "10\n11\n")
	write(filepath.Join(proc, "10", "stat"), "10 (dd) D 1 10")
	write(filepath.Join(proc, "11", "stat"), "11 (sh) S 1 11")
	write(filepath.Join(proc, "stat"), "cpu 1 2 3\nprocs_running 1\nprocs_blocked 5\n")
	var ios, ticks, queue int
	devStat := func() {
		write(filepath.Join(sys, "class", "block", "loop0", "stat"), fmt.Sprintf("%d 0 %d 0 0 0 0 0 8 %d %d\n", ios, ios*8, ticks, queue))
	}
	devStat()

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	model := devhealth.Model{Name: "plain", IOPS: devhealth.Bucket{Baseline: 40, Burst: 400, Size: 3600}}
	opts := Options{
		Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: mount}, Source: idleSource{}, Policy: policy.DefaultConfig(),
		Actuator: actuate.Config{DryRun: true, Devices: []actuate.Device{{Name: "loop0", Dev: cgroupfs.Dev{Major: 7}, Mech: host.MechBFQWeight}}},
		Interval: time.Second, Now: func() time.Time { return now }, NoFile: 1 << 20, Logger: log,
		Health: health.Options{SysRoot: sys, ProcRoot: proc, Models: map[string]devhealth.Model{"loop0": model}, DStateWorkloads: 4},
	}
	bad := opts
	bad.Health.Models = map[string]devhealth.Model{"sdz": model}
	if _, err := New(bad); err == nil || !strings.Contains(err.Error(), "sdz") {
		t.Errorf("model for a device not acted on: err %v, want one naming sdz", err)
	}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.closeHealth()
	d.started, d.noFile = now, 1<<20
	d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: "c", Name: "c", Cgroup: "/c"}})

	// 400 IOPS until the 3,600-credit bucket is empty (10 s), then 40,
	// 8 requests in flight throughout.
	n := 0
	for i := 0; i < 25; i++ {
		rate := 400
		if i >= 10 {
			rate = 40
		}
		ios += rate
		ticks += 1000
		queue += 8000
		n += 10
		devStat()
		ioStat(n)
		d.step()
		now = now.Add(time.Second)
	}
	s := d.Snapshot()
	h := s.Health
	if h == nil || len(h.Devices) != 1 {
		t.Fatalf("health %+v", h)
	}
	dh := h.Devices[0]
	if dh.State != "exhausted" || dh.Model == nil || dh.Model.Balance != 0 || dh.IOPS != 40 {
		t.Errorf("device health %+v (model %+v), want exhausted at 40 IOPS, balance 0", dh, dh.Model)
	}
	if len(h.Events) == 0 || h.Events[len(h.Events)-1].To != "exhausted" {
		t.Errorf("events %+v", h.Events)
	}
	if !strings.Contains(logs.String(), "device state change") || !strings.Contains(logs.String(), "to=exhausted") {
		t.Errorf("no state change logged:\n%s", logs.String())
	}
	if h.BlockedTasks == nil || *h.BlockedTasks != 5 {
		t.Errorf("blocked tasks %v, want 5", h.BlockedTasks)
	}
	if len(s.Workloads) != 1 || s.Workloads[0].DTasks != 1 || h.DStateSampled != 1 {
		t.Errorf("workload D tasks %+v, sampled %d; want 1 of 1", s.Workloads, h.DStateSampled)
	}
}

// TestHealthHoldStage runs the loop over a fake tree with the burst hold
// on: the
// device drains its bucket below half, the hold engages (logged, in the
// snapshot), the throttle's cap on the level-4 workload becomes the
// model's baseline; once the idle device has refilled its bucket past
// 60 % the hold is released and the cap lifted.
func TestHealthHoldStage(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mount, sys := filepath.Join(root, "cg"), filepath.Join(root, "sys")
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(mount, "c", "io.stat"), "")
	write(filepath.Join(mount, "c", "io.max"), "")
	var ios, ticks, queue int
	devStat := func() {
		write(filepath.Join(sys, "class", "block", "loop0", "stat"), fmt.Sprintf("%d 0 %d 0 0 0 0 0 8 %d %d\n", ios, ios*8, ticks, queue))
	}
	devStat()
	var logs testkit.SyncBuffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	model := devhealth.Model{Name: "plain", IOPS: devhealth.Bucket{Baseline: 40, Burst: 400, Size: 3600}}
	d, err := New(Options{
		Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: mount}, Source: idleSource{}, Policy: policy.DefaultConfig(),
		Actuator: actuate.Config{SysRoot: sys,
			Devices: []actuate.Device{{Name: "loop0", Dev: cgroupfs.Dev{Major: 7}, Mech: host.MechThrottle}}},
		StateFile: filepath.Join(root, "state.json"),
		Interval:  time.Second, Now: func() time.Time { return now }, NoFile: 1 << 20, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Health: health.Options{SysRoot: sys, Models: map[string]devhealth.Model{"loop0": model}, HoldBelow: 0.5, HoldFromLevel: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.closeHealth()
	defer d.act.RestoreAll()
	d.started, d.noFile = now, 1<<20
	d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: "c", Name: "c", Cgroup: "/c",
		Labels: map[string]string{policy.LabelLevel: "4"}}})
	tick := func(rate int) *snapshot.BurstHold {
		t.Helper()
		ios += rate
		ticks += 1000
		queue += 8000
		devStat()
		d.step()
		now = now.Add(time.Second)
		dh := d.Snapshot().Health.Devices[0]
		if dh.Hold == nil {
			t.Fatalf("device health %+v: no hold", dh)
		}
		return dh.Hold
	}
	// The cap the throttle's own loop (real time, every 10 ms) has
	// written, read back from io.max.
	capIs := func(want cgroupfs.Limits) {
		t.Helper()
		var got cgroupfs.Limits
		for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(10 * time.Millisecond) {
			if got, err = d.opts.Hierarchy.ReadLimits("/c", cgroupfs.Dev{Major: 7}); err == nil && got == want {
				return
			}
		}
		t.Fatalf("workload's io.max %+v (err %v), want %+v", got, err, want)
	}

	// 400 IOPS: 360 credits a second out of 3,600; below half after 5 s.
	var h *snapshot.BurstHold
	for i := 0; i < 4; i++ {
		if h = tick(400); h.Held {
			t.Fatalf("held after %d s: %+v", i+1, h)
		}
	}
	for i := 0; i < 3 && !h.Held; i++ {
		h = tick(400)
	}
	if !h.Held || h.CapIOPS != 40 || h.CapBps != 0 || h.FromLevel != 3 || !strings.Contains(h.Reason, "below 50%") {
		t.Fatalf("hold %+v, want held to 40 IOPS from level 3", h)
	}
	if !strings.Contains(logs.String(), "burst hold engaged") {
		t.Fatalf("engaging not logged:\n%s", logs.String())
	}
	capIs(cgroupfs.Limits{RIOps: 40, WIOps: 40})
	// One owner of the device's counters: the throttle (its loop runs)
	// and the health stage read them through one descriptor.
	if n := openOn(t, filepath.Join(sys, "class", "block", "loop0", "stat")); n != 1 {
		t.Errorf("%d descriptors open on the device's stat file, want 1 (the device sensor's)", n)
	}

	// Idle: 40 credits a second come back; from ~35 % to 60 % takes ~25 s
	// more than the 30 s the hold must last anyway.
	released := 0
	for i := 0; i < 120 && h.Held; i++ {
		h = tick(0)
		released = i + 1
	}
	if h.Held || !strings.Contains(logs.String(), "burst hold released") {
		t.Fatalf("hold %+v after %d idle seconds; log:\n%s", h, released, logs.String())
	}
	if released < 30 {
		t.Errorf("released after %d s, before the hold's 30 s", released)
	}
	capIs(cgroupfs.Limits{})
}

// openOn counts this process's descriptors open on path.
func openOn(t *testing.T, path string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && l == path {
			n++
		}
	}
	return n
}

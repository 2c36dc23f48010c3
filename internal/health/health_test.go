package health

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devhealth"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
)

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// devStat writes device name's stat file under sys: ios reads of 4 KiB,
// busy ticks ms, queue ms of time in queue.
func devStat(t *testing.T, sys, name string, ios, ticks, queue int) {
	t.Helper()
	write(t, filepath.Join(sys, "class", "block", name, "stat"), fmt.Sprintf("%d 0 %d 0 0 0 0 0 8 %d %d\n", ios, ios*8, ticks, queue))
}

// fakeTasks is a workload's tasks: d in D state, or err.
type fakeTasks struct {
	d     int
	err   error
	reads int
}

func (f *fakeTasks) CountDState(_ string, max int, buf []byte) (cgroupfs.TaskCount, []byte, error) {
	f.reads++
	if f.err != nil {
		return cgroupfs.TaskCount{}, buf, f.err
	}
	return cgroupfs.TaskCount{D: f.d, Seen: max}, buf, nil
}

// TestDStateRotates: with more candidates than the budget, the budget
// rotates: every candidate is read within a few ticks, each tick reads at
// most the budget. Mutation checked: counting seen only within the budget
// (the stride stuck at 1) reads the same first 4 of 10 every tick.
func TestDStateRotates(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	write(t, filepath.Join(proc, "stat"), "procs_blocked 0\n")
	s, err := New(Options{ProcRoot: proc, DStateWorkloads: 4}, Env{Hold: noHold, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ws := make([]*fakeTasks, 10)
	for i := range ws {
		ws[i] = &fakeTasks{d: 1}
	}
	for tick := range uint64(6) {
		s.TickStart(tick)
		before := 0
		for _, w := range ws {
			before += w.reads
		}
		for _, w := range ws {
			s.DState(w, true, 0)
		}
		after := 0
		for _, w := range ws {
			after += w.reads
		}
		if after-before > 4 {
			t.Fatalf("tick %d read %d workloads, budget 4", tick, after-before)
		}
	}
	for i, w := range ws {
		if w.reads == 0 {
			t.Errorf("candidate %d of 10 never read in 6 ticks at a budget of 4 (reads: %v)", i, reads(ws))
		}
	}
}

func reads(ws []*fakeTasks) []int {
	var r []int
	for _, w := range ws {
		r = append(r, w.reads)
	}
	return r
}

func noHold(cgroupfs.Dev, devhealth.Ceiling) error { return errors.New("no throttle") }

// TestDState: a workload is a candidate when it did I/O or had tasks in D
// when last looked at; candidates are read while the tick's budget lasts;
// a workload whose tasks cannot be read keeps its last count and costs no
// budget; without a procfs nothing is read. Snapshot says how many were
// read this tick, and the host's blocked tasks.
func TestDState(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	write(t, filepath.Join(proc, "stat"), "cpu 1 2 3\nprocs_running 1\nprocs_blocked 5\n")
	s, err := New(Options{ProcRoot: proc, DStateWorkloads: 2}, Env{Hold: noHold, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.TickStart(0)
	quiet, busy, gone, late := &fakeTasks{d: 3}, &fakeTasks{d: 1}, &fakeTasks{err: cgroupfs.ErrCgroupGone}, &fakeTasks{d: 2}
	if got := s.DState(quiet, false, 0); got != 0 || quiet.reads != 0 {
		t.Errorf("quiet workload with none in D: %d after %d reads, want 0 unread", got, quiet.reads)
	}
	if got := s.DState(gone, true, 4); got != 4 {
		t.Errorf("gone workload: %d, want its last 4", got)
	}
	if got := s.DState(quiet, false, 2); got != 3 {
		t.Errorf("quiet workload that had tasks in D: %d, want 3 read", got)
	}
	if got := s.DState(busy, true, 0); got != 1 {
		t.Errorf("busy workload: %d, want 1 read", got)
	}
	if got := s.DState(late, true, 7); got != 7 || late.reads != 0 {
		t.Errorf("over the budget: %d after %d reads, want its last 7 unread", got, late.reads)
	}
	if failed := s.Tick(time.Now()); failed != 0 {
		t.Errorf("%d device reads failed, no device watched", failed)
	}
	h := s.Snapshot()
	if h == nil || h.DStateSampled != 2 || h.BlockedTasks == nil || *h.BlockedTasks != 5 || len(h.Devices) != 0 {
		t.Fatalf("health %+v, want 2 sampled, 5 blocked, no device", h)
	}

	off, err := New(Options{DStateWorkloads: 2}, Env{Hold: noHold, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	off.TickStart(0)
	if got := off.DState(busy, true, 6); got != 6 {
		t.Errorf("no procfs: %d, want the last 6", got)
	}
	off.Tick(time.Now())
	if h := off.Snapshot(); h != nil {
		t.Errorf("no sensor on, health %+v; want none", h)
	}
}

// TestNewModels: a burst model for a device that is not actuated, or that
// has no counters, is refused naming it; a device without counters is
// logged and not watched.
func TestNewModels(t *testing.T) {
	t.Parallel()
	sys := t.TempDir()
	devStat(t, sys, "loop0", 0, 0, 0)
	sen, err := devsensor.Open(sys, "loop0", time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	defer sen.Close()
	model := devhealth.Model{Name: "plain", IOPS: devhealth.Bucket{Baseline: 40, Burst: 400, Size: 3600}}
	var logs bytes.Buffer
	env := Env{Hold: noHold, Log: slog.New(slog.NewTextHandler(&logs, nil)), Devices: []Device{
		{Name: "loop0", Dev: cgroupfs.Dev{Major: 7}, Sensor: sen},
		{Name: "loop1", Dev: cgroupfs.Dev{Major: 7, Minor: 1}},
	}}
	for _, name := range []string{"sdz", "loop1"} {
		_, err := New(Options{SysRoot: sys, Models: map[string]devhealth.Model{name: model}}, env)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("model for %s: err %v, want one naming it", name, err)
		}
	}
	s, err := New(Options{SysRoot: sys, Models: map[string]devhealth.Model{"loop0": model}}, env)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.Contains(logs.String(), "device health: no counters") || !strings.Contains(logs.String(), "device=loop1") {
		t.Errorf("a device without counters not logged:\n%s", logs.String())
	}
	s.Tick(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if h := s.Snapshot(); h == nil || len(h.Devices) != 1 || h.Devices[0].Name != "loop0" || h.Devices[0].Model == nil {
		t.Errorf("health %+v, want loop0 alone, modelled", h)
	}
}

// TestHold: a device whose actuator can hold it is asked once at New
// (the zero ceiling); when its modelled balance falls below the threshold
// the hold's ceiling (the model's baseline, from the configured level)
// goes to the actuator. One that cannot be held is logged, naming the
// actuator, and has no hold.
func TestHold(t *testing.T) {
	t.Parallel()
	sys := t.TempDir()
	model := devhealth.Model{Name: "plain", IOPS: devhealth.Bucket{Baseline: 40, Burst: 400, Size: 3600}}
	opts := Options{SysRoot: sys, Models: map[string]devhealth.Model{"loop0": model}, HoldBelow: 0.5, HoldFromLevel: 3}
	var ios, ticks, queue int
	devStat(t, sys, "loop0", ios, ticks, queue)
	sen, err := devsensor.Open(sys, "loop0", time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	defer sen.Close()
	dev := cgroupfs.Dev{Major: 7}
	var logs bytes.Buffer
	env := Env{Devices: []Device{{Name: "loop0", Dev: dev, Sensor: sen}}, Actuator: "docker",
		Log: slog.New(slog.NewTextHandler(&logs, nil))}

	env.Hold = noHold
	s, err := New(opts, env)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !strings.Contains(logs.String(), "its levels cannot be held") || !strings.Contains(logs.String(), "actuator=docker") {
		t.Errorf("a device that cannot be held not logged:\n%s", logs.String())
	}

	var calls []devhealth.Ceiling
	env.Hold = func(d cgroupfs.Dev, c devhealth.Ceiling) error {
		if d != dev {
			t.Errorf("hold on %v, want %v", d, dev)
		}
		calls = append(calls, c)
		return nil
	}
	if s, err = New(opts, env); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(calls) != 1 || calls[0] != (devhealth.Ceiling{}) {
		t.Fatalf("holds at New %+v, want the zero ceiling once", calls)
	}
	// 400 IOPS: 360 credits a second out of 3,600; below half after 5 s.
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 10 && len(calls) == 1; i++ {
		ios, ticks, queue = ios+400, ticks+1000, queue+8000
		devStat(t, sys, "loop0", ios, ticks, queue)
		if failed := s.Tick(now); failed != 0 {
			t.Fatalf("tick %d: %d reads failed", i, failed)
		}
		now = now.Add(time.Second)
	}
	if want := (devhealth.Ceiling{From: 3, IOPS: 40}); len(calls) != 2 || calls[1] != want {
		t.Fatalf("holds %+v, want the zero ceiling, then %+v", calls, want)
	}
	if h := s.Snapshot(); h == nil || len(h.Devices) != 1 || h.Devices[0].Hold == nil || !h.Devices[0].Hold.Held {
		t.Errorf("health %+v, want loop0 held", h)
	}
}

// TestProbe: a probe's file that cannot be opened is an error naming it;
// one that can is written by the probe, whose record is in the snapshot.
func TestProbe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := Env{Hold: noHold, Interval: time.Hour, Log: slog.New(slog.DiscardHandler)}
	bad := filepath.Join(dir, "none", "probe")
	if _, err := New(Options{ProbePath: bad}, env); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("probe of %s: err %v, want one naming it", bad, err)
	}
	path := filepath.Join(dir, "probe")
	s, err := New(Options{ProbePath: path}, env)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := s.Snapshot()
	if h == nil || h.Probe == nil || h.Probe.Path != path {
		t.Fatalf("health %+v, want the probe's record", h)
	}
}

package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source/cgroupdir"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/testkit/realcg"
	"github.com/ddiskqos/ddiskqos/internal/throttle"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

func TestMain(m *testing.M) { testkit.Main(m, workload.MaybeRunFromEnv) }

// rig is a real I/O hierarchy with a parent cgroup whose children the
// daemon manages, and a device with a weight mechanism.
type rig struct {
	h      cgroupfs.Hierarchy
	mode   string
	parent string
	dev    actuate.Device
	path   string    // device node
	kind   mech.Name // the weight mechanism the rig's tests read
}

func newRig(t *testing.T, sched string, m host.Mechanism) rig {
	t.Helper()
	rc := realcg.New(t, realcg.Options{LoopMiB: 512, Scheduler: sched})
	return rig{h: rc.H, mode: string(rc.Layout.Mode), parent: rc.Parent, path: rc.Disk.Path, kind: mech.BFQWeight,
		dev: actuate.Device{Name: rc.Disk.Name, Dev: rc.Dev, Mech: m}}
}

func (r rig) child(t *testing.T, name string) string {
	t.Helper()
	rel := r.parent + "/" + name
	p, _ := r.h.Path(rel)
	testkit.Cgroup(t, p)
	return rel
}

// weight reads the per-device weight of a cgroup, ok=false when none is set.
func (r rig) weight(t *testing.T, cg string) (uint64, bool) {
	t.Helper()
	return realcg.Weight(t, r.h, r.kind, r.dev.Dev, cg)
}

func (r rig) options(t *testing.T, stateFile string) Options {
	t.Helper()
	src, err := cgroupdir.New(cgroupdir.Options{Hierarchy: r.h, Parent: r.parent, Rescan: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	pc := policy.DefaultConfig()
	pc.BoostAfter = 3 * time.Second
	return Options{Hierarchy: r.h, CgroupMode: r.mode, Source: src, Policy: pc,
		Actuator: actuate.Config{Devices: []actuate.Device{r.dev}, Reassert: time.Minute},
		Interval: 100 * time.Millisecond, StateFile: stateFile, OrphanGrace: 300 * time.Millisecond}
}

// read runs one O_DIRECT read of n bytes in cgroup cg to completion.
func (r rig) read(t *testing.T, cg string, n int64, offset int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := workload.RunIn(ctx, os.Args[0], []string{workload.EnvMain + "=1"},
		[]string{"--wait-stdin", "--json", "--direct", "--bytes", fmt.Sprint(n), "--offset", fmt.Sprint(offset), "read", r.path},
		func(pid int) error { return r.h.AddProcess(cg, pid) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != n {
		t.Fatalf("read %d bytes, want %d", res.Bytes, n)
	}
}

// waitFor polls the daemon's snapshot until cond holds.
func waitFor(t *testing.T, d *Daemon, what string, cond func(*snapshot.Snapshot) bool) *snapshot.Snapshot {
	t.Helper()
	// Generous: under emulation on a loaded host a tick can take seconds;
	// the tests' claims are about levels and values, not about speed.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if s := d.Snapshot(); s != nil && cond(s) {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last snapshot: %s", what, describe(d.Snapshot()))
	return nil
}

// describe is a snapshot's workloads as a failure message wants them.
func describe(s *snapshot.Snapshot) string {
	if s == nil {
		return "none"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tick %s, %d workloads", s.At.Format("15:04:05.000"), len(s.Workloads))
	for _, w := range s.Workloads {
		fmt.Fprintf(&b, "; %s level %d read %d written %d", w.Name, w.Level, w.ReadBytes, w.WriteBytes)
	}
	return b.String()
}

func workloadNamed(s *snapshot.Snapshot, name string) (snapshot.Workload, bool) {
	for _, w := range s.Workloads {
		if w.Name == name {
			return *w, true
		}
	}
	return snapshot.Workload{}, false
}

func levelIs(name string, level int) func(*snapshot.Snapshot) bool {
	return func(s *snapshot.Snapshot) bool {
		w, ok := workloadNamed(s, name)
		return ok && w.Level == level
	}
}

// TestRealDaemonLevelsWeightsRestore is the controller's proof on a real
// kernel: v1 on the host, v2 in the test VM (TestRealV2Daemon... runs it).
func TestRealDaemonLevelsWeightsRestore(t *testing.T) {
	if testkit.InVM() {
		t.Skip("in the VM this runs as TestRealV2DaemonLevelsWeightsRestore")
	}
	daemonLevelsWeightsRestore(t)
}

func TestRealV2DaemonLevelsWeightsRestore(t *testing.T) {
	testkit.VMOnly(t)
	daemonLevelsWeightsRestore(t)
}

func daemonLevelsWeightsRestore(t *testing.T) {
	r := newRig(t, "bfq", host.MechBFQWeight)
	small, bulk := r.child(t, "small"), r.child(t, "bulk")
	native := realcg.Native(t, r.kind, 300)
	if err := mech.Write(r.h, r.kind, r.dev.Dev, small, strconv.FormatUint(native, 10)); err != nil {
		t.Fatal(err)
	}
	stateFile := filepath.Join(t.TempDir(), "state.json")
	d, err := New(r.options(t, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	waitFor(t, d, "both workloads at level 1", func(s *snapshot.Snapshot) bool {
		return levelIs("small", 1)(s) && levelIs("bulk", 1)(s)
	})
	if v, _ := r.weight(t, small); v != realcg.Native(t, r.kind, 1000) {
		t.Fatalf("level 1 weight of small = %d", v)
	}

	r.read(t, small, 3<<20, 0)
	// Level 2 and all of its 3 MiB counted: a tick may read the counters
	// while the read is still going (CI once saw level 2 at 2 MiB), and
	// the next one counts the rest.
	waitFor(t, d, "small at level 2 with its 3 MiB read", func(s *snapshot.Snapshot) bool {
		w, ok := workloadNamed(s, "small")
		return levelIs("small", 2)(s) && ok && w.ReadBytes >= 3<<20
	})
	if v, _ := r.weight(t, small); v != realcg.Native(t, r.kind, 500) {
		t.Fatalf("level 2 weight of small = %d, want %d", v, realcg.Native(t, r.kind, 500))
	}

	r.read(t, bulk, 200<<20, 64<<20)
	waitFor(t, d, "bulk at level 4", levelIs("bulk", 4))
	if v, _ := r.weight(t, bulk); v != realcg.Native(t, r.kind, 100) {
		t.Fatalf("level 4 weight of bulk = %d", v)
	}
	waitFor(t, d, "bulk boosted back to level 1", levelIs("bulk", 1))
	if v, _ := r.weight(t, bulk); v != realcg.Native(t, r.kind, 1000) {
		t.Fatalf("boosted weight of bulk = %d", v)
	}

	// Shutdown (what SIGTERM does): every original value is back.
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil // for the cleanup
	if v, ok := r.weight(t, small); !ok || v != native {
		t.Fatalf("after shutdown small weight = %d (set %v), want original %d", v, ok, native)
	}
	if v, ok := r.weight(t, bulk); ok {
		t.Fatalf("after shutdown bulk still has weight %d", v)
	}
}

// TestRealDaemonCrashRestart: a daemon that dies without restoring leaves
// its state file; the next one adopts the originals, keeps levels, and
// restores the originals on its own shutdown.
func TestRealDaemonCrashRestart(t *testing.T) {
	testkit.HostOnly(t)
	r := newRig(t, "bfq", host.MechBFQWeight)
	a, b := r.child(t, "a"), r.child(t, "b")
	native := realcg.Native(t, r.kind, 300)
	if err := mech.Write(r.h, r.kind, r.dev.Dev, a, strconv.FormatUint(native, 10)); err != nil {
		t.Fatal(err)
	}
	stateFile := filepath.Join(t.TempDir(), "state.json")
	d1, err := New(r.options(t, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	// Drive d1 by hand and abandon it without shutdown: a SIGKILL.
	srcCtx, stopSrc := context.WithCancel(context.Background())
	defer stopSrc()
	go d1.opts.Source.Run(srcCtx, d1.events)
	d1.started = time.Now()
	r.read(t, b, 12<<20, 0) // before tracking: not charged
	deadline := time.Now().Add(10 * time.Second)
	for len(d1.work) < 2 && time.Now().Before(deadline) {
		d1.step()
		time.Sleep(50 * time.Millisecond)
	}
	if len(d1.work) != 2 {
		t.Fatalf("d1 tracks %d workloads", len(d1.work))
	}
	r.read(t, b, 12<<20, 0) // after tracking: b drops to level 3
	d1.step()
	if w, _ := workloadNamed(d1.Snapshot(), "b"); w.Level != 3 {
		t.Fatalf("b level %d after 12 MiB, want 3", w.Level)
	}
	stopSrc()
	if v, _ := r.weight(t, a); v != realcg.Native(t, r.kind, 1000) {
		t.Fatalf("d1 did not apply: a weight %d", v)
	}
	if _, err := os.Stat(stateFile); err != nil {
		t.Fatalf("no state file after a tick with writes: %v", err)
	}

	// The restart.
	d2, err := New(r.options(t, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d2.Run(ctx) }()
	waitFor(t, d2, "b kept at level 3 across the restart", levelIs("b", 3))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, ok := r.weight(t, a); !ok || v != native {
		t.Fatalf("after restart+shutdown a weight = %d (set %v), want original %d", v, ok, native)
	}
	if v, ok := r.weight(t, b); ok {
		t.Fatalf("after restart+shutdown b still has weight %d", v)
	}
}

// TestRealDaemonThrottleWorkConserving: on a device whose scheduler honours
// no weights, a level-4 bulk reader is capped only while a level-1 reader
// is active, and uncapped as soon as it stops.
func TestRealDaemonThrottleWorkConserving(t *testing.T) {
	testkit.HostOnly(t)
	r := newRig(t, "none", host.MechThrottle)
	small, bulk := r.child(t, "small"), r.child(t, "bulk")
	opts := r.options(t, filepath.Join(t.TempDir(), "state.json"))
	opts.Policy.BoostAfter = time.Hour
	opts.Actuator.Throttle = throttle.Config{Shares: [4]float64{1, 0.6, 0.45, 0.3}, Min: 8 << 20, Hold: 500 * time.Millisecond}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, d, "both tracked", func(s *snapshot.Snapshot) bool { return len(s.Workloads) == 2 })

	limits := func() cgroupfs.Limits {
		l, err := r.h.ReadLimits(bulk, r.dev.Dev)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	waitLimits := func(what string, ok func(cgroupfs.Limits) bool) cgroupfs.Limits {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			if l := limits(); ok(l) {
				return l
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("bulk never %s; limits %+v, snapshot %+v", what, limits(), d.Snapshot())
		return cgroupfs.Limits{}
	}
	start := func(cg string, args ...string) *workload.Proc {
		p, err := workload.StartIn(ctx, os.Args[0], []string{workload.EnvMain + "=1"},
			append([]string{"--wait-stdin", "--json", "--direct"}, append(args, "read", r.path)...),
			func(pid int) error { return r.h.AddProcess(cg, pid) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Kill(); p.Wait() })
		return p
	}

	bulkProc := start(bulk, "--loop", "--offset", "64MiB", "--duration", "60s")
	waitFor(t, d, "bulk at level 4", levelIs("bulk", 4))
	time.Sleep(time.Second)
	if l := limits(); !l.IsZero() {
		t.Fatalf("bulk alone is capped: %+v (work conservation)", l)
	}
	// A small reader at 512 KiB/s stays at level 1 for several seconds.
	smallProc := start(small, "--bs", "64KiB", "--rate", "512KiB", "--duration", "3s", "--span", "32MiB")
	capped := waitLimits("capped while level 1 is active", func(l cgroupfs.Limits) bool { return l.RBps > 0 })
	s := d.Snapshot()
	if w, _ := workloadNamed(s, "small"); w.Level != 1 {
		t.Fatalf("small left level 1 (%d): the test's reader did too much", w.Level)
	}
	t.Logf("bulk capped at %.0f MiB/s while small reads (device at %.0f MiB/s this tick)", float64(capped.RBps)/(1<<20), s.Devices[0].ReadBps/(1<<20))
	if _, err := smallProc.Wait(); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	waitLimits("uncapped after the small reader stopped", func(l cgroupfs.Limits) bool { return l.IsZero() })
	t.Logf("bulk uncapped %s after the small reader stopped", time.Since(stoppedAt).Round(time.Millisecond))
	bulkProc.Stop()
	res, err := bulkProc.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bulk read %.0f MiB/s overall", res.BytesPerSec/(1<<20))
}

package actuate

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/testkit/realcg"
)

// weight is the BFQ weight of cgroup cg on the rig's disk; false when none
// is set for it.
func weight(t *testing.T, r *realcg.Rig, cg string) (uint64, bool) {
	t.Helper()
	return realcg.Weight(t, r.H, mech.BFQWeight, r.Dev, cg)
}

func TestRealV1ActuatorWeightsRestore(t *testing.T) {
	r := realcg.V1(t, realcg.Options{LoopMiB: 16, Scheduler: "bfq"})
	withOrig, bare := r.Child(t, "orig"), r.Child(t, "bare")
	if err := mech.Write(r.H, mech.BFQWeight, r.Dev, withOrig, "300"); err != nil {
		t.Fatal(err)
	}
	devs := []Device{{Name: r.Disk.Name, Dev: r.Dev, Mech: host.MechBFQWeight}}
	a, err := New(Config{Hierarchy: r.H, Devices: devs, Reassert: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	targets := []Target{
		{ID: "o", Cgroup: withOrig, Level: 2, Weight: 500},
		{ID: "b", Cgroup: bare, Level: 1, Weight: 1000},
	}
	if _, err := a.Apply(now, targets); err != nil {
		t.Fatal(err)
	}
	if v, _ := weight(t, r, withOrig); v != 500 {
		t.Fatalf("orig weight %d, want 500", v)
	}
	if v, _ := weight(t, r, bare); v != 1000 {
		t.Fatalf("bare weight %d, want 1000", v)
	}
	origs, changed := a.Originals()
	if !changed || len(origs) != 2 {
		t.Fatalf("originals %+v changed=%v", origs, changed)
	}

	// Someone else changes a value: not rewritten until Reassert passes.
	if err := mech.Write(r.H, mech.BFQWeight, r.Dev, withOrig, "700"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(now.Add(time.Second), targets); err != nil {
		t.Fatal(err)
	}
	if v, _ := weight(t, r, withOrig); v != 700 {
		t.Fatalf("unchanged level rewrote the weight early: %d", v)
	}
	if _, err := a.Apply(now.Add(2*time.Minute), targets); err != nil {
		t.Fatal(err)
	}
	if v, _ := weight(t, r, withOrig); v != 500 {
		t.Fatalf("after reassert weight %d, want 500", v)
	}

	// A crash: a new actuator adopts the saved originals, and restores the
	// orphaned one (its workload is not live any more).
	b, err := New(Config{Hierarchy: r.H, Devices: devs}, origs)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.RestoreOrphans(map[string]bool{bare: true}); err != nil {
		t.Fatal(err)
	}
	if v, _ := weight(t, r, withOrig); v != 300 {
		t.Fatalf("orphan restored to %d, want 300", v)
	}
	// The live one: adopted original survives a first write by the new
	// actuator, and Release puts "no per-device weight" back.
	if _, err := b.Apply(now, targets[1:]); err != nil {
		t.Fatal(err)
	}
	if err := b.Release("b"); err != nil {
		t.Fatal(err)
	}
	if v, ok := weight(t, r, bare); ok {
		t.Fatalf("bare still has weight %d after release", v)
	}
	if err := a.RestoreAll(); err != nil { // the old actuator: both again
		t.Fatal(err)
	}
	if v, _ := weight(t, r, withOrig); v != 300 {
		t.Fatalf("RestoreAll: %d, want 300", v)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "c")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "blkio.bfq.weight_device")
	if err := os.WriteFile(file, []byte("default 100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := cgroupfs.Hierarchy{Version: 1, Mount: root}
	a, err := New(Config{Hierarchy: h, DryRun: true, Devices: []Device{{Name: "loop0", Dev: cgroupfs.Dev{Major: 7}, Mech: host.MechBFQWeight}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(time.Unix(1, 0), []Target{{ID: "c", Cgroup: "/c", Level: 4, Weight: 100}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(file); string(got) != "default 100\n" {
		t.Fatalf("dry run wrote %q", got)
	}
	if ap := a.Applied("c"); len(ap) != 1 || ap[0].Weight != 100 {
		t.Fatalf("dry run should still report the decision: %+v", ap)
	}
	if o, _ := a.Originals(); len(o) != 0 {
		t.Fatalf("dry run recorded originals %+v", o)
	}
}

func TestGoneCgroupIsNotAnError(t *testing.T) {
	t.Parallel()
	h := cgroupfs.Hierarchy{Version: 1, Mount: t.TempDir()}
	a, err := New(Config{Hierarchy: h, Devices: []Device{{Name: "loop0", Dev: cgroupfs.Dev{Major: 7}, Mech: host.MechBFQWeight}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(time.Unix(1, 0), []Target{{ID: "x", Cgroup: "/gone", Level: 1, Weight: 1000}}); err != nil {
		t.Fatalf("vanished cgroup: %v", err)
	}
	if a.Applied("x") != nil {
		t.Fatal("vanished workload still tracked")
	}
	if _, err := New(Config{}, nil); err == nil {
		t.Fatal("config without a hierarchy accepted")
	}
	if _, err := New(Config{Hierarchy: h}, []Original{{Cgroup: "/a", Knob: "bfq", DevStr: "bad"}}); err == nil {
		t.Fatal("bad adopted original accepted")
	}
}

// TestHandle: a Target's Handle is filled by Apply and then answers
// Applied without the ID; a released workload's Handle is stale.
func TestHandle(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := cgroupfs.Hierarchy{Version: 1, Mount: root}
	a, err := New(Config{Hierarchy: h, DryRun: true, Devices: []Device{{Name: "loop0", Dev: cgroupfs.Dev{Major: 7}, Mech: host.MechBFQWeight}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var hd Handle
	if _, ok := hd.Applied(); ok {
		t.Fatal("zero handle answers")
	}
	for _, w := range []cgroupfs.Weight{1000, 100} {
		if _, err := a.Apply(time.Unix(1, 0), []Target{{ID: "c", Cgroup: "/c", Level: 1, Weight: w, Handle: &hd}}); err != nil {
			t.Fatal(err)
		}
		ap, ok := hd.Applied()
		if !ok || len(ap) != 1 || ap[0].Weight != w || &ap[0] != &a.Applied("c")[0] {
			t.Fatalf("handle: %+v %v, want weight %d as Applied(id) %+v", ap, ok, w, a.Applied("c"))
		}
	}
	if err := a.Release("c"); err != nil {
		t.Fatal(err)
	}
	if _, ok := hd.Applied(); ok {
		t.Fatal("handle of a released workload still answers")
	}
}

// TestAppliedKnobs: a per-level mechanism's value in force is in the
// workload's Applied as text (what the snapshot, status and top show),
// the same string while it stays, none at a level it does not cap.
func TestAppliedKnobs(t *testing.T) {
	t.Parallel()
	h := cgroupfs.Hierarchy{Version: 2, Mount: t.TempDir()}
	dev := Device{Name: "loop0", Dev: cgroupfs.Dev{Major: 7}, Mech: mech.BFQWeight, Also: []mech.Name{mech.LevelLimit}}
	a, err := New(Config{Hierarchy: h, DryRun: true, Devices: []Device{dev}, Params: mech.Params{LevelLimits: []uint64{0, 0, 0, 1 << 20}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(level int) Applied {
		t.Helper()
		if _, err := a.Apply(time.Unix(int64(level), 0), []Target{{ID: "c", Cgroup: "/c", Level: level, Weight: 100}}); err != nil {
			t.Fatal(err)
		}
		ap := a.Applied("c")
		if len(ap) != 1 {
			t.Fatalf("applied %+v", ap)
		}
		return ap[0]
	}
	const want = "level-limit=rbps=1048576 wbps=1048576 riops=max wiops=max"
	if ap := apply(4); ap.Knobs != want || ap.Weight != 100 {
		t.Fatalf("level 4: %+v, want knobs %q", ap, want)
	}
	if ap := apply(2); ap.Knobs != "" {
		t.Fatalf("level 2 is not capped: knobs %q", ap.Knobs)
	}
}

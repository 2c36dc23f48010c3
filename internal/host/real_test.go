package host

import (
	"context"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestRealLoopDevice runs on the real kernel: a new loop device starts on
// scheduler none (throttle only) and gets BFQ weights once bfq is selected.
func TestRealLoopDevice(t *testing.T) {
	testkit.NeedRoot(t)
	r := DefaultRoots()
	layout, err := Layout(r)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ProbeIOHierarchy(layout)
	testkit.Need(t, err == nil, "an I/O cgroup hierarchy: %v", err)
	loop := testkit.LoopDevice(t, 8)

	get := func() Device {
		t.Helper()
		ds, err := BlockDevices(r, h, mech.Params{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Name == loop.Name {
				return d
			}
		}
		t.Fatalf("%s not listed", loop.Name)
		return Device{}
	}
	// A loop device keeps its queue, and so its scheduler, across detach and
	// attach: start from none whatever an earlier user left.
	testkit.SetScheduler(t, loop.Name, "none")
	d := get()
	if d.Dev != loop.Dev() || !d.Target || !d.Backing || d.BackingFile != loop.File || d.Kind != "loop" {
		t.Errorf("%s: %+v", loop.Name, d)
	}
	if d.Scheduler != "none" || d.Mechanism != MechThrottle || d.WeightsEffective {
		t.Errorf("scheduler none: mechanism %s weights=%v, want throttle; reason %s", d.Mechanism, d.WeightsEffective, d.Reason)
	}
	if BuiltWithoutBFQ(DefaultRoots()) {
		// Nothing to switch to, nothing to load: no fix, and the reason
		// says so.
		if d.Fix != "" || !strings.Contains(d.Reason, "built without bfq") {
			t.Errorf("kernel without bfq: fix %q, reason %q; want no fix and the reason saying it", d.Fix, d.Reason)
		}
	} else if want := "echo bfq > /sys/block/" + loop.Name + "/queue/scheduler"; d.Fix != want {
		t.Errorf("fix %q, want %q", d.Fix, want)
	}

	testkit.SetScheduler(t, loop.Name, "bfq")
	d = get()
	if d.Scheduler != "bfq" || d.Mechanism != MechBFQWeight || !d.WeightsEffective {
		t.Errorf("scheduler bfq: %s %s weights=%v; reason %s; verified %s", d.Scheduler, d.Mechanism, d.WeightsEffective, d.Reason, d.Verified)
	}
	if h.Version == 1 && d.WeightDeviceFile != "blkio.bfq.weight_device" {
		t.Errorf("weight device file %q", d.WeightDeviceFile)
	}
	t.Logf("%s on bfq: %s (verified: %s)", loop.Name, d.Reason, d.Verified)

	// The probe's claim must hold: a child cgroup has the weight file.
	if h.Version == 1 {
		dir := testkit.Cgroup(t, h.Mount+"/ddiskqos-host-test")
		if !exists(dir + "/" + d.WeightFile) {
			t.Errorf("%s missing in a new child cgroup", d.WeightFile)
		}
	}
}

func TestRealGather(t *testing.T) {
	testkit.NeedRoot(t)
	f := Gather(context.Background(), DefaultRoots(), nil)
	if f.LayoutErr != nil || f.IOErr != nil || f.DevErr != nil {
		t.Fatalf("layout %v, io %v, devices %v", f.LayoutErr, f.IOErr, f.DevErr)
	}
	for _, s := range []Sysctl{f.PtyMax, f.ThreadsMax, f.PidMax, f.InotifyInstances, f.InotifyWatches} {
		if !s.Present || s.Value <= 0 {
			t.Errorf("%s: %+v", s.Name, s)
		}
	}
	if _, ok := FindLimit(f.Self, "Max open files"); !ok {
		t.Errorf("own limits: %v %+v", f.SelfErr, f.Self)
	}
	for _, c := range Evaluate(f) {
		if strings.HasPrefix(c.ID, "limits.") || strings.HasPrefix(c.ID, "psi.") {
			t.Logf("%-26s %-4s %s", c.ID, c.Status, c.Value)
		}
	}
}

package actuate

// The throttle beside a BFQ weight on one device, both through the
// actuator (the throttle's own real tests: internal/throttle).

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/testkit/realcg"
	"github.com/ddiskqos/ddiskqos/internal/throttle"
)

// TestRealV1BFQWeightsAndThrottle: on a BFQ device with the throttle in Device.Also,
// both mechanisms are in force: the level's BFQ weight is written at Apply,
// and the throttle caps the demoted stream while a level-1 cgroup reads
// and lifts the cap after; RestoreAll puts both knobs back.
func TestRealV1BFQWeightsAndThrottle(t *testing.T) {
	r := realcg.V1(t, realcg.Options{LoopMiB: 16, Scheduler: "bfq"})
	if err := r.H.EnableV1Accounting(r.Dev); err != nil {
		t.Fatal(err)
	}
	hi, lo := r.Child(t, "hi"), r.Child(t, "lo")
	d := Device{Name: r.Disk.Name, Dev: r.Dev, Mech: host.MechBFQWeight, Also: []mech.Name{mech.Throttle}}
	if got := d.Mechanisms(); got != "bfq-weight+throttle" {
		t.Fatalf("Mechanisms() = %q", got)
	}
	a, err := New(Config{Hierarchy: r.H, Devices: []Device{d}, SysRoot: "/sys",
		Throttle: throttle.Config{Shares: throttle.DefaultShares(), Min: 1 << 20}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			a.RestoreAll()
		}
	})
	targets := []Target{{ID: "hi", Cgroup: hi, Level: 1, Weight: 1000}, {ID: "lo", Cgroup: lo, Level: 4, Weight: 100}}
	if _, err := a.Apply(time.Now(), targets); err != nil {
		t.Fatal(err)
	}
	if v, _ := weight(t, r, lo); v != 100 {
		t.Fatalf("lo bfq weight %d, want 100", v)
	}
	if v, _ := weight(t, r, hi); v != 1000 {
		t.Fatalf("hi bfq weight %d, want 1000", v)
	}
	limits := func() cgroupfs.Limits {
		l, err := r.H.ReadLimits(lo, r.Dev)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dev := "/dev/" + r.Disk.Name
	r.StreamIn(t, ctx, lo)
	time.Sleep(3 * throttle.DefaultHold)
	if l := limits(); !l.IsZero() {
		t.Fatalf("lo capped %+v with nobody better doing I/O", l)
	}
	// A level-1 reader that keeps reading (the single-read case is
	// TestRealV1ThrottleFastLoop's, on none) until the cap is seen.
	rctx, rcancel := context.WithCancel(ctx)
	rd := r.InCgroup(t, rctx, hi, fmt.Sprintf("if=%s bs=4k iflag=direct count=1000000 skip=1000", dev))
	testkit.WaitFor(t, time.Second, "lo capped on BFQ while a level-1 cgroup reads", func() bool { return !limits().IsZero() })
	rcancel()
	rd.Wait()
	if _, err := a.Apply(time.Now(), targets); err != nil {
		t.Fatal(err)
	}
	ap := a.Applied("lo")
	if len(ap) != 1 || ap[0].Weight != 100 || ap[0].Err != nil {
		t.Fatalf("Applied(lo) = %+v, want weight 100 and no error", ap)
	}
	testkit.WaitFor(t, time.Second, "lo uncapped on BFQ after the reader stopped", func() bool { return limits().IsZero() })
	o, _ := a.Originals()
	knobs := map[string]int{}
	for _, x := range o {
		knobs[x.Knob]++
	}
	if knobs["bfq"] != 2 || knobs["throttle"] != 1 {
		t.Fatalf("originals %+v: want both weights and lo's throttle", o)
	}
	cancel()
	restored = true
	if err := a.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	if v, ok := weight(t, r, lo); ok {
		t.Fatalf("lo bfq weight %d after RestoreAll, want none", v)
	}
	if l := limits(); !l.IsZero() {
		t.Fatalf("lo limits %+v after RestoreAll", l)
	}
}

package actuate

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate/mech"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
)

// inCgroup starts dd with the given arguments inside cgroup rel: a shell
// moves itself into the cgroup and then becomes dd, so every request of dd
// is charged there.
func (r v1Rig) inCgroup(t *testing.T, ctx context.Context, rel string, ddArgs string) *exec.Cmd {
	t.Helper()
	dir, err := r.h.Path(rel)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf("echo $$ > %s/cgroup.procs && exec dd %s of=/dev/null status=none", dir, ddArgs))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

// shIn runs the shell script in cgroup rel until ctx ends (or the script
// does): the shell moves itself into the cgroup first, so every child it
// starts is charged there.
func (r v1Rig) shIn(t *testing.T, ctx context.Context, rel, script string) {
	t.Helper()
	dir, err := r.h.Path(rel)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf("echo $$ > %s/cgroup.procs && %s", dir, script))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
}

// streamIn keeps a 1 MiB O_DIRECT reader of the whole device running in
// cgroup rel until ctx ends (one dd reads the small test device in a few
// milliseconds: a stream is dd over and over).
func (r v1Rig) streamIn(t *testing.T, ctx context.Context, rel string) {
	t.Helper()
	r.shIn(t, ctx, rel, fmt.Sprintf("while :; do dd if=/dev/%s of=/dev/null bs=1M iflag=direct status=none || exit 1; done", r.loop.Name))
}

// lightIn keeps a light reader running in cgroup rel until ctx ends: one
// 4 KiB O_DIRECT read at block skip, then a 10 ms pause, over and over
// (under 100 reads/s, ≤ 400 KB/s: a web service's or a health check's
// pace).
func (r v1Rig) lightIn(t *testing.T, ctx context.Context, rel string, skip int) {
	t.Helper()
	r.shIn(t, ctx, rel, fmt.Sprintf("while :; do dd if=/dev/%s of=/dev/null bs=4k count=1 skip=%d iflag=direct status=none || exit 1; sleep 0.01; done",
		r.loop.Name, skip))
}

// waitFor polls cond every millisecond for up to limit and returns how long
// it took, failing the test with what when it did not come true.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// TestRealV1ThrottleFastLoop: on a real v1 cgroup tree and a brand-new loop
// device with scheduler none, a demoted stream runs uncapped while nobody
// better does I/O; one 4 KiB read by a level-1 cgroup puts its cap on
// within the fast loop's next periods (counted in loop steps, not
// wall-clock); the cap comes off within a second after the reader stops;
// and a stream demoted right after a boost does not cap itself with its own
// level-1 past.
func TestRealV1ThrottleFastLoop(t *testing.T) {
	r := newV1Rig(t, "none")
	if err := r.h.EnableV1Accounting(r.dev); err != nil {
		t.Fatal(err)
	}
	hi, lo := r.child(t, "hi"), r.child(t, "lo")
	devs := []Device{{Name: r.loop.Name, Dev: r.dev, Mech: host.MechThrottle}}
	a, err := New(Config{Hierarchy: r.h, Devices: devs, SysRoot: "/sys",
		Throttle: Throttle{Shares: [4]float64{1, 0.6, 0.45, 0.3}, Min: 1 << 20}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.RestoreAll(); err != nil {
			t.Error(err)
		}
	})
	th := a.devs[0].thr
	limits := func(cg string) cgroupfs.Limits {
		l, err := r.h.ReadLimits(cg, r.dev)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	apply := func(hiLevel, loLevel int) {
		if _, err := a.Apply(time.Now(), []Target{
			{ID: "hi", Cgroup: hi, Level: hiLevel, Weight: 1000},
			{ID: "lo", Cgroup: lo, Level: loLevel, Weight: 100},
		}); err != nil {
			t.Fatal(err)
		}
	}
	apply(1, 4)
	if o, _ := a.Originals(); len(o) != 1 || o[0].Cgroup != lo || o[0].Knob != "throttle" {
		t.Fatalf("originals %+v: want lo's throttle recorded before the fast loop may write it", o)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dev := "/dev/" + r.loop.Name
	r.streamIn(t, ctx, lo)
	// Alone, the stream is not capped, and the device's capacity is learnt.
	time.Sleep(3 * DefaultThrottleHold)
	if got := limits(lo); !got.IsZero() {
		t.Fatalf("lo capped %+v with nobody better doing I/O", got)
	}
	steps := func() uint64 { th.mu.Lock(); defer th.mu.Unlock(); return th.steps }

	// One 4 KiB read by the level-1 cgroup.
	rd := r.inCgroup(t, ctx, hi, fmt.Sprintf("if=%s bs=4k iflag=direct count=1 skip=1000", dev))
	if err := rd.Wait(); err != nil {
		t.Fatalf("level-1 read: %v", err)
	}
	s0 := steps()
	took := waitFor(t, time.Second, "lo capped after the level-1 read", func() bool { return !limits(lo).IsZero() })
	// The read is seen in the first period whose reads of the parents and
	// of the demoted stream were not split by one of the stream's
	// requests (throttle.step): most periods, but a fast stream on a
	// busy host (a CI rehearsal, 2026-11-27: a loop device streaming
	// ~2.5 GB/s beside other test packages) took 8. The bound is what
	// matters to a victim: the cap within one Hold of fast-loop periods,
	// well before the daemon's tick.
	n := steps() - s0
	if hold := uint64(DefaultThrottleHold / DefaultThrottlePeriod); n > hold {
		t.Fatalf("cap came %d fast-loop steps after the read, want within %d (one hold)", n, hold)
	}
	t.Logf("cap came %d fast-loop step(s) after the read", n)
	th.mu.Lock()
	capBps, capIOPS := th.cap.bps, th.cap.iops
	th.mu.Unlock()
	got := limits(lo)
	want := uint64(0.3 * capBps)
	if got.RBps < want*9/10 || got.RBps > want*11/10 || got.RIOps == 0 {
		t.Fatalf("lo limits %+v: want rbps ≈ 0.3 × capacity %.0f B/s (%d) and an IOPS cap (capacity %.0f IOPS)",
			got, capBps, want, capIOPS)
	}
	t.Logf("capped %s after the read completed; capacity %.0f MiB/s %.0f IOPS; lo %+v", took, capBps/(1<<20), capIOPS, got)
	if th.TopActive() != 1 {
		t.Fatalf("TopActive %d while capped, want 1", th.TopActive())
	}
	if ap := a.Applied("lo"); len(ap) != 1 {
		t.Fatalf("Applied(lo) = %+v", ap)
	}
	// What the fast loop keeps open counts against the daemon's budget:
	// lo's counters, its parent, the device's stat file.
	th.mu.Lock()
	loFiles := th.members[lo].cg.KeptFiles()
	th.mu.Unlock()
	if n := a.OpenFiles(); loFiles < 1 || n != loFiles+2 {
		t.Fatalf("OpenFiles() = %d while lo is demoted, want lo's %d + its parent + the device's stat", n, loFiles)
	}

	// The reader is gone: the cap comes off within a second.
	lifted := waitFor(t, time.Second, "lo uncapped after the reader stopped", func() bool { return limits(lo).IsZero() })
	t.Logf("uncapped %s after the cap was seen", lifted)

	// A boost: lo at level 1 for a tick (its stream is a better level's
	// I/O then), then demoted again. It must not cap itself.
	apply(1, 1)
	time.Sleep(3 * DefaultThrottlePeriod)
	apply(1, 4)
	deadline := time.Now().Add(3 * DefaultThrottleHold)
	for time.Now().Before(deadline) {
		if l := limits(lo); !l.IsZero() {
			t.Fatalf("lo capped %+v after a boost with nobody else doing I/O", l)
		}
		time.Sleep(2 * time.Millisecond)
	}
	// Right after the boost, a level-1 read caps it again, and the cap
	// comes off within a second of that read.
	rd = r.inCgroup(t, ctx, hi, fmt.Sprintf("if=%s bs=4k iflag=direct count=1 skip=2000", dev))
	if err := rd.Wait(); err != nil {
		t.Fatalf("level-1 read after the boost: %v", err)
	}
	s0 = steps()
	waitFor(t, time.Second, "lo capped after the boost and a level-1 read", func() bool { return !limits(lo).IsZero() })
	if n := steps() - s0; n > 3 {
		t.Fatalf("after the boost, the cap came %d fast-loop steps after the read, want within 3", n)
	}
	lifted = waitFor(t, time.Second, "lo uncapped after the boost's reader stopped", func() bool { return limits(lo).IsZero() })
	t.Logf("after the boost: uncapped %s after the cap was seen", lifted)

	// Release restores the original (no limits) and the fast loop leaves
	// the cgroup alone from then on.
	if err := a.Release("lo"); err != nil {
		t.Fatal(err)
	}
	if got := limits(lo); !got.IsZero() {
		t.Fatalf("lo limits %+v after release", got)
	}
	if n := a.OpenFiles(); n > 2 {
		t.Fatalf("OpenFiles() = %d after lo's release, want lo's descriptors closed", n)
	}
}

// TestRealV1BFQWeightsAndThrottle: on a BFQ device with the throttle in Device.Also,
// both mechanisms are in force: the level's BFQ weight is written at Apply,
// and the throttle caps the demoted stream while a level-1 cgroup reads
// and lifts the cap after; RestoreAll puts both knobs back.
func TestRealV1BFQWeightsAndThrottle(t *testing.T) {
	r := newV1Rig(t, "bfq")
	if err := r.h.EnableV1Accounting(r.dev); err != nil {
		t.Fatal(err)
	}
	hi, lo := r.child(t, "hi"), r.child(t, "lo")
	d := Device{Name: r.loop.Name, Dev: r.dev, Mech: host.MechBFQWeight, Also: []mech.Name{mech.Throttle}}
	if got := d.Mechanisms(); got != "bfq-weight+throttle" {
		t.Fatalf("Mechanisms() = %q", got)
	}
	a, err := New(Config{Hierarchy: r.h, Devices: []Device{d}, SysRoot: "/sys",
		Throttle: Throttle{Shares: DefaultThrottleShares(), Min: 1 << 20}}, nil)
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
	if v, _ := r.weight(t, lo); v != 100 {
		t.Fatalf("lo bfq weight %d, want 100", v)
	}
	if v, _ := r.weight(t, hi); v != 1000 {
		t.Fatalf("hi bfq weight %d, want 1000", v)
	}
	limits := func() cgroupfs.Limits {
		l, err := r.h.ReadLimits(lo, r.dev)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dev := "/dev/" + r.loop.Name
	r.streamIn(t, ctx, lo)
	time.Sleep(3 * DefaultThrottleHold)
	if l := limits(); !l.IsZero() {
		t.Fatalf("lo capped %+v with nobody better doing I/O", l)
	}
	// A level-1 reader that keeps reading (the single-read case is
	// TestRealV1ThrottleFastLoop's, on none) until the cap is seen.
	rctx, rcancel := context.WithCancel(ctx)
	rd := r.inCgroup(t, rctx, hi, fmt.Sprintf("if=%s bs=4k iflag=direct count=1000000 skip=1000", dev))
	waitFor(t, time.Second, "lo capped on BFQ while a level-1 cgroup reads", func() bool { return !limits().IsZero() })
	rcancel()
	rd.Wait()
	if _, err := a.Apply(time.Now(), targets); err != nil {
		t.Fatal(err)
	}
	ap := a.Applied("lo")
	if len(ap) != 1 || ap[0].Weight != 100 || ap[0].Err != nil {
		t.Fatalf("Applied(lo) = %+v, want weight 100 and no error", ap)
	}
	waitFor(t, time.Second, "lo uncapped on BFQ after the reader stopped", func() bool { return limits().IsZero() })
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
	if v, ok := r.weight(t, lo); ok {
		t.Fatalf("lo bfq weight %d after RestoreAll, want none", v)
	}
	if l := limits(); !l.IsZero() {
		t.Fatalf("lo limits %+v after RestoreAll", l)
	}
}

// TestRealV1ThrottleCapacityBesideReader: on a loop device, a demoted
// stream alone teaches the throttle the device's capacity; then a level-1
// reader keeps the device busy for 5 s while the stream is capped. What
// the device delivers meanwhile is what the caps let through, not what it
// can do: the capacity must stay (bound: at least half of what the stream
// alone measured, generous for a loaded host) instead of sliding period
// after period with the caps.
func TestRealV1ThrottleCapacityBesideReader(t *testing.T) {
	r := newV1Rig(t, "none")
	if err := r.h.EnableV1Accounting(r.dev); err != nil {
		t.Fatal(err)
	}
	hi, lo := r.child(t, "hi"), r.child(t, "lo")
	a, err := New(Config{Hierarchy: r.h, SysRoot: "/sys",
		Devices:  []Device{{Name: r.loop.Name, Dev: r.dev, Mech: host.MechThrottle}},
		Throttle: Throttle{Shares: DefaultThrottleShares(), Min: 1 << 20}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.RestoreAll(); err != nil {
			t.Error(err)
		}
	})
	if _, err := a.Apply(time.Now(), []Target{{ID: "hi", Cgroup: hi, Level: 1, Weight: 1000},
		{ID: "lo", Cgroup: lo, Level: 4, Weight: 100}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dev := "/dev/" + r.loop.Name
	// loopIn runs dd over and over in cgroup rel until ctx ends.
	loopIn := func(rel, ddArgs string) {
		dir, err := r.h.Path(rel)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf(
			"echo $$ > %s/cgroup.procs && while :; do dd if=%s of=/dev/null status=none %s || exit 1; done", dir, dev, ddArgs))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	capacity := func() float64 { bps, _ := a.devs[0].thr.Capacity(); return bps }
	limits := func(cg string) cgroupfs.Limits {
		l, err := r.h.ReadLimits(cg, r.dev)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	loopIn(lo, "bs=1M iflag=direct")
	time.Sleep(2 * time.Second)
	c0 := capacity()
	if c0 == 0 || !limits(lo).IsZero() {
		t.Fatalf("stream alone: capacity %.0f B/s, limits %+v; want a capacity and no cap", c0, limits(lo))
	}
	loopIn(hi, "bs=4k iflag=direct count=256")
	capped, lowest := 0, c0
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(50 * time.Millisecond) {
		if !limits(lo).IsZero() {
			capped++
		}
		lowest = min(lowest, capacity())
	}
	t.Logf("capacity %.0f MiB/s with the stream alone; lowest %.0f MiB/s over 5 s beside the reader (stream capped in %d of 100 looks)",
		c0/(1<<20), lowest/(1<<20), capped)
	if capped < 50 {
		t.Fatalf("the stream was capped in only %d of 100 looks while the level-1 reader read", capped)
	}
	if lowest < c0/2 {
		t.Errorf("capacity fell from %.0f to %.0f MiB/s while the device delivered what the caps let through", c0/(1<<20), lowest/(1<<20))
	}
}

// TestRealV1ThrottleCapsWhoMakesOthersWait (issue 20 item 2): on a real v1
// tree and a brand-new loop device with scheduler none, the throttle with
// the daemon's defaults (shares, 8 MiB/s floor, 5 ms burst bound), a
// level-4 streamer, a light level-2 reader and a light level-1 reader (one
// 4 KiB read every ~10 ms each). The streamer's cap appears in
// blkio.throttle.read_bps_device and stays while the readers read,
// re-armed period after period, and still limits it (re-arming a cap that
// stops limiting is the failure measured at 50 %); the light level-2
// reader never has a cap, looked at every millisecond for 3 s — it used
// to be capped to protect the level-1 reader, for being at level 2.
func TestRealV1ThrottleCapsWhoMakesOthersWait(t *testing.T) {
	r := newV1Rig(t, "none")
	if err := r.h.EnableV1Accounting(r.dev); err != nil {
		t.Fatal(err)
	}
	hi, light, lo := r.child(t, "hi"), r.child(t, "light"), r.child(t, "lo")
	a, err := New(Config{Hierarchy: r.h, SysRoot: "/sys",
		Devices:  []Device{{Name: r.loop.Name, Dev: r.dev, Mech: host.MechThrottle}},
		Throttle: Throttle{Shares: DefaultThrottleShares(), Min: 8 << 20, MaxBurst: DefaultThrottleBurst}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.RestoreAll(); err != nil {
			t.Error(err)
		}
	})
	if _, err := a.Apply(time.Now(), []Target{{ID: "hi", Cgroup: hi, Level: 1, Weight: 1000},
		{ID: "light", Cgroup: light, Level: 2, Weight: 500}, {ID: "lo", Cgroup: lo, Level: 4, Weight: 100}}); err != nil {
		t.Fatal(err)
	}
	th := a.devs[0].thr
	limits := func(cg string) cgroupfs.Limits {
		l, err := r.h.ReadLimits(cg, r.dev)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	loBytes := func() uint64 {
		cg, err := r.h.Open(lo)
		if err != nil {
			t.Fatal(err)
		}
		defer cg.Close()
		st, err := cg.ReadIO()
		if err != nil {
			t.Fatal(err)
		}
		return cgroupfs.DeviceIn(st.Devices, r.dev).RBytes
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.streamIn(t, ctx, lo)
	time.Sleep(3 * DefaultThrottleHold) // the capacity is learnt from the stream alone
	if l := limits(lo); !l.IsZero() {
		t.Fatalf("the streamer capped %+v with nobody better doing I/O", l)
	}
	capBps, _ := th.Capacity()
	if capBps == 0 {
		t.Fatal("no capacity learnt from the stream alone")
	}

	r.lightIn(t, ctx, light, 1000)
	r.lightIn(t, ctx, hi, 2000)
	waitFor(t, time.Second, "the streamer capped while the readers read", func() bool { return !limits(lo).IsZero() })
	rearms := func() uint64 { th.mu.Lock(); defer th.mu.Unlock(); return th.rearms }
	r0, b0, t0 := rearms(), loBytes(), time.Now()
	looks, capped := 0, 0
	var capIn cgroupfs.Limits
	for time.Since(t0) < 3*time.Second {
		if l := limits(light); !l.IsZero() {
			t.Fatalf("the light level-2 reader capped %+v (look %d) beside a level-1 reader and a streamer", l, looks)
		}
		if l := limits(lo); !l.IsZero() {
			capped++
			capIn = l
		}
		looks++
		time.Sleep(time.Millisecond)
	}
	secs, moved, n := time.Since(t0).Seconds(), loBytes()-b0, rearms()-r0
	th.mu.Lock()
	lightLoad, loLoad := th.members[light].load, th.members[lo].load
	th.mu.Unlock()
	t.Logf("capacity %.0f MiB/s; streamer capped in %d of %d looks at %+v, moved %.1f MiB/s; %d re-arms in %.1f s; "+
		"load: light %.2f MiB/s depth %.2f, streamer %.1f MiB/s depth %.2f",
		capBps/(1<<20), capped, looks, capIn, float64(moved)/secs/(1<<20), n, secs,
		lightLoad.rate/(1<<20), lightLoad.depth, loLoad.rate/(1<<20), loLoad.depth)
	// Most of the time, not all: on a loaded host (load 177) a reader's
	// dd can pause beyond the Hold, and the cap is rightly lifted then.
	if capped < looks/2 {
		t.Errorf("the streamer capped in only %d of %d looks while both readers read", capped, looks)
	}
	// The cap: 5 % of the capacity (5 ms of the 100 ms slice), at least
	// the 8 MiB/s floor.
	capEnd, _ := th.Capacity()
	want := max(uint64(0.05*capEnd), 8<<20)
	if capIn.RBps < want*9/10 || capIn.RBps > want*11/10 {
		t.Errorf("the streamer's cap %d B/s, want ≈ %d (5 %% of %.0f B/s, at least 8 MiB/s)", capIn.RBps, want, capEnd)
	}
	// One a period (10 ms), or as often as the request cap allows
	// rearmMinIOs; a fifth of that under load.
	every := max(0.01, rearmMinIOs/float64(max(capIn.RIOps, 1)))
	if capIn.RIOps == 0 {
		every = 0.01
	}
	if float64(n) < secs/every/5 {
		t.Errorf("%d re-arms in %.1f s of a capped active streamer, want one every %.0f ms (a fifth of that under load)", n, secs, 1000*every)
	}
	// Still limiting: uncapped, the stream moves ~20 times its cap.
	if limit := 3 * float64(capIn.RBps) * secs; float64(moved) > limit {
		t.Errorf("the capped streamer moved %.1f MiB in %.1f s, over 3× its cap (%.1f MiB): the re-armed cap does not limit",
			float64(moved)/(1<<20), secs, limit/(1<<20))
	}
}

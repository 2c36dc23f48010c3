package throttle

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/testkit/realcg"
)

// realThrottle is a throttle on a real device driven as the actuator
// drives it: apply hands it the workloads after a tick, each durable (the
// test's cgroups are new, their original is no limit, and nothing needs
// saving); release does what the actuator's Release does to a throttled
// workload (Forget, then the original put back through Knob), and at the
// test's end the throttle stops and every cgroup it was given gets its
// original back, as RestoreAll does.
type realThrottle struct {
	*Throttle
	cgs []string
}

func newRealThrottle(t *testing.T, cfg Config, h cgroupfs.Hierarchy, name string, dev cgroupfs.Dev) *realThrottle {
	t.Helper()
	r := &realThrottle{Throttle: New(cfg, Options{Hierarchy: h, Name: name, Dev: dev, SysRoot: "/sys"})}
	t.Cleanup(func() {
		r.Stop()
		for _, cg := range r.cgs {
			if err := r.Knob().Write(cg, ""); err != nil && !errors.Is(err, cgroupfs.ErrCgroupGone) {
				t.Error(err)
			}
		}
	})
	return r
}

// apply is an Apply of workloads at levels (cgroup, level, cgroup, level...).
func (r *realThrottle) apply(cgLevels ...any) {
	var ms []Member
	for i := 0; i+1 < len(cgLevels); i += 2 {
		cg := cgLevels[i].(string)
		ms = append(ms, Member{Cgroup: cg, Level: cgLevels[i+1].(int), Durable: true})
		if !slices.Contains(r.cgs, cg) {
			r.cgs = append(r.cgs, cg)
		}
	}
	r.Update(ms)
}

// release stops managing cg and puts its original (no limit) back.
func (r *realThrottle) release(cg string) error {
	r.Forget(cg)
	r.cgs = slices.DeleteFunc(r.cgs, func(c string) bool { return c == cg })
	return r.Knob().Write(cg, "")
}

// accountedV1 is a real v1 rig over a brand-new loop device of mib MiB on
// scheduler none, with the device's v1 I/O accounting on (the throttle's
// counters).
func accountedV1(t *testing.T, mib int) *realcg.Rig {
	t.Helper()
	r := realcg.V1(t, realcg.Options{LoopMiB: mib, Scheduler: "none"})
	if err := r.H.EnableV1Accounting(r.Dev); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRealV1ThrottleFastLoop: on a real v1 cgroup tree and a brand-new loop
// device with scheduler none, a demoted stream runs uncapped while nobody
// better does I/O; one 4 KiB read by a level-1 cgroup puts its cap on
// within the fast loop's next periods (counted in loop steps, not
// wall-clock); the cap comes off within a second after the reader stops;
// and a stream demoted right after a boost does not cap itself with its own
// level-1 past.
func TestRealV1ThrottleFastLoop(t *testing.T) {
	r := accountedV1(t, 16)
	hi, lo := r.Child(t, "hi"), r.Child(t, "lo")
	th := newRealThrottle(t, Config{Shares: [4]float64{1, 0.6, 0.45, 0.3}, Min: 1 << 20}, r.H, r.Disk.Name, r.Dev)
	limits := func(cg string) cgroupfs.Limits {
		l, err := r.H.ReadLimits(cg, r.Dev)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	apply := func(hiLevel, loLevel int) { th.apply(hi, hiLevel, lo, loLevel) }
	// (That the actuator records lo's original before the throttle may
	// write it: TestRealV1BFQWeightsAndThrottle, internal/actuate.)
	apply(1, 4)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dev := "/dev/" + r.Disk.Name
	r.StreamIn(t, ctx, lo)
	// Alone, the stream is not capped, and the device's capacity is learnt.
	time.Sleep(3 * DefaultHold)
	if got := limits(lo); !got.IsZero() {
		t.Fatalf("lo capped %+v with nobody better doing I/O", got)
	}
	steps := func() uint64 { th.mu.Lock(); defer th.mu.Unlock(); return th.steps }

	// One 4 KiB read by the level-1 cgroup.
	rd := r.InCgroup(t, ctx, hi, fmt.Sprintf("if=%s bs=4k iflag=direct count=1 skip=1000", dev))
	if err := rd.Wait(); err != nil {
		t.Fatalf("level-1 read: %v", err)
	}
	s0 := steps()
	took := testkit.WaitFor(t, time.Second, "lo capped after the level-1 read", func() bool { return !limits(lo).IsZero() })
	// The read is seen in the first period whose reads of the parents and
	// of the demoted stream were not split by one of the stream's
	// requests (throttle.step): most periods, but a fast stream on a
	// busy host (a CI rehearsal, 2026-11-27: a loop device streaming
	// ~2.5 GB/s beside other test packages) took 8. The bound is what
	// matters to a victim: the cap within one Hold of fast-loop periods,
	// well before the daemon's tick.
	n := steps() - s0
	if hold := uint64(DefaultHold / DefaultPeriod); n > hold {
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
	if l, err := th.InForce(lo); err != nil || l != got {
		t.Fatalf("InForce(lo) = %+v, %v; want %+v", l, err, got)
	}
	// What the fast loop keeps open counts against the daemon's budget:
	// lo's counters, its parent, the device's stat file.
	th.mu.Lock()
	loFiles := th.members[lo].cg.KeptFiles()
	th.mu.Unlock()
	if n := th.OpenFiles(); loFiles < 1 || n != loFiles+2 {
		t.Fatalf("OpenFiles() = %d while lo is demoted, want lo's %d + its parent + the device's stat", n, loFiles)
	}

	// The reader is gone: the cap comes off within a second.
	lifted := testkit.WaitFor(t, time.Second, "lo uncapped after the reader stopped", func() bool { return limits(lo).IsZero() })
	t.Logf("uncapped %s after the cap was seen", lifted)

	// A boost: lo at level 1 for a tick (its stream is a better level's
	// I/O then), then demoted again. It must not cap itself.
	apply(1, 1)
	time.Sleep(3 * DefaultPeriod)
	apply(1, 4)
	deadline := time.Now().Add(3 * DefaultHold)
	for time.Now().Before(deadline) {
		if l := limits(lo); !l.IsZero() {
			t.Fatalf("lo capped %+v after a boost with nobody else doing I/O", l)
		}
		time.Sleep(2 * time.Millisecond)
	}
	// Right after the boost, a level-1 read caps it again, and the cap
	// comes off within a second of that read.
	rd = r.InCgroup(t, ctx, hi, fmt.Sprintf("if=%s bs=4k iflag=direct count=1 skip=2000", dev))
	if err := rd.Wait(); err != nil {
		t.Fatalf("level-1 read after the boost: %v", err)
	}
	s0 = steps()
	testkit.WaitFor(t, time.Second, "lo capped after the boost and a level-1 read", func() bool { return !limits(lo).IsZero() })
	if n := steps() - s0; n > 3 {
		t.Fatalf("after the boost, the cap came %d fast-loop steps after the read, want within 3", n)
	}
	lifted = testkit.WaitFor(t, time.Second, "lo uncapped after the boost's reader stopped", func() bool { return limits(lo).IsZero() })
	t.Logf("after the boost: uncapped %s after the cap was seen", lifted)

	// Release restores the original (no limits) and the fast loop leaves
	// the cgroup alone from then on.
	if err := th.release(lo); err != nil {
		t.Fatal(err)
	}
	if got := limits(lo); !got.IsZero() {
		t.Fatalf("lo limits %+v after release", got)
	}
	if n := th.OpenFiles(); n > 2 {
		t.Fatalf("OpenFiles() = %d after lo's release, want lo's descriptors closed", n)
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
	r := accountedV1(t, 16)
	hi, lo := r.Child(t, "hi"), r.Child(t, "lo")
	th := newRealThrottle(t, Config{Shares: DefaultShares(), Min: 1 << 20}, r.H, r.Disk.Name, r.Dev)
	th.apply(hi, 1, lo, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dev := "/dev/" + r.Disk.Name
	// loopIn runs dd over and over in cgroup rel until ctx ends.
	loopIn := func(rel, ddArgs string) {
		dir, err := r.H.Path(rel)
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
	capacity := func() float64 { bps, _ := th.Capacity(); return bps }
	limits := func(cg string) cgroupfs.Limits {
		l, err := r.H.ReadLimits(cg, r.Dev)
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
	r := accountedV1(t, 16)
	hi, light, lo := r.Child(t, "hi"), r.Child(t, "light"), r.Child(t, "lo")
	th := newRealThrottle(t, Config{Shares: DefaultShares(), Min: 8 << 20, MaxBurst: DefaultBurst}, r.H, r.Disk.Name, r.Dev)
	th.apply(hi, 1, light, 2, lo, 4)
	limits := func(cg string) cgroupfs.Limits {
		l, err := r.H.ReadLimits(cg, r.Dev)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	loBytes := func() uint64 {
		cg, err := r.H.Open(lo)
		if err != nil {
			t.Fatal(err)
		}
		defer cg.Close()
		st, err := cg.ReadIO()
		if err != nil {
			t.Fatal(err)
		}
		return cgroupfs.DeviceIn(st.Devices, r.Dev).RBytes
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.StreamIn(t, ctx, lo)
	time.Sleep(3 * DefaultHold) // the capacity is learnt from the stream alone
	if l := limits(lo); !l.IsZero() {
		t.Fatalf("the streamer capped %+v with nobody better doing I/O", l)
	}
	capBps, _ := th.Capacity()
	if capBps == 0 {
		t.Fatal("no capacity learnt from the stream alone")
	}

	r.LightIn(t, ctx, light, 1000)
	r.LightIn(t, ctx, hi, 2000)
	testkit.WaitFor(t, time.Second, "the streamer capped while the readers read", func() bool { return !limits(lo).IsZero() })
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

package throttle

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestRealV1ThrottleSteer: the latency controller's output where it
// reaches the kernel. On a real v1 cgroup tree and a brand-new loop device,
// a demoted stream capped beside a level-1 reader: each share Steer sets
// is the cap blk-throttle holds (blkio.throttle.read_bps_device read back),
// below the level's own share (10 %), above it (50 %: the work-conserving
// slow start goes past the levels), lifted (1: no cap while the reader
// still reads), and back to the fixed rule (0: the level's 30 %).
// The share in force the throttle reports (Contention) is that cap too. A
// raise and the lift go up by at most rampFrac of the capacity a write,
// read back on the way (mutation: rampOf false fails both with one jump).
// Mutation checked: the throttle's step not handing the steered share to
// its cap computation (capCalc.share unset) keeps 30 % throughout and
// fails at the first share.
func TestRealV1ThrottleSteer(t *testing.T) {
	r := accountedV1(t, 16)
	hi, lo := r.Child(t, "hi"), r.Child(t, "lo")
	th := newRealThrottle(t, Config{Shares: [4]float64{1, 0.6, 0.45, 0.3}, Min: 1 << 20}, r.H, r.Disk.Name, r.Dev)
	limits := func() cgroupfs.Limits {
		l, err := r.H.ReadLimits(lo, r.Dev)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	th.apply(hi, 1, lo, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.StreamIn(t, ctx, lo)
	time.Sleep(3 * DefaultHold) // alone: uncapped, the capacity learnt
	r.LightIn(t, ctx, hi, 1000)
	capBps := func() float64 { th.mu.Lock(); defer th.mu.Unlock(); return th.cap.bps }
	// near: the cap in force is share × the capacity (as the throttle
	// knows it now) within 10 %; share 1: no cap.
	near := func(share float64) bool {
		got := limits()
		if share >= 1 {
			return got.IsZero()
		}
		want := share * capBps()
		return got.RBps > 0 && math.Abs(float64(got.RBps)-want) <= 0.1*want
	}
	testkit.WaitFor(t, 2*time.Second, "lo capped at its level's 30 % beside the reader", func() bool { return near(0.3) })
	for _, c := range []struct {
		share float64
		what  string
	}{
		{0.1, "steered below the level's share"},
		{0.5, "steered above the level's share (the slow start past the levels)"},
		{1, "lifted: no cap though the reader reads"},
		{0.05, "capped again, at the throttle's start share"},
		{0, "the fixed rule again: the level's 30 %"},
	} {
		before := limits().RBps
		th.Steer(c.share)
		want := c.share
		if want == 0 {
			want = 0.3
		}
		// Every cap the kernel held on the way, read back each poll: a
		// raise while the reader reads is ramped (pace.go's rampFrac of
		// the capacity a write), a lift too until the caps reach the
		// capacity.
		var seen []uint64
		took := testkit.WaitFor(t, 2*time.Second, c.what, func() bool {
			if b := limits().RBps; len(seen) == 0 || seen[len(seen)-1] != b {
				seen = append(seen, b)
			}
			return near(want)
		})
		if before > 0 && (c.share >= 1 || float64(before) < 0.9*want*capBps()) {
			prev, steps := before, 0
			for _, b := range seen {
				if b == 0 {
					break // lifted
				}
				if b > prev {
					steps++
					if d := float64(b - prev); d > 1.5*rampFrac*capBps() {
						t.Errorf("%s: the cap went from %d to %d B/s in one write, want at most %.0f (%g of the capacity)", c.what, prev, b, 1.5*rampFrac*capBps(), rampFrac)
					}
				}
				prev = b
			}
			if steps < 3 {
				t.Errorf("%s: the caps read back on the way %v (from %d): want a ramp of at least 3 raises", c.what, seen, before)
			}
		}
		// What the throttle tells the controller is in force (the share a
		// slow start doubles from) is the cap the kernel holds.
		if _, _, inForce := th.Contention(); want < 1 && math.Abs(inForce-want) > 0.1*want {
			t.Errorf("%s: Contention's share in force %.3f, want %.3f", c.what, inForce, want)
		}
		t.Logf("%s: share %g, cap read back %+v after %s (capacity %.0f MiB/s)", c.what, c.share, limits(), took, capBps()/(1<<20))
	}
}

package throttle

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestRealV1LiftGuard: the lift guard on the host's stacked loop device (a
// brand-new loop device over a file on the machine's disk, scheduler
// none), beside a level-1 reader. A QD32 O_DIRECT streamer held at 5 %
// and lifted queues its requests ahead of everything at once: the lift is
// refused within guardWatch and the cap in force again. (Held at 60 %, the
// same streamer already kept ~18 requests in flight on this disk, 49 ms
// each, as many as lifted: there the guard lets the lift stand, and the
// controller judges it by the victims.) A paced neighbour (one 1 MiB
// request at a time, 150 MB/s: heavy, as a 20 MB/s one on this device is not) lifted from 60 % waits no longer per
// request: the lift stands. Both only with the guard armed (a
// reference taken with the caps in force). Before each lift, LiftQueues
// predicts it from the requests the device kept in flight while the
// neighbour streamed alone against capped: true for the QD32 streamer,
// false for the paced one (one request at a time, each several times
// slower than the capped mix of 4 KiB and 1 MiB requests: the time per
// request said it queued, in a quiet make test of 2026-12-03).
// Mutation checked: guardFactor 300 fails the first phase.
func TestRealV1LiftGuard(t *testing.T) {
	r := accountedV1(t, 384)
	hi := r.Child(t, "hi")
	armed := func(th *realThrottle) float64 {
		th.mu.Lock()
		defer th.mu.Unlock()
		if th.guard.refIOs < guardMinIOs {
			return 0
		}
		return th.guard.refMs / th.guard.refIOs
	}
	phase := func(name string, from float64, start func(ctx context.Context, cg string)) (refused, queues bool, refMs float64) {
		lo := r.Child(t, name)
		th := newRealThrottle(t, Config{Shares: [4]float64{1, 0.6, 0.45, 0.3}, Min: 1 << 20}, r.H, r.Disk.Name, r.Dev)
		th.apply(hi, 1, lo, 4)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		start(ctx, lo)
		time.Sleep(3 * DefaultHold)  // alone: uncapped, the capacity learnt
		r.LightIn(t, ctx, hi, 90000) // the second half: not the streamer's
		testkit.WaitFor(t, 5*time.Second, name+": capped beside the reader", func() bool { return !r.Limits(t, lo).IsZero() })
		th.Steer(from)
		time.Sleep(time.Second)
		refMs = armed(th)
		if refMs == 0 {
			t.Fatalf("%s: the guard has no reference after 1 s capped at %g beside the reader", name, from)
		}
		queues = th.Guard().Queues
		th.mu.Lock()
		g := th.guard
		th.mu.Unlock()
		t.Logf("%s: in flight on average: %.2f streaming alone, %.2f capped at %g beside the reader", name, g.freeMs/max(g.freeWall, 1), g.refMs/max(g.refWall, 1), from)
		th.Steer(1)
		deadline := time.Now().Add(guardWatch + 500*time.Millisecond)
		for time.Now().Before(deadline) && th.Guard().RefusedAt.IsZero() {
			time.Sleep(10 * time.Millisecond)
		}
		refused = !th.Guard().RefusedAt.IsZero()
		if refused {
			took := th.Guard().RefusedAt.Sub(deadline.Add(-guardWatch - 500*time.Millisecond))
			th.mu.Lock()
			share := th.share
			th.mu.Unlock()
			t.Logf("%s: lift refused %s after it (reference %.1f ms a request), share %g, cap %+v", name, took, refMs, share, r.Limits(t, lo))
			if share != from {
				t.Errorf("%s: share after the refusal %g, want %g (the share before the lift)", name, share, from)
			}
			testkit.WaitFor(t, time.Second, name+": capped again after the refusal", func() bool { return !r.Limits(t, lo).IsZero() })
		} else {
			t.Logf("%s: lift stood (reference %.1f ms a request), cap %+v", name, refMs, r.Limits(t, lo))
		}
		t.Logf("%s: predicted before the lift: queues %v", name, queues)
		return refused, queues, refMs
	}
	refused, queues, _ := phase("qd32", 0.05, func(ctx context.Context, cg string) { r.Stream(t, ctx, cg, 32) })
	if !refused {
		t.Error("a QD32 streamer lifted beside the reader on the stacked loop device: the lift stood, want refused")
	}
	if !queues {
		t.Error("a QD32 streamer capped at 5 % after streaming alone: LiftQueues false, want the lift predicted to queue")
	}
	paced := func(ctx context.Context, cg string) {
		p := r.Start(t, ctx, cg, "--loop", "--bs", "1MiB", "--iodepth", "1", "--rate", "150MB/s", "--span", strconv.FormatInt(r.Disk.Size/2, 10))
		t.Cleanup(func() { p.Kill(); p.Wait() })
	}
	refused, queues, _ = phase("paced", 0.6, paced)
	if refused {
		t.Error("a paced neighbour (QD1, 150 MB/s) lifted: refused, want the lift to stand")
	}
	if queues {
		t.Error("a paced neighbour (QD1, 150 MB/s) capped at 60 %: LiftQueues true, want false")
	}
}

package main

// The latency controller (internal/control) on the real kernel: the same
// streamer and paced reader as TestRealV1LatencyEffect, the daemon with its
// defaults, once with the controller (latency_target auto) and once with
// the throttle's fixed share (latency_target off), alternated in one run.

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// controlPhase is what one phase measured.
type controlPhase struct {
	victim workload.Result
	bulk   float64 // the streamer's read bytes/s while the victim ran
	// The device as the daemon showed it as the victim ended: the
	// controller's target, last protected p99 and share (0: none).
	target, p99, share float64
}

// controlPhase runs one phase: the daemon with latency_target target, the
// streamer, the victim after warm.
func (r *runRig) controlPhase(t *testing.T, tag, target string, streamer, victim workload.Spec, warm time.Duration) controlPhase {
	t.Helper()
	var ph controlPhase
	d, logs := r.serve(t, "--latency-target", target, "--log-level", "debug")
	defer func() {
		// What the controller saw and did, tick by tick.
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "latency controller") {
				t.Log(line)
			}
		}
	}()
	bulk, web := r.child(t, "bulk-"+tag), r.child(t, "web-"+tag)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startIn(t, ctx, r, bulk, streamer.Args()...)
	time.Sleep(warm)
	before, t0 := r.readBytes(t, bulk), time.Now()
	v, err := startIn(t, ctx, r, web, victim.Args()...).Wait()
	if err != nil {
		t.Fatal(err)
	}
	ph.victim, ph.bulk = v, float64(r.readBytes(t, bulk)-before)/time.Since(t0).Seconds()
	if snap, err := r.snapshot(); err == nil {
		for _, dv := range snap.Devices {
			if dv.Name == r.loop.Name {
				ph.target, ph.p99, ph.share = dv.LatencyTarget, dv.ProtectedP99, dv.CappedShare
			}
		}
	}
	s.Stop()
	if _, err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	if code := term(t, d); code != 0 {
		t.Fatalf("the daemon exited %d after SIGTERM", code)
	}
	r.removeChild(t, bulk)
	r.removeChild(t, web)
	return ph
}

// TestRealV1LatencyControl: on a loop device on scheduler none (the
// throttle), a QD32 1 MiB O_DIRECT streamer and a 4 KiB O_DIRECT reader at
// 100/s arriving 3 s later, each in a new cgroup, beside `ddiskqos run`
// with its defaults, against latency_target off (the fixed 5 %), two pairs
// interleaved: with the controller the reader's median p99 stays within
// 10× its idle p99 (the controller's target is 3×; its first tick at a
// share too large is lived before it is cut, and the host is shared), the
// streamer keeps at least a quarter of the fixed share's throughput, and
// the target it learnt is the device's. The controller must have run: the
// snapshot shows its target and share.
func TestRealV1LatencyControl(t *testing.T) {
	r := newRunRig(t) // skips in the VM
	testkit.SetScheduler(t, r.loop.Name, "none")
	if err := r.h.EnableV1Accounting(r.dev); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	streamer, victim := effectSpecs(r.loop.Path, 384<<20, 32, 100, 12*time.Second)
	idleSpec := victim
	idleSpec.Duration = 6 * time.Second
	idle := r.effectVictimAlone(t, effect{victim: idleSpec}, "idle")
	var fixed, steered []controlPhase
	for i := range 2 {
		for _, target := range []string{"off", "auto"} {
			p := r.controlPhase(t, fmt.Sprintf("%d-%s", i, target), target, streamer, victim, 3*time.Second)
			t.Logf("latency_target %-4s victim p50 %6.0f µs, p99 %7.0f µs (%.1f× idle), %d reads; streamer %6.1f MiB/s; device target %.0f µs, protected p99 %.0f µs, share %.1f %%",
				target, p.victim.Latency.P50, p.victim.Latency.P99, p.victim.Latency.P99/idle.Latency.P99, p.victim.Ops,
				p.bulk/(1<<20), 1e6*p.target, 1e6*p.p99, 100*p.share)
			if target == "off" {
				fixed = append(fixed, p)
			} else {
				steered = append(steered, p)
			}
		}
	}
	med := func(ps []controlPhase, f func(controlPhase) float64) float64 {
		var xs []float64
		for _, p := range ps {
			xs = append(xs, f(p))
		}
		return median(xs)
	}
	bulk := func(p controlPhase) float64 { return p.bulk }
	p99 := func(p controlPhase) float64 { return p.victim.Latency.P99 }
	bFixed, bSteered := med(fixed, bulk), med(steered, bulk)
	pFixed, pSteered := med(fixed, p99), med(steered, p99)
	t.Logf("idle p99 %.0f µs; median streamer fixed %.1f MiB/s, steered %.1f MiB/s (%.2f×); median victim p99 fixed %.0f µs (%.1f× idle), steered %.0f µs (%.1f× idle, bar 10×); %v",
		idle.Latency.P99, bFixed/(1<<20), bSteered/(1<<20), bSteered/math.Max(bFixed, 1), pFixed, pFixed/idle.Latency.P99,
		pSteered, pSteered/idle.Latency.P99, time.Since(start).Round(time.Second))
	for _, p := range steered {
		if p.target <= 0 || p.share <= 0 {
			t.Fatalf("the controller did not run: the snapshot shows target %g s, share %g (is the latency sensor attached?)", p.target, p.share)
		}
	}
	// Whether the controller gives the streamer more than the fixed share
	// is a speed, judged by the host-scenario benchmark (on a quiet host
	// one run gave 0.80×, the victim 4.6× idle against 26.5× fixed; under
	// load 1.25–3.0×). Here: it never starves the streamer below its floor
	// (2 % against the fixed 5 %: 0.4×, with a margin for the noise), and
	// the target it learnt is the device's: 3× the unloaded p99, so at
	// least the idle median this test measured and at most 50× its idle
	// p99. (The lower bound is the median, not the p99: the p99 of 600
	// idle reads is their sixth-worst, and one CI run's idle p99 was
	// 7.6 ms beside a 379 µs median, while the controller learnt 1.5 ms.)
	if bSteered < 0.25*bFixed {
		t.Errorf("the streamer moved %.1f MiB/s with the controller, below a quarter of the fixed share's %.1f MiB/s: starved below the floor", bSteered/(1<<20), bFixed/(1<<20))
	}
	for _, p := range steered {
		if us := p.target * 1e6; us < idle.Latency.P50 || us > 50*idle.Latency.P99 {
			t.Errorf("the controller's learnt target %.0f µs is outside the idle median %.0f µs … 50× the idle p99 %.0f µs", us, idle.Latency.P50, idle.Latency.P99)
		}
	}
	if pSteered > 10*idle.Latency.P99 {
		t.Errorf("the victim's median p99 with the controller is %.0f µs, %.1f× its idle %.0f µs (want at most 10×)", pSteered, pSteered/idle.Latency.P99, idle.Latency.P99)
	}
}

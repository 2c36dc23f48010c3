package main

// What users install ddiskqos for, asserted on the real kernel: a paced
// small reader beside a streamer waits far less with the daemon than
// without it, and the streamer keeps a share. The same load with and
// without the daemon alternates in one test (A/B/A/B), so the host's noise
// falls on both.

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// effect is a latency-effect run: per phase a streamer in a new cgroup,
// then after warm a paced victim in another new cgroup, both started by
// the test as a container's first process would be.
type effect struct {
	streamer workload.Spec // streams until stopped
	victim   workload.Spec // ends by itself
	warm     time.Duration // the streamer alone before the victim starts
	pairs    int           // phases without, then with, the daemon
	// The bars: the median over the phases of the victim's p99 with the
	// daemon at most 1/p99Ratio of the median without it (a median, so
	// that one phase hit by a burst of the host's own I/O does not decide
	// alone); the streamer's rate while the
	// victim reads, with the daemon ÷ without (pairs summed), at least
	// minShare.
	p99Ratio float64
	minShare float64
	// maxIdle, when above 0: the median p99 with the daemon at most
	// maxIdle × the victim's idle p99 of the same run (the claim users
	// read: the victim near idle, not merely better than without).
	// noWorse, when above 0: at most noWorse × the median without the
	// daemon (a moderate neighbour: the daemon must not make it worse).
	maxIdle, noWorse float64
}

// effectPhase is what one phase measured.
type effectPhase struct {
	daemon bool
	victim workload.Result
	bulk   float64 // the streamer's cgroup's read bytes/s while the victim ran
	levels string  // with the daemon: the levels it showed as the victim ended
	caps   string  // with the daemon: the streamer's read cap as the kernel showed it, over time
}

// latencyEffect runs e on r (scheduler none on r.loop: the throttle) and
// asserts its bars.
func latencyEffect(t *testing.T, r *runRig, e effect) {
	t.Helper()
	if err := r.h.EnableV1Accounting(r.dev); err != nil { // v1: count without the daemon too
		t.Fatal(err)
	}
	start := time.Now()
	// Idle is measured before each pair, and the reference is the median
	// of those: this disk's idle p99 over 1,000 reads drew anywhere from
	// 0.43 to 2.1 ms in the runs of one evening (2026-12-07), and a single
	// draw made the 5× bar a draw too.
	var idles []float64
	var ph []effectPhase
	for i := range e.pairs {
		idle := r.effectVictimAlone(t, e, fmt.Sprintf("idle-%d", i))
		idles = append(idles, idle.Latency.P99)
		for _, daemon := range []bool{false, true} {
			p := r.effectPhase(t, e, fmt.Sprintf("%d-%v", i, daemon), daemon)
			ph = append(ph, p)
			t.Logf("%-14s victim p50 %6.0f µs, p99 %7.0f µs (%.1f× idle), response p99 %7.0f µs, %d reads; streamer %5.1f MiB/s%s",
				map[bool]string{false: "without daemon", true: "with daemon"}[daemon],
				p.victim.Latency.P50, p.victim.Latency.P99, p.victim.Latency.P99/idle.Latency.P99, respP99(p.victim),
				p.victim.Ops, p.bulk/(1<<20), p.levels)
			if p.caps != "" {
				t.Logf("  the streamer's read cap while the victim read (kernel's knob, sampled every 5 ms): %s", p.caps)
			}
			if s := slowest(p.victim, e.victim.IOPS, 10); s != "" {
				t.Logf("  the victim's slowest reads (µs at the second it was due): %s", s)
			}
		}
	}
	var with, without []float64
	var bulkWith, bulkWithout float64
	for _, p := range ph {
		if p.daemon {
			with, bulkWith = append(with, p.victim.Latency.P99), bulkWith+p.bulk
		} else {
			without, bulkWithout = append(without, p.victim.Latency.P99), bulkWithout+p.bulk
		}
	}
	medWith, medWithout, idleP99 := median(with), median(without), median(idles)
	share := bulkWith / math.Max(bulkWithout, 1)
	t.Logf("idle p99 %.0f µs (median of %.0f µs); median p99 with the daemon %.0f µs, without %.0f µs (without ÷ with %.1f×, bar %.1f×; with ÷ without bar %.1f×; worst with ÷ best without %.1f×); streamer share with ÷ without %.0f %% (bar %.0f %%); %v",
		idleP99, idles, medWith, medWithout, medWithout/medWith, e.p99Ratio, e.noWorse, slices.Max(with)/slices.Min(without),
		100*share, 100*e.minShare, time.Since(start).Round(time.Second))
	if e.maxIdle > 0 && medWith > e.maxIdle*idleP99 {
		t.Errorf("the victim's median p99 with the daemon (%.0f µs) is %.1f× its idle p99 (%.0f µs), want at most %g×",
			medWith, medWith/idleP99, idleP99, e.maxIdle)
	}
	if e.noWorse > 0 && medWith > e.noWorse*medWithout {
		t.Errorf("the victim's median p99 with the daemon (%.0f µs) is %.1f× without it (%.0f µs), want at most %g×",
			medWith, medWith/medWithout, medWithout, e.noWorse)
	}
	if e.p99Ratio > 0 && medWith*e.p99Ratio > medWithout {
		t.Errorf("the victim's median p99 with the daemon (%.0f µs) is not %.1f× below without it (%.0f µs)", medWith, e.p99Ratio, medWithout)
	}
	if share < e.minShare {
		t.Errorf("the streamer kept %.1f %% of its rate while the victim read with the daemon, want at least %.0f %%", 100*share, 100*e.minShare)
	}
}

// median of xs (not empty): the middle value, or the mean of the two.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	return (s[(n-1)/2] + s[n/2]) / 2
}

// slowest names a paced victim's n slowest reads with the time each was
// due (its index ÷ iops: one worker, in order), so a phase's p99 can be
// set beside the caps' timeline; "" without Latencies.
func slowest(r workload.Result, iops float64, n int) string {
	if len(r.Latencies) == 0 || iops <= 0 {
		return ""
	}
	idx := make([]int, len(r.Latencies))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(r.Latencies[b], r.Latencies[a]) })
	idx = idx[:min(n, len(idx))]
	slices.Sort(idx)
	var b strings.Builder
	for i, j := range idx {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%.0f at %.2fs", r.Latencies[j], float64(j)/iops)
	}
	return b.String()
}

// respP99 is the p99 of a paced job's response time, 0 without one.
func respP99(r workload.Result) float64 {
	if r.Response == nil {
		return 0
	}
	return r.Response.P99
}

// effectVictimAlone runs the victim alone in a cgroup named tag, an idle
// reference (logged).
func (r *runRig) effectVictimAlone(t *testing.T, e effect, tag string) workload.Result {
	t.Helper()
	cg := r.child(t, tag)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := startIn(t, ctx, r, cg, e.victim.Args()...).Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("idle           victim p50 %6.0f µs, p99 %7.0f µs, response p99 %7.0f µs, %d reads", res.Latency.P50, res.Latency.P99, respP99(res), res.Ops)
	r.removeChild(t, cg)
	return res
}

// effectPhase runs one phase: with daemon, `ddiskqos run` with its
// defaults (API and metrics on) starts first; then the streamer, and the
// victim after e.warm.
func (r *runRig) effectPhase(t *testing.T, e effect, tag string, daemon bool) effectPhase {
	t.Helper()
	ph := effectPhase{daemon: daemon}
	var d *exec.Cmd
	var logs *testkit.SyncBuffer
	if daemon {
		// DDISKQOS_TEST_CONTROLLER_LOG=1: the daemon at debug, its latency
		// controller's ticks logged after the phase (to read a phase's
		// shares beside its slowest reads).
		if os.Getenv("DDISKQOS_TEST_CONTROLLER_LOG") != "" {
			d, logs = r.serve(t, "--log-level", "debug")
			defer func() {
				for _, l := range strings.Split(logs.String(), "\n") {
					if strings.Contains(l, "latency controller") {
						t.Log(l)
					}
				}
			}()
		} else {
			d, _ = r.serve(t)
		}
	}
	bulk, web := r.child(t, "bulk-"+tag), r.child(t, "web-"+tag)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startIn(t, ctx, r, bulk, e.streamer.Args()...)
	time.Sleep(e.warm)
	before, t0 := r.readBytes(t, bulk), time.Now()
	var capLog chan string
	stopCaps := make(chan struct{})
	if daemon {
		capLog = make(chan string, 1)
		go func() { capLog <- r.capTimeline(bulk, web, t0, stopCaps) }()
	}
	vs := e.victim
	vs.KeepLatencies = daemon && vs.IOPS > 0
	v, err := startIn(t, ctx, r, web, vs.Args()...).Wait()
	close(stopCaps)
	if capLog != nil {
		ph.caps = <-capLog
	}
	if err != nil {
		t.Fatal(err)
	}
	ph.victim, ph.bulk = v, float64(r.readBytes(t, bulk)-before)/time.Since(t0).Seconds()
	if daemon {
		if snap, err := r.snapshot(); err == nil {
			for _, w := range snap.Workloads {
				if w.Name == "bulk-"+tag || w.Name == "web-"+tag {
					ph.levels += fmt.Sprintf(", %s at level %d", strings.TrimSuffix(w.Name, "-"+tag), w.Level)
				}
			}
		}
		if code, body := httpGet(t, "http://"+r.addr+"/metrics"); code != 200 || !strings.Contains(body, `name="bulk-`+tag+`"`) {
			t.Errorf("/metrics: status %d, bulk-%s in it: %v", code, tag, strings.Contains(body, "bulk-"+tag))
		}
	}
	s.Stop()
	if _, err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	if daemon {
		if code := term(t, d); code != 0 {
			t.Fatalf("the daemon exited %d after SIGTERM", code)
		}
	}
	r.removeChild(t, bulk)
	r.removeChild(t, web)
	return ph
}

// capTimeline samples cg's read cap on the rig's device every 5 ms from
// t0 until stop, as the kernel shows it (io.max on v2,
// blkio.throttle.read_bps_device on v1), and says how long each value
// held: "none 0-0.31s, 5.0 MiB/s 0.31-8.02s" — where the daemon's caps
// were, when a phase's latency is to be explained — and when the kernel
// first counted a byte of victim's.
func (r *runRig) capTimeline(cg, victim string, t0 time.Time, stop <-chan struct{}) string {
	first := ""
	p, err := r.h.Path(cg)
	if err != nil {
		return err.Error()
	}
	dev := r.dev.String() + " "
	read := func() string {
		if r.h.Version == 2 {
			b, err := os.ReadFile(filepath.Join(p, "io.max"))
			if err != nil {
				return "error"
			}
			for _, ln := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(ln, dev); ok {
					for _, f := range strings.Fields(v) {
						if bps, ok := strings.CutPrefix(f, "rbps="); ok && bps != "max" {
							return fmtBps(bps)
						}
					}
				}
			}
			return "none"
		}
		b, err := os.ReadFile(filepath.Join(p, "blkio.throttle.read_bps_device"))
		if err != nil {
			return "error"
		}
		for _, ln := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(ln, dev); ok {
				return fmtBps(strings.TrimSpace(v))
			}
		}
		return "none"
	}
	// Each segment: the cap, its span, and what the streamer's cgroup
	// moved meanwhile (the kernel's count), so a cap that did not hold
	// shows as a rate above it.
	var segs []string
	seg := func(v string, from, to time.Duration, b0, b1 uint64) string {
		rate := 0.0
		if to > from {
			rate = float64(b1-b0) / (to - from).Seconds() / (1 << 20)
		}
		return fmt.Sprintf("%s %.2f-%.2fs (moved %.1f MiB/s)", v, from.Seconds(), to.Seconds(), rate)
	}
	cur, from, fromB := read(), time.Duration(0), r.readBytesOr0(cg)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			segs = append(segs, seg(cur, from, time.Since(t0), fromB, r.readBytesOr0(cg)))
			return strings.Join(segs, ", ") + "; the victim's first byte counted at " + first
		case <-tick.C:
		}
		if first == "" && r.readBytesOr0(victim) > 0 {
			first = fmt.Sprintf("%.2fs", time.Since(t0).Seconds())
		}
		if v := read(); v != cur {
			at, b := time.Since(t0), r.readBytesOr0(cg)
			segs = append(segs, seg(cur, from, at, fromB, b))
			cur, from, fromB = v, at, b
		}
	}
}

// readBytesOr0 is readBytes without a test to fail: 0 when unreadable.
func (r *runRig) readBytesOr0(cg string) uint64 {
	c, err := r.h.Open(cg)
	if err != nil {
		return 0
	}
	defer c.Close()
	st, err := c.ReadIO()
	if err != nil {
		return 0
	}
	d, _ := st.Device(r.dev)
	return d.RBytes
}

// fmtBps is a bytes/s knob value in MiB/s.
func fmtBps(v string) string {
	var n float64
	if _, err := fmt.Sscan(v, &n); err != nil {
		return v
	}
	return fmt.Sprintf("%.1f MiB/s", n/(1<<20))
}

// readBytes is what the kernel counted read by cg on the rig's device.
func (r *runRig) readBytes(t *testing.T, cg string) uint64 {
	t.Helper()
	c, err := r.h.Open(cg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.ReadIO()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := st.Device(r.dev)
	return d.RBytes
}

// removeChild removes a cgroup of r.child before the test ends, so the
// next phase's daemon does not see it.
func (r *runRig) removeChild(t *testing.T, rel string) {
	t.Helper()
	p, _ := r.h.Path(rel)
	testkit.RemoveCgroup(t, p)
}

// effectSpecs are the streamer (QD iodepth, 1 MiB O_DIRECT reads over the
// first span bytes of dev, looping) and the victim (4 KiB O_DIRECT random
// reads at iops per second over the next 64 MiB, for d).
func effectSpecs(dev string, span int64, iodepth int, iops float64, d time.Duration) (streamer, victim workload.Spec) {
	streamer = workload.Spec{Path: dev, Op: workload.OpRead, Direct: true, BlockSize: 1 << 20, IODepth: iodepth,
		Span: span, Loop: true, Duration: 5 * time.Minute}
	victim = workload.Spec{Path: dev, Op: workload.OpRandRead, Direct: true, BlockSize: 4 << 10, IOPS: iops,
		Offset: span, Span: 64 << 20, Duration: d}
	return streamer, victim
}

// TestRealV1LatencyEffect: on cgroup v1 (blk-throttle through
// blkio.throttle.*: a loop device on scheduler none), the real `ddiskqos
// run` with its defaults from the start, a QD32 1 MiB O_DIRECT streamer and
// a 4 KiB O_DIRECT reader at 100/s arriving 5 s later, each in a new
// cgroup; two pairs without and with the daemon. The reader's p99 with the
// daemon must be far below without it (median of the three phases, 3×)
// and within 5× its idle p99 of the same run, and the streamer keep a
// share (3 %). Mutations checked: --dry-run fails the 3× and the 5× bars.
func TestRealV1LatencyEffect(t *testing.T) {
	r := newRunRig(t) // skips in the VM
	testkit.SetScheduler(t, r.loop.Name, "none")
	streamer, victim := effectSpecs(r.loop.Path, 384<<20, 32, 100, 10*time.Second)
	latencyEffect(t, r, effect{streamer: streamer, victim: victim, warm: 5 * time.Second, pairs: 3,
		p99Ratio: 3, minShare: 0.03, maxIdle: 5})
}

// TestRealV1NoHarm: work conservation on the real kernel. A moderate
// neighbour — a backup-like 1 MiB O_DIRECT reader paced to 50 MB/s, one
// request at a time, which leaves the victim near idle without any QoS —
// beside the same 4 KiB reader at 100/s for 20 s: with the daemon (its
// defaults) the neighbour keeps at least 80 % of its rate while the victim
// reads (the bar is 90 %; the margin is for a pair hit by the
// disk's own noise) and the victim is no worse than without the daemon
// (median p99 within 2× of without's, and within 5× idle). Measured in
// the make test of 2026-12-02 (the final controller): 97 %, the victim
// 1.6× its p99 without the daemon (98 % and 97 % in two runs earlier that
// evening, with a first target from one tick since reverted and helper
// sessions open: hints only). Before the throttle's capacity took the
// device's rate while busy, the backup alone set the capacity at its own
// pace (~70 MB/s), counted as 70-86 % of the device, and stayed held back
// at the controller's most share: 78-82 % (and 28 % in one pair in six,
// when a tight target held the share low). With work_conserving false
// (the daemon before it) the neighbour stayed at its 8 MiB/s cap, 17 %,
// and the test failed: measured before the capacity's rate while busy,
// not since (its start share is now 5 % of ~470 MB/s, not of ~70).
func TestRealV1NoHarm(t *testing.T) {
	r := newRunRig(t) // skips in the VM
	testkit.SetScheduler(t, r.loop.Name, "none")
	streamer, victim := effectSpecs(r.loop.Path, 384<<20, 1, 100, 20*time.Second)
	streamer.RateLimit = 50e6
	latencyEffect(t, r, effect{streamer: streamer, victim: victim, warm: 5 * time.Second, pairs: 3,
		minShare: 0.8, maxIdle: 5, noWorse: 2})
}

// TestRealV2LatencyEffect is the same on cgroup v2 (io.max) in the test VM,
// on its disk (capped at 100 MiB/s by qemu) on scheduler none; the daemon
// and the workloads are this test binary (the VM has no Go toolchain).
// Three pairs: the slow start can overshoot the sustained rate of qemu's
// burst bucket, whose latency stays low until the bucket is empty; one
// pair in six or so then lives 60 ms of 110-170 ms reads (the victim's
// p99 over ~700 reads 21x idle). Six runs of two pairs on 2026-12-02 gave
// 0.6, 1.5, 2.7, 3.2, 4.7 and 11.0x idle (the last with one such pair, at
// 0.7x in the other): with two pairs the median is their mean, and one
// such pair failed the 5x bar alone. (A raise rule that doubled where
// the last raise cost nothing, tried the same day, overshot in two pairs
// of three there, 24x idle: reverted.)
func TestRealV2LatencyEffect(t *testing.T) {
	r := newV2RunRig(t, "effect")
	testkit.SetScheduler(t, r.loop.Name, "none")
	streamer, victim := effectSpecs(r.loop.Path, 512<<20, 16, 100, 8*time.Second)
	latencyEffect(t, r, effect{streamer: streamer, victim: victim, warm: 4 * time.Second, pairs: 3,
		p99Ratio: 3, minShare: 0.03, maxIdle: 5})
}

// TestRealV2NoHarm is TestRealV1NoHarm on cgroup v2 in the test VM: its
// disk capped at 100 MiB/s by qemu, the neighbour paced to 20 MB/s (a
// fifth of it, as 50 MB/s is a small part of the host's loop device); the
// neighbour keeps at least 80 % (96 % quiet on 2026-12-02; 78-89 % before
// the capacity's rate while busy). The victim no worse than 2.5x without
// the daemon (the host's bar is 2x): in the TCG-emulated VM the daemon's
// fast loop and the eBPF sensor's per-request programs share two emulated
// CPUs with the victim, whose median itself rises 1.2-1.4 ms to 1.5-2.2 ms
// with the daemon up; measured 1.2x on 2026-12-02 (1.6-2.1x in three
// earlier runs, the 2.1x failing a 2x bar).
func TestRealV2NoHarm(t *testing.T) {
	r := newV2RunRig(t, "noharm")
	testkit.SetScheduler(t, r.loop.Name, "none")
	streamer, victim := effectSpecs(r.loop.Path, 512<<20, 1, 100, 20*time.Second)
	streamer.RateLimit = 20e6
	latencyEffect(t, r, effect{streamer: streamer, victim: victim, warm: 4 * time.Second, pairs: 2,
		minShare: 0.8, maxIdle: 5, noWorse: 2.5})
}

// newV2RunRig is a runRig inside the cgroup-v2 test VM: its test disk, a
// parent cgroup with +io for the workloads, this test binary as ddiskqos.
func newV2RunRig(t *testing.T, name string) *runRig {
	t.Helper()
	testkit.VMOnly(t)
	testkit.NeedRoot(t)
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	disk := os.Getenv("DDISKQOS_VM_DISK")
	testkit.Need(t, disk != "" && l.Unified != "", "no test disk (DDISKQOS_VM_DISK %q) or no cgroup2 (layout %s)", disk, l.Mode)
	dname := filepath.Base(disk)
	devText, err := os.ReadFile(filepath.Join("/sys/block", dname, "dev"))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cgroupfs.ParseDev(strings.TrimSpace(string(devText)))
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The VM's init leaves the loopback interface down; the API listens on
	// 127.0.0.1.
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set lo up: %v: %s", err, out)
	}
	t.Setenv(envRunAsMain, "1")
	r := &runRig{bin: self, addr: testkit.FreeAddr(t), state: filepath.Join(t.TempDir(), "state.json"),
		lock: filepath.Join(t.TempDir(), "ddiskqos.lock"), h: cgroupfs.Hierarchy{Version: 2, Mount: l.Unified},
		parent: fmt.Sprintf("/ddiskqos-test-%s-%d", name, os.Getpid()),
		loop:   testkit.Loop{Name: dname, Path: disk, Major: dev.Major, Minor: dev.Minor}, dev: dev}
	p, _ := r.h.Path(r.parent)
	testkit.Cgroup(t, p)
	if err := os.WriteFile(filepath.Join(p, "cgroup.subtree_control"), []byte("+io"), 0); err != nil {
		t.Fatal(err)
	}
	return r
}

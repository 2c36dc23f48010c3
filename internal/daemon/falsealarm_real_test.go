package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/health"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source/cgroupdir"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/throttle"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// TestRealV1HealthNoFalseAlarmUnderOwnCaps: on a loop device whose only
// mechanism is the throttle, a QD32 streamer is demoted within a fraction
// of a second (small allowances) and capped by the daemon's throttle while
// four paced level-1 readers keep reading beside it; a boost every 8 s
// lifts its caps until it is demoted again. The device is healthy: what it
// delivers while the streamer is capped is the daemon's doing, so the
// storage-health tracker must stay normal throughout (before the device
// sensor it reported "exhausted ... burst credit exhausted?" and repeated
// the WARN after each boost). The test also proves its own premise: the
// streamer was capped (io limits read back), boosted at least twice, and
// the tracker saw the device busy (it had something to judge). The loop
// device is stacked on the machine's disk, so since devhealth's stacked
// rule (Tracker.StackedOn) its floor is not judged at all: the exclusion
// of the daemon's own caps on a device of its own is TestOwnCapsAreNoFloor's
// (internal/devhealth), the real binary's TestRealV1NoFalseExhaustion.
func TestRealV1HealthNoFalseAlarmUnderOwnCaps(t *testing.T) {
	testkit.HostOnly(t)
	r := newRig(t, "none", host.MechThrottle)
	stream := r.child(t, "stream")
	readers := []string{r.child(t, "reader1"), r.child(t, "reader2"), r.child(t, "reader3"), r.child(t, "reader4")}
	opts := r.options(t, filepath.Join(t.TempDir(), "state.json"))
	// The readers are pinned at level 1 (a level-1 allowance is spent by
	// anyone in time: the boost only lifts level 4).
	src, err := cgroupdir.New(cgroupdir.Options{Hierarchy: r.h, Parent: r.parent, Rescan: 200 * time.Millisecond,
		Levels: []cgroupdir.LevelGlob{{Glob: "reader*", Level: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	opts.Source = src
	opts.Interval = time.Second
	opts.Policy.Allowances = [policy.NumLevels]uint64{8 * policy.MiB, 2 * policy.MiB, 2 * policy.MiB, 2 * policy.MiB}
	opts.Policy.BoostAfter = 8 * time.Second
	opts.Actuator.SysRoot = "/sys"
	opts.Actuator.Throttle = throttle.Config{Shares: throttle.DefaultShares(), Min: 8 << 20, MaxBurst: throttle.DefaultBurst}
	opts.Health = health.Options{SysRoot: "/sys", ProcRoot: "/proc"}
	var logs testkit.SyncBuffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, d, "all tracked", func(s *snapshot.Snapshot) bool { return len(s.Workloads) == 5 })

	start := func(cg string, args ...string) *workload.Proc {
		p, err := workload.StartIn(ctx, os.Args[0], []string{workload.EnvMain + "=1"},
			append([]string{"--wait-stdin", "--json", "--direct"}, args...),
			func(pid int) error { return r.h.AddProcess(cg, pid) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Kill(); p.Wait() })
		return p
	}
	const run = 45 * time.Second
	// Readers: 4 KiB, one request at a time each, as fast as the device
	// answers: together they keep it busy.
	for i, cg := range readers {
		start(cg, "--bs", "4KiB", "--iodepth", "2", "--duration", run.String(),
			"--offset", fmt.Sprintf("%dMiB", 128*i), "--span", "128MiB", "randread", r.path)
	}
	start(stream, "--bs", "1MiB", "--iodepth", "32", "--duration", run.String(), "--span", "512MiB", "randread", r.path)

	var capped, busy, heldByCaps int
	var boosts int
	prevLevel := 0
	var states []string
	deadline := time.Now().Add(run - 2*time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		l, err := r.h.ReadLimits(stream, r.dev.Dev)
		if err != nil {
			t.Fatal(err)
		}
		if !l.IsZero() {
			capped++
		}
		s := d.Snapshot()
		if w, ok := workloadNamed(s, "stream"); ok {
			if prevLevel > 1 && w.Level == 1 {
				boosts++
			}
			prevLevel = w.Level
		}
		for _, name := range []string{"reader1", "reader2", "reader3", "reader4"} {
			if w, ok := workloadNamed(s, name); ok && w.Level != 1 {
				t.Fatalf("%s left level 1 (%d): its pin did not hold", name, w.Level)
			}
		}
		if s.Health != nil && len(s.Health.Devices) == 1 {
			dh := s.Health.Devices[0]
			if dh.Util >= 0.9 && dh.QueueDepth >= 1 {
				busy++
			}
			if dh.HeldByCaps {
				heldByCaps++
			}
			if len(states) == 0 || states[len(states)-1] != dh.State {
				states = append(states, dh.State)
			}
		}
	}
	s := d.Snapshot()
	t.Logf("streamer capped in %d of the samples, boosted %d times; device busy in %d samples, held by the daemon's caps in %d; states %v; health %+v",
		capped, boosts, busy, heldByCaps, states, s.Health.Devices)
	if capped < 20 || boosts < 2 || busy < 20 {
		t.Fatalf("premise not met: streamer capped in %d samples (want 20), boosted %d times (want 2), device busy in %d (want 20)",
			capped, boosts, busy)
	}
	for _, e := range s.Health.Events {
		t.Errorf("device state change under the daemon's own caps: %+v", e)
	}
	if strings.Contains(logs.String(), "device state change") {
		var lines []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "device state change") {
				lines = append(lines, l)
			}
		}
		t.Errorf("a healthy device reported changing state %d times:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

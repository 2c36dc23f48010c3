package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// TestRealRunRecentPolicy: the daemon with its default rule (recent usage;
// here a 5 s window so the test is short: a capped level-4 stream stays
// there while it does more than half of the level-4 threshold, 21 MiB, per
// window), a light service reading 4 KiB
// at 50/s (200 KB/s) beside a streamer reading the loop device as fast as
// it can, for 20 s. The service stays at level 1 all along (under the
// paper's rule its 4 MB would have dropped it to level 2, and a longer run
// to level 4); the streamer is at level 4 within a few seconds and never
// leaves it while it streams (no boost: it never sits at level 1
// uncapped). When the streamer stops it rises one level at a time (reason
// usage-decayed) and is back at level 1 within a minute (5 windows and a
// half: the usage is capped at the thresholds summed, 170 MiB).
func TestRealRunRecentPolicy(t *testing.T) {
	r := newRunRig(t)
	web, bulk := r.child(t, "web"), r.child(t, "bulk")
	d, logs := r.launch(t, "run", "--source", "cgroup", "--cgroup-parent", r.parent, "--usage-window", "5s",
		"--interval", "100ms", "--listen", r.addr, "--state-file", r.state, "--devices", r.loop.Name, "--log-level", "debug")
	r.waitLevel(t, "web", 1)
	r.waitLevel(t, "bulk", 1)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := func(cg string, args ...string) *workload.Proc {
		t.Helper()
		p, err := workload.StartIn(ctx, r.bin, nil, append([]string{"workload", "--wait-stdin", "--json", "--direct",
			"--duration", "20s"}, append(args, r.loop.Path)...), func(pid int) error { return r.h.AddProcess(cg, pid) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Kill(); p.Wait() })
		return p
	}
	ws := start(web, "--bs", "4k", "--iops", "50", "--span", "64MiB", "randread")
	bs := start(bulk, "--bs", "1MiB", "--iodepth", "4", "--loop", "read")
	t0 := time.Now()
	webWorst, bulkAt4, bulkLeft4 := 1, time.Duration(-1), 0
	for time.Since(t0) < 19*time.Second {
		time.Sleep(200 * time.Millisecond)
		s, err := r.snapshot()
		if err != nil {
			continue
		}
		for _, w := range s.Workloads {
			switch w.Name {
			case "web":
				webWorst = max(webWorst, w.Level)
			case "bulk":
				if w.Level == 4 && bulkAt4 < 0 {
					bulkAt4 = time.Since(t0)
				} else if w.Level != 4 && bulkAt4 >= 0 {
					bulkLeft4++
				}
			}
		}
	}
	wr, werr := ws.Wait()
	br, berr := bs.Wait()
	if werr != nil || berr != nil {
		t.Fatalf("workloads: web %v, bulk %v", werr, berr)
	}
	t.Logf("web read %d bytes (%d requests), bulk %d bytes in 20 s; web's worst level %d, bulk at level 4 after %v, seen above it %d times after",
		wr.Bytes, wr.Ops, br.Bytes, webWorst, bulkAt4.Round(100*time.Millisecond), bulkLeft4)
	if webWorst != 1 {
		t.Errorf("the light service (200 KB/s) reached level %d beside the streamer, want 1 all along", webWorst)
	}
	if bulkAt4 < 0 || bulkAt4 > 10*time.Second || bulkLeft4 != 0 {
		t.Errorf("the streamer: level 4 after %v (want within 10 s), seen above level 4 %d times after (want 0)", bulkAt4, bulkLeft4)
	}
	stopped := len(logs.String())
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := r.snapshot()
		if err == nil && slices.ContainsFunc(s.Workloads, func(w *snapshot.Workload) bool { return w.Name == "bulk" && w.Level == 1 }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stopped streamer is not back at level 1 after a minute")
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the stopped streamer back at level 1 after %v", time.Since(deadline.Add(-time.Minute)).Round(time.Second))
	if n := strings.Count(logs.String()[stopped:], "reason=usage-decayed"); n != 3 {
		t.Errorf("%d usage-decayed transitions in the log after the streamer stopped, want 3 (4→3→2→1)", n)
	}
	if code := term(t, d); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
}

package iolat_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/iolat"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/testkit/realcg"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// TestRealV1SensorAlone: the requests a disk served alone (Delta.Alone) on
// the real kernel. A paced 4 KiB reader by itself on a loop device has
// nearly all its requests served alone, with the same times as its
// histogram; beside a streamer keeping four 256 KiB reads in flight on the
// same device, almost none (measured 2026-12-02: 256 of 256, then 1 of
// 256; an in-flight count that one missed completion left above 0 gave
// 84 % in the first half, hence times).
func TestRealV1SensorAlone(t *testing.T) {
	if testkit.InVM() {
		t.Skip("a host test: the VM has no v1 blkio hierarchy")
	}
	rig := realcg.New(t, realcg.Options{Scheduler: "none"})
	h, dev, disk := rig.H, rig.Dev, rig.Disk.Path
	r := openReal(t)
	web, big := rig.Child(t, "web"), rig.Child(t, "big")
	ino, err := h.DirIno(web)
	if err != nil {
		t.Fatal(err)
	}
	key := iolat.Key{Cgroup: ino, Dev: dev, Op: iolat.Read}
	env := []string{workload.EnvMain + "=1"}
	run := func(ctx context.Context, rel string, args ...string) (workload.Result, error) {
		return workload.RunIn(ctx, os.Args[0], env, args, func(pid int) error { return h.AddProcess(rel, pid) })
	}
	reader := []string{"--wait-stdin", "--json", "--direct", "--bs", "4k", "--bytes", "1MiB", "--span", "16MiB", "--iops", "100", "randread", disk}

	phase := func(name string, streamer bool) *iolat.Delta {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		if streamer {
			go func() {
				_, err := run(sctx, big, "--wait-stdin", "--json", "--direct", "--bs", "256KiB", "--iodepth", "4",
					"--duration", "60s", "--loop", "--offset", "20MiB", "read", disk)
				done <- err
			}()
			time.Sleep(500 * time.Millisecond)
		}
		totals(t, r, map[iolat.Key]*iolat.Delta{}) // what came before is not this phase's
		res, err := run(ctx, web, reader...)
		stop()
		if streamer {
			<-done // stopped: its error is the cancellation
		}
		if err != nil {
			t.Fatalf("%s: the reader: %v", name, err)
		}
		sums := map[iolat.Key]*iolat.Delta{}
		settle(t, r, sums, func() bool { return counted(sums, key, uint64(res.Ops)) })
		d := sums[key]
		if d == nil {
			t.Fatalf("%s: no requests of the reader counted; counted: %s", name, keysOf(sums))
		}
		t.Logf("%s: %d of the reader's %d requests counted, %d served alone (%.0f %%); p50 %v, alone p50 %v",
			name, d.Count, res.Ops, d.Alone.Count(), 100*float64(d.Alone.Count())/float64(max(d.Count, 1)),
			d.Hist.Quantile(0.5), aloneHist(&d.Alone).Quantile(0.5))
		return d
	}

	alone := phase("alone", false)
	if n, a := alone.Count, alone.Alone.Count(); a > n || 10*a < 9*n {
		t.Errorf("alone on the device: %d of %d requests served alone, want at least 90 %%", a, n)
	}
	if p, q := alone.Hist.Quantile(0.5), aloneHist(&alone.Alone).Quantile(0.5); q > p || 4*q < 3*p {
		t.Errorf("alone on the device: the alone requests' p50 %v is not its requests' p50 %v (within a bucket)", q, p)
	}
	beside := phase("beside a streamer", true)
	if n, a := beside.Count, beside.Alone.Count(); 10*a > n {
		t.Errorf("beside a streamer at depth 4: %d of %d requests served alone, want at most 10 %%", a, n)
	}
}

// aloneHist is h as a Hist.
func aloneHist(h *iolat.AloneHist) *iolat.Hist {
	var out iolat.Hist
	out.AddAlone(h)
	return &out
}

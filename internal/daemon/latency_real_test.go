package daemon

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/iolat"
	"github.com/ddiskqos/ddiskqos/internal/sensor/latency"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// TestRealV1LatencyInSnapshot: the daemon with the eBPF sensor (v1 on the
// host, v2 in the VM) shows a paced reader's requests in its workload's
// record — every one of them, on its disk — with a p50 while it reads that
// is the reader's own to the histogram's resolution and the system call
// around it, and the per-level histogram counts them at the reader's level.
func TestRealV1LatencyInSnapshot(t *testing.T) {
	testkit.HostOnly(t)
	latencyInSnapshot(t)
}

// TestRealV2LatencyInSnapshot is the same on cgroup v2 in the test VM.
func TestRealV2LatencyInSnapshot(t *testing.T) {
	testkit.VMOnly(t)
	latencyInSnapshot(t)
}

func latencyInSnapshot(t *testing.T) {
	r := newRig(t, "none", host.MechThrottle)
	cg := r.child(t, "web")
	opts := r.options(t, filepath.Join(t.TempDir(), "state.json"))
	opts.Interval = 250 * time.Millisecond
	opts.Latency = latency.Options{Open: func() (latency.Sensor, error) {
		s, err := iolat.OpenReader(iolat.Options{})
		if err != nil {
			return nil, err
		}
		return s, nil
	}}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if l := d.lat.Snapshot(); l == nil || !l.Available {
		testkit.Need(t, false, "the I/O latency sensor cannot run here: %+v", l)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, d, "web tracked", func(s *snapshot.Snapshot) bool { _, ok := workloadNamed(s, "web"); return ok })

	// While it reads, the daemon's p50 of each tick is sampled.
	var p50s []float64
	sampling, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(opts.Interval)
		defer tk.Stop()
		for {
			select {
			case <-sampling:
				return
			case <-tk.C:
				if w, ok := workloadNamed(d.Snapshot(), "web"); ok {
					for _, l := range w.Latency {
						if l.Device == r.dev.Name && l.Read.TickRequests >= 10 {
							p50s = append(p50s, l.Read.P50)
						}
					}
				}
			}
		}
	}()
	var rt error // why the reader is not SCHED_FIFO
	res, err := workload.RunIn(ctx, os.Args[0], []string{workload.EnvMain + "=1"},
		[]string{"--wait-stdin", "--json", "--direct", "--bs", "4k", "--bytes", "1200KiB", "--span", "32MiB", "--iops", "100",
			"--keep-latencies", "randread", r.path},
		func(pid int) error {
			if err := r.h.AddProcess(cg, pid); err != nil {
				return err
			}
			rt = realtime(pid)
			return nil
		})
	close(sampling)
	<-sampled
	if err != nil || res.Ops != 300 {
		t.Fatalf("reader: %+v, %v; want 300 reads", res, err)
	}
	var last *snapshot.Snapshot
	defer func() {
		if t.Failed() && last != nil {
			w, _ := workloadNamed(last, "web")
			t.Logf("last snapshot: web's latency %+v; latency %+v", w.Latency, last.Latency)
		}
	}()
	// The sensor loses a request now and then (seen: 1-3 of 256 in most
	// runs, on the loop device and the disk below alike; not understood
	// yet, see iolat's lost): 1/64 is accepted, more is a failure.
	const atLeast = 300 - 300/64
	s := waitFor(t, d, "web's 300 reads counted", func(s *snapshot.Snapshot) bool {
		last = s
		w, _ := workloadNamed(s, "web")
		for _, l := range w.Latency {
			if l.Device == r.dev.Name && l.Read.Requests >= atLeast {
				return true
			}
		}
		return false
	})
	w, _ := workloadNamed(s, "web")
	var gen iolat.Hist
	for _, us := range res.Latencies {
		gen[iolat.Bucket(uint64(us*1e3))]++
	}
	g := gen.Quantile(0.5).Seconds()
	t.Logf("web: %+v; the reader's p50 %.6fs; the daemon's tick p50s %v", w.Latency, g, p50s)
	for _, l := range w.Latency {
		if l.Device == r.dev.Name && (l.Read.Requests < atLeast || l.Read.Requests > 300 || l.Read.Bytes != l.Read.Requests*4096 || l.Write.Requests != 0) {
			t.Errorf("web on %s: %+v; want 300 reads of 4 KiB and no write", l.Device, l)
		}
	}
	if len(p50s) == 0 || p50s[len(p50s)-1] <= 0 {
		t.Errorf("no tick showed a p50 of 10 or more of web's requests: %v", p50s)
	}
	// web is the only workload on the device: the per-level histograms
	// hold its 300 reads (at level 1, and 2 once its bytes, counted on the
	// loop device and the disk below, passed 2 MiB). Their median's
	// bucket (an octave) holds the reader's own p50, to the reader's
	// system call and wake-up (a real-time reader: see iolat's runPair).
	var n uint64
	cum := make([]uint64, len(s.Latency.Buckets))
	for _, se := range s.Latency.Series {
		if se.Device == r.dev.Name && se.Operation == "read" && se.Level != "other" {
			n += se.Requests
			for i, c := range se.Counts {
				cum[i] += c
			}
		}
	}
	if n < atLeast || n > 300 {
		t.Errorf("the levels' reads on %s: %d, want web's 300", r.dev.Name, n)
	}
	lo, hi := 0.0, math.Inf(1)
	for i, c := range cum {
		if 2*c >= n {
			hi = s.Latency.Buckets[i]
			break
		}
		lo = s.Latency.Buckets[i]
	}
	t.Logf("the levels' median is in (%gs, %gs]; the reader's p50 %gs (real-time: %v)", lo, hi, g, rt)
	if testkit.InVM() {
		hi *= 3 // emulation: see iolat's runPair
	}
	if rt == nil && (g < lo*0.75 || g > hi*1.25+50e-6) {
		t.Errorf("the reader's p50 %gs is not in the per-level histograms' median bucket (%gs, %gs], to a quarter and 50µs", g, lo, hi)
	}
}

// realtime makes every thread of process pid SCHED_FIFO (threads it starts
// later inherit it): its wake-up after a completion then does not wait
// behind the machine's other work, and its own timing is the request's.
func realtime(pid int) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}
		if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
			return fmt.Errorf("sched_setattr SCHED_FIFO on thread %d: %w", tid, err)
		}
	}
	return nil
}

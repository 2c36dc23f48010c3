package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/testkit/realcg"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// TestRealV2WritebackDemoted: on cgroup v2 with the memory and io
// controllers enabled for the workloads' subtree, the page cache a writer
// dirties is written back — by the kernel's flusher threads, not by the
// writer — charged to the writer's own cgroup (io.stat wbytes), so the
// daemon sees the bytes, demotes the writer and its writeback gets the
// level-4 weight. A victim reading with O_DIRECT beside it is measured with
// and without the daemon (figures logged; not asserted: the emulated VM is
// too noisy for a bar). cgroup v1 cannot do this: its blkio controller
// charges writeback to the flusher's cgroup (the root).
func TestRealV2WritebackDemoted(t *testing.T) {
	testkit.VMOnly(t)
	_, err := exec.LookPath("mkfs.ext4")
	testkit.Need(t, err == nil, "mkfs.ext4 (e2fsprogs) not in PATH: %v", err)
	r := newRig(t, "bfq", host.MechBFQWeight)
	pdir, _ := r.h.Path(r.parent)
	if err := os.WriteFile(filepath.Join(pdir, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
		t.Fatalf("enable +memory for %s: %v", r.parent, err)
	}
	// Writeback starts at 16 MiB of dirty pages instead of 10 % of memory,
	// so it runs all the time the writer writes.
	// (The ratio is saved first and so restored last: writing one of the
	// pair zeroes the other.)
	ratio, err := os.ReadFile("/proc/sys/vm/dirty_background_ratio")
	if err != nil {
		t.Fatal(err)
	}
	setSysctl(t, "/proc/sys/vm/dirty_background_ratio", string(ratio))
	setSysctl(t, "/proc/sys/vm/dirty_background_bytes", "16777216")

	mnt := t.TempDir()
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", r.path).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 %s: %v\n%s", r.path, err, out)
	}
	if err := unix.Mount(r.path, mnt, "ext4", 0, ""); err != nil {
		t.Fatalf("mount %s: %v", r.path, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	victimFile := filepath.Join(mnt, "victim")
	run(t, []string{"--create", "--sync", "--bytes", "64MiB", "write", victimFile})

	writer, victim := r.child(t, "writer"), r.child(t, "victim")
	wbytes := func(cg string) uint64 {
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
		d, _ := st.Device(r.dev.Dev)
		return d.WBytes
	}
	// devWritten is what the device has written, in bytes (sectors written,
	// the 7th field of /sys/block/<dev>/stat).
	devWritten := func() uint64 {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("/sys/block", r.dev.Name, "stat"))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		if len(f) < 7 {
			t.Fatalf("/sys/block/%s/stat: %q", r.dev.Name, b)
		}
		sectors, err := strconv.ParseUint(f[6], 10, 64)
		if err != nil {
			t.Fatalf("/sys/block/%s/stat: %v", r.dev.Name, err)
		}
		return sectors * 512
	}
	// phase runs the buffered writer (no fsync of its own) for its whole
	// length and the victim's paced random reads in its second half, syncs,
	// and returns the victim's result, the bytes the device wrote and those
	// charged to the writer's cgroup. (Not the bytes the writer wrote: it
	// loops over 256 MiB, and a page dirtied again before the flusher
	// reaches it is written back once.)
	phase := func(name string, during func()) (vic workload.Result, devBytes, charged uint64) {
		t.Helper()
		before, devBefore := wbytes(writer), devWritten()
		w := startIn(t, r.h, writer, []string{"--create", "--loop", "--span", "256MiB", "--bs", "1MiB", "--duration", "40s",
			"write", filepath.Join(mnt, "writer-"+name)})
		if during != nil {
			during()
		} else {
			time.Sleep(10 * time.Second)
		}
		v := startIn(t, r.h, victim, []string{"--direct", "--iops", "50", "--duration", "10s", "randread", victimFile})
		vic, err := v.Wait()
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
		wr, err := w.Wait()
		if err != nil {
			t.Fatal(err)
		}
		unix.Sync()
		charged, devBytes = wbytes(writer)-before, devWritten()-devBefore
		t.Logf("%s: writer wrote %d MiB buffered, %d MiB charged to its cgroup's io.stat; victim 4k reads p50 %.0f µs, p99 %.0f µs, max %.0f µs, response p99 %.0f µs (%d reads)",
			name, wr.Bytes>>20, charged>>20, vic.Latency.P50, vic.Latency.P99, vic.Latency.Max, respP99(vic), vic.Ops)
		t.Logf("%s: the device wrote %d MiB, %.0f %% of it charged to the writer", name, devBytes>>20, 100*float64(charged)/float64(max(devBytes, 1)))
		return vic, devBytes, charged
	}

	// Most of what the device wrote is the writer's writeback (the rest is
	// ext4's journal and metadata, charged to the root): on v1 its cgroup
	// would be charged next to nothing.
	_, devBytes, charged := phase("without daemon", nil)
	if charged < devBytes/2 {
		t.Fatalf("without the daemon: the device wrote %d bytes, only %d charged to the writer's cgroup: writeback not charged to the writer", devBytes, charged)
	}
	if v := wbytes(victim); v > 8<<20 {
		t.Errorf("victim's cgroup charged %d written bytes: writeback charged to the wrong cgroup", v)
	}

	opts := r.options(t, filepath.Join(t.TempDir(), "state.json"))
	opts.Policy.BoostAfter = time.Hour // the writer stays at level 4 while it writes
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var demotedAfter time.Duration
	_, devBytes, charged = phase("with daemon", func() {
		begin := time.Now()
		waitFor(t, d, "writer at level 4", levelIs("writer", 4))
		demotedAfter = time.Since(begin)
		if v, _ := r.weight(t, writer); v != realcg.Native(t, r.kind, 100) {
			t.Fatalf("demoted writer's weight %d, want %d", v, realcg.Native(t, r.kind, 100))
		}
	})
	t.Logf("writer demoted to level 4 %s after it started", demotedAfter.Round(time.Millisecond))
	if charged < devBytes/2 {
		t.Fatalf("with the daemon: the device wrote %d bytes, only %d charged to the writer's cgroup", devBytes, charged)
	}
	s := d.Snapshot()
	w, _ := workloadNamed(s, "writer")
	v, _ := workloadNamed(s, "victim")
	if w.WriteBytes == 0 || w.Level != 4 || v.Level != 1 {
		t.Fatalf("snapshot: writer level %d write_bytes %d, victim level %d", w.Level, w.WriteBytes, v.Level)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
	if v, ok := r.weight(t, writer); ok {
		t.Fatalf("after shutdown the writer keeps weight %d", v)
	}
}

// respP99 is the victim's response-time p99 (from when each read was due).
func respP99(r workload.Result) float64 {
	if r.Response == nil {
		return 0
	}
	return r.Response.P99
}

// startIn runs a workload (this test binary) in cgroup cg and lets it go.
func startIn(t *testing.T, h cgroupfs.Hierarchy, cg string, args []string) *workload.Proc {
	t.Helper()
	p, err := workload.Start(context.Background(), os.Args[0], []string{workload.EnvMain + "=1"},
		append([]string{"--wait-stdin", "--json"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(); p.Wait() })
	if cg != "" {
		if err := h.AddProcess(cg, p.Pid()); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Go(); err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs a workload to its end in the test's own cgroup.
func run(t *testing.T, args []string) workload.Result {
	t.Helper()
	res, err := startIn(t, cgroupfs.Hierarchy{}, "", args).Wait()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// setSysctl writes a /proc/sys file and puts the old value back at the end.
func setSysctl(t *testing.T, path, val string) {
	t.Helper()
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(val), 0); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	t.Cleanup(func() { os.WriteFile(path, old, 0) })
}

package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// TestRealStackedLoopCountsOnce: a workload reading a loop device over a
// file on this machine's disk is charged by the kernel on both devices; the
// daemon counts its bytes and its requests once (read_ios was the loop's
// plus the disk's requests before the correction covered counts).
func TestRealStackedLoopCountsOnce(t *testing.T) {
	if testkit.InVM() {
		t.Skip("v1 host test: the VM's disk is no loop device")
	}
	r := newRig(t, "none", host.MechThrottle)
	devs, err := host.BlockDevices(host.DefaultRoots(), host.IOHierarchy{}, mech.Params{})
	if err != nil {
		t.Fatal(err)
	}
	lowerText := host.Lowers(host.DefaultRoots(), devs)[r.dev.Dev.String()]
	testkit.Need(t, len(lowerText) == 1, "the loop device %s has no disk below it (backing file on tmpfs?): %v", r.dev.Name, lowerText)
	lower, err := cgroupfs.ParseDev(lowerText[0])
	if err != nil {
		t.Fatal(err)
	}
	cg := r.child(t, "s")
	opts := r.options(t, filepath.Join(t.TempDir(), "state.json"))
	opts.Policy.BoostAfter = time.Hour
	opts.SenseDevices = []cgroupfs.Dev{lower}
	opts.Stacked = map[cgroupfs.Dev][]cgroupfs.Dev{r.dev.Dev: {lower}}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, d, "s tracked", func(s *snapshot.Snapshot) bool { _, ok := workloadNamed(s, "s"); return ok })

	const n, bs = 32 << 20, 64 << 10
	res, err := workload.RunIn(ctx, os.Args[0], []string{workload.EnvMain + "=1"},
		[]string{"--wait-stdin", "--json", "--direct", "--bs", "64KiB", "--bytes", "32MiB", "read", r.path},
		func(pid int) error { return r.h.AddProcess(cg, pid) })
	if err != nil || res.Bytes != n || res.Ops != n/bs {
		t.Fatalf("reader: %+v, %v; want %d bytes in %d reads", res, err, n, n/bs)
	}

	// The kernel did charge the reads twice: on the loop and on the disk.
	raw := func(file string, ios bool) []cgroupfs.DeviceIO {
		t.Helper()
		p, _ := r.h.Path(cg)
		data, err := os.ReadFile(filepath.Join(p, file))
		if err != nil {
			t.Fatal(err)
		}
		devs, err := cgroupfs.ParseBlkioRWStat(data, file, ios, nil)
		if err != nil {
			t.Fatal(err)
		}
		return devs
	}
	st := cgroupfs.IOStat{Devices: raw("blkio.throttle.io_serviced", true)}
	onLoop, _ := st.Device(r.dev.Dev)
	onDisk, _ := st.Device(lower)
	st = cgroupfs.IOStat{Devices: raw("blkio.throttle.io_service_bytes", false)}
	loopBytes, _ := st.Device(r.dev.Dev)
	diskBytes, _ := st.Device(lower)
	t.Logf("kernel: loop %s %d reads %d B, disk %s %d reads %d B", r.dev.Dev, onLoop.RIOs, loopBytes.RBytes, lower, onDisk.RIOs, diskBytes.RBytes)
	if onLoop.RIOs < n/bs || onDisk.RIOs == 0 || diskBytes.RBytes < n {
		t.Fatalf("the kernel did not charge both devices (loop %d reads, disk %d reads, %d B): nothing to correct", onLoop.RIOs, onDisk.RIOs, diskBytes.RBytes)
	}

	// Its bytes and its requests: a tick that reads the bytes alone (the
	// v1 serviced counts then stay stale) may be the last before the
	// workload goes quiet and is read less often, so the requests can come
	// a few ticks after the bytes (seen once on a loaded host: read_ios 0
	// three ticks after read_bytes was whole).
	s := waitFor(t, d, "s's 32 MiB and 512 reads counted", func(s *snapshot.Snapshot) bool {
		w, _ := workloadNamed(s, "s")
		return w.ReadBytes >= n && w.ReadIOs >= n/bs
	})
	time.Sleep(3 * opts.Interval) // a tick more must not add the disk's share
	s = d.Snapshot()
	w, _ := workloadNamed(s, "s")
	t.Logf("daemon: read_bytes %d read_ios %d (the reader did %d reads of %d B)", w.ReadBytes, w.ReadIOs, n/bs, bs)
	// Counted once, with a little room for the reader's own binary
	// loading or a stray metadata read on the disk.
	if w.ReadBytes < n || w.ReadBytes > n+n/20 {
		t.Errorf("read_bytes %d, want %d (+5%%)", w.ReadBytes, n)
	}
	if w.ReadIOs < n/bs || w.ReadIOs > n/bs+n/bs/20 {
		t.Errorf("read_ios %d, want %d (+5%%); kernel counted %d on the loop and %d on the disk", w.ReadIOs, n/bs, onLoop.RIOs, onDisk.RIOs)
	}
}

package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/iolat"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/sensor"
	"github.com/ddiskqos/ddiskqos/internal/sensor/latency"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// TestRealV1KernelActivity: with the eBPF sensor attached (v1 on the
// host), a workload quiet long enough to be polled at the long backstop
// (ActiveQuietMax) that reads 1 MiB with O_DIRECT between two ticks — on
// a tick neither backstop would read it — is read at the very next tick,
// seen through the sensor's maps alone; and the sensor's bytes on the
// device agree with the cgroup's counter file to the requests it is known
// to lose (1-3 of 256; 1/64 is accepted). The ticks are stepped by the
// test (a clock of its own), so nothing in it is timed; but the loss grows
// with the host's load (9 of 256 beside make test's other packages), so
// make test runs it in its quiet step (Makefile).
func TestRealV1KernelActivity(t *testing.T) {
	testkit.HostOnly(t)
	kernelActivityReal(t)
}

// TestRealV2KernelActivity is the same on cgroup v2 in the test VM.
func TestRealV2KernelActivity(t *testing.T) {
	testkit.VMOnly(t)
	kernelActivityReal(t)
}

// kernelDaemon is a daemon on r's device with the I/O latency sensor
// attached as its activity source (no actuator), whose ticks the test
// steps (step: one tick, a second later on the daemon's own clock); it
// tracks the cgroup cg as the workload named name. It skips where the
// sensor cannot run.
func kernelDaemon(t *testing.T, r rig, name, cg string) (d *Daemon, step func()) {
	t.Helper()
	opts := r.options(t, "")
	// The disk under the loop device (host): its requests repeat the
	// loop's in the v1 counters, which the sensor counts once.
	if devs, err := host.BlockDevices(host.DefaultRoots(), host.IOHierarchy{}, mech.Params{}); err == nil {
		if lows := host.Lowers(host.DefaultRoots(), devs)[r.dev.Dev.String()]; len(lows) == 1 {
			if lower, err := cgroupfs.ParseDev(lows[0]); err == nil {
				opts.SenseDevices = []cgroupfs.Dev{lower}
				opts.Stacked = map[cgroupfs.Dev][]cgroupfs.Dev{r.dev.Dev: {lower}}
			}
		}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	opts.Interval, opts.Now, opts.NoFile = time.Second, func() time.Time { return now }, 1<<20
	opts.NewActuator = func(actuate.Config, []actuate.Original) (Actuator, error) { return nullActuator{}, nil }
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
	t.Cleanup(func() {
		if err := d.shutdown(); err != nil {
			t.Error(err)
		}
	})
	if l := d.lat.Snapshot(); l == nil || !l.Available {
		testkit.Need(t, false, "the I/O latency sensor cannot run here: %+v", l)
	}
	if d.sen.Activity == nil {
		t.Fatal("the latency sensor is attached and is not the activity source")
	}
	d.started, d.noFile = now, 1<<20
	d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: name, Name: name, Cgroup: cg}})
	return d, func() {
		now = now.Add(time.Second)
		d.step()
	}
}

func kernelActivityReal(t *testing.T) {
	r := newRig(t, "none", host.MechThrottle)
	cg := r.child(t, "quiet")
	d, step := kernelDaemon(t, r, "quiet", cg)
	w := d.work["quiet"]
	for i := 0; i < 100 && w.c.Period() < d.sen.ActiveMaxPeriod; i++ {
		step()
	}
	if w.c.Period() != d.sen.ActiveMaxPeriod || d.sen.ActiveMaxPeriod <= d.sen.MaxPeriod {
		t.Fatalf("quiet's period %d after 100 quiet ticks, backstops %d / %d: want the long one", w.c.Period(), d.sen.MaxPeriod, d.sen.ActiveMaxPeriod)
	}
	// A tick neither backstop reads it at.
	short := sensor.Sensor{MaxPeriod: d.sen.MaxPeriod}
	for w.c.Due(d.tick) || short.Due(w.c, 0, d.tick) {
		step()
	}
	snap0 := d.Snapshot()
	before, _ := workloadNamed(snap0, "quiet")
	h, err := r.h.Open(cg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	st0, err := h.ReadIO()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 1 << 20
	res, err := workload.RunIn(ctx, os.Args[0], []string{workload.EnvMain + "=1"},
		[]string{"--wait-stdin", "--json", "--direct", "--bs", "4k", "--bytes", "1MiB", "randread", r.path},
		func(pid int) error { return r.h.AddProcess(cg, pid) })
	if err != nil || res.Bytes != n {
		t.Fatalf("reader: %+v, %v; want %d bytes", res, err, n)
	}
	st1, err := h.ReadIO()
	if err != nil {
		t.Fatal(err)
	}
	if w.c.Due(d.tick) || short.Due(w.c, 0, d.tick) {
		t.Fatalf("tick %d: quiet is due by its polling anyway", d.tick)
	}
	step()
	snap1 := d.Snapshot()
	after, _ := workloadNamed(snap1, "quiet")
	if got := after.ReadBytes - before.ReadBytes; got < n {
		t.Errorf("the tick after quiet read %d bytes (seen by the sensor only): %d charged, want them all", n, got)
	}
	file := cgroupfs.DeviceIn(st1.Devices, r.dev.Dev).RBytes - cgroupfs.DeviceIn(st0.Devices, r.dev.Dev).RBytes
	var bpf uint64
	for _, l := range after.Latency {
		if l.Dev == r.dev.Dev.String() {
			bpf = l.Read.Bytes
		}
	}
	// What the sensor says it could not account meanwhile, anywhere on
	// the host: events the kernel skipped it for, requests untimed or
	// uncounted for want of room.
	var missed, untimed, uncounted uint64
	if snap0.Latency != nil && snap1.Latency != nil {
		missed, untimed, uncounted = snap1.Latency.Missed-snap0.Latency.Missed, snap1.Latency.Untimed-snap0.Latency.Untimed,
			snap1.Latency.Uncounted-snap0.Latency.Uncounted
	}
	t.Logf("on %s: counter file %d bytes, eBPF %d bytes (%d requests of 4 KiB lost; the sensor's own drops meanwhile: %d missed events, %d untimed, %d uncounted); charged %d; latency %+v",
		r.dev.Name, file, bpf, (file-min(file, bpf))/4096, missed, untimed, uncounted, after.ReadBytes-before.ReadBytes, after.Latency)
	if file < n || bpf > file || bpf < file-file/64 {
		t.Errorf("on %s: counter file %d bytes, eBPF %d: want the file's %d and the sensor's within 1/64 below it", r.dev.Name, file, bpf, n)
	}

	// A cgroup below the workload (its counters add its descendants' up):
	// placed under it, by its directory found from its ID, and the
	// workload is read at the next tick again.
	sub := cg + "/sub"
	p, _ := r.h.Path(sub)
	testkit.Cgroup(t, p)
	if r.h.Version == 2 {
		// Without io in quiet's subtree_control, sub's requests are
		// charged to quiet itself.
		qp, _ := r.h.Path(cg)
		if err := os.WriteFile(filepath.Join(qp, "cgroup.subtree_control"), []byte("+io"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 100 && w.c.Period() < d.sen.ActiveMaxPeriod; i++ {
		step()
	}
	for w.c.Due(d.tick) || short.Due(w.c, 0, d.tick) {
		step()
	}
	before, _ = workloadNamed(d.Snapshot(), "quiet")
	res, err = workload.RunIn(ctx, os.Args[0], []string{workload.EnvMain + "=1"},
		[]string{"--wait-stdin", "--json", "--direct", "--bs", "4k", "--bytes", "1MiB", "randread", r.path},
		func(pid int) error { return r.h.AddProcess(sub, pid) })
	if err != nil || res.Bytes != n {
		t.Fatalf("reader below quiet: %+v, %v; want %d bytes", res, err, n)
	}
	step()
	after, _ = workloadNamed(d.Snapshot(), "quiet")
	t.Logf("below quiet: charged %d; cgroups placed by file handle %d, walks %d", after.ReadBytes-before.ReadBytes, d.lat.Handles(), d.lat.Walks())
	if got := after.ReadBytes - before.ReadBytes; got < n {
		t.Errorf("the tick after a cgroup below quiet read %d bytes: %d charged to quiet, want them all", n, got)
	}
	if d.lat.Handles() == 0 {
		t.Errorf("no cgroup placed by its file handle (walks %d): open_by_handle_at does not work here", d.lat.Walks())
	}
}

package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/dockertest"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/source/docker"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/testkit/realcg"
)

// These tests prove the controller against this machine's real Docker
// engine. The shared engine is never restarted: surviving an engine restart
// is proven against a private dockerd in docker_restart_real_test.go.

// labelRun marks the containers of one test run; only they are managed.
const labelRun = "ddiskqos.test.run"

// dockerRig is a BFQ loop device, the image, and a daemon options template
// with the docker source limited to this test's containers.
type dockerRig struct {
	c     *client.Client
	image string
	h     cgroupfs.Hierarchy
	mode  string
	dev   actuate.Device
	path  string
	run   string
}

func newDockerRig(t *testing.T) dockerRig {
	t.Helper()
	if testkit.InVM() {
		t.Skip("the Docker engine tests run on the host")
	}
	testkit.NeedRoot(t)
	r := dockerRig{c: dockertest.Client(t)}
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	r.mode = string(l.Mode)
	if r.h, err = l.IOHierarchy(); err != nil {
		t.Fatal(err)
	}
	testkit.Need(t, r.h.Version == 1, "the host test expects the cgroup v1 blkio hierarchy (layout %s)", l.Mode)
	r.image = dockertest.BuildImage(t, dockertest.UniqueTag("daemon"), dockertest.Remove())
	loop := testkit.LoopDevice(t, 512)
	testkit.SetScheduler(t, loop.Name, "bfq")
	r.path = loop.Path
	r.dev = actuate.Device{Name: loop.Name, Dev: cgroupfs.Dev{Major: loop.Major, Minor: loop.Minor}, Mech: host.MechBFQWeight}
	r.run = fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	return r
}

func (r dockerRig) options(t *testing.T) Options {
	t.Helper()
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	src, err := docker.New(docker.Options{Engine: r.c, Layout: l, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pc := policy.DefaultConfig()
	pc.BoostAfter = time.Minute // no boost during the test
	return Options{Hierarchy: r.h, CgroupMode: r.mode, Source: source.WithLabel(src, labelRun, r.run), Policy: pc,
		Actuator:     actuate.Config{Devices: []actuate.Device{r.dev}, Reassert: time.Minute},
		ActuatorName: "cgroup", Interval: 100 * time.Millisecond, OrphanGrace: 300 * time.Millisecond}
}

// reader runs a container reading the loop device with O_DIRECT; extra
// flags shape it. It runs until removed (or --duration ends).
func (r dockerRig) reader(t *testing.T, name string, flags ...string) dockertest.Container {
	t.Helper()
	args := append([]string{"workload", "--direct"}, flags...)
	args = append(args, "read", r.path)
	return dockertest.RunContainer(t, r.c, dockertest.RunOptions{Image: r.image,
		Name:    fmt.Sprintf("ddiskqos-test-%s-%s", name, r.run),
		Args:    args,
		Devices: []dockertest.Device{{Host: r.path}},
		Labels:  map[string]string{labelRun: r.run}})
}

// start runs d until the test ends; stop ends it early and returns Run's
// result.
func start(t *testing.T, d *Daemon) (stop func() error) {
	t.Helper()
	_, stop = runDaemon(t, d)
	return stop
}

func byID(s *snapshot.Snapshot, id string) (snapshot.Workload, bool) {
	for _, w := range s.Workloads {
		if w.ID == id {
			return *w, true
		}
	}
	return snapshot.Workload{}, false
}

// deviceWeight reads a cgroup's BFQ weight on the rig's device.
func (r dockerRig) deviceWeight(t *testing.T, cg string) (uint64, bool) {
	t.Helper()
	return realcg.Weight(t, r.h, mech.BFQWeight, r.dev.Dev, cg)
}

func errorCount(s *snapshot.Snapshot, cause string) uint64 {
	for _, e := range s.Errors {
		if e.Cause == cause {
			return e.Count
		}
	}
	return 0
}

// TestRealDockerDaemon: two containers read the same BFQ loop device; the
// bulk reader falls to level 4 (weight 100 in its blkio.bfq.weight_device),
// the small one stays at the top; removing the bulk container releases it
// without an error; shutdown restores the small one's cgroup.
func TestRealDockerDaemon(t *testing.T) {
	r := newDockerRig(t)
	d, err := New(r.options(t))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, d)

	// 16 KiB/s: under 1 MiB in a minute, well inside level 1's 2 MiB.
	small := r.reader(t, "small", "--bs", "4k", "--rate", "16k/s", "--loop", "--span", "1MiB", "--duration", "5m")
	bulk := r.reader(t, "bulk", "--loop", "--offset", "64MiB", "--duration", "2m")
	began := time.Now()

	var levelAt [5]time.Duration
	s := waitFor(t, d, "bulk at level 4", func(s *snapshot.Snapshot) bool {
		w, ok := byID(s, bulk.ID)
		if ok && w.Level >= 1 && w.Level <= 4 && levelAt[w.Level] == 0 {
			levelAt[w.Level] = time.Since(began)
		}
		return ok && w.Level == 4
	})
	var seen []string
	for l := 1; l <= 4; l++ {
		if levelAt[l] > 0 {
			seen = append(seen, fmt.Sprintf("level %d after %s", l, levelAt[l].Round(time.Millisecond)))
		}
	}
	t.Logf("bulk container seen at %s from its start (levels between snapshots polled every 20ms are not listed)",
		strings.Join(seen, ", "))
	wb, _ := byID(s, bulk.ID)
	ws, ok := byID(s, small.ID)
	if !ok {
		t.Fatalf("small container not tracked: %+v", s.Workloads)
	}
	t.Logf("bulk: level %d, %d bytes read at %.0f MB/s; small: level %d, %d bytes read",
		wb.Level, wb.ReadBytes, wb.ReadBps/1e6, ws.Level, ws.ReadBytes)
	if v, _ := r.deviceWeight(t, wb.Cgroup); v != 100 {
		t.Errorf("bulk at level 4: %s blkio.bfq.weight_device on %s = %d, want 100", wb.Cgroup, r.dev.Dev, v)
	}
	if len(wb.Applied) != 1 || wb.Applied[0].Weight != 100 || wb.Applied[0].Error != "" {
		t.Errorf("bulk applied in the snapshot = %+v", wb.Applied)
	}
	// The small reader: let it read a while longer, alongside the bulk one.
	time.Sleep(2 * time.Second)
	s = d.Snapshot()
	ws, _ = byID(s, small.ID)
	if ws.Level > 2 || ws.ReadBytes == 0 {
		t.Errorf("small container at level %d after %d bytes, want level ≤ 2 and some reads", ws.Level, ws.ReadBytes)
	}
	if v, _ := r.deviceWeight(t, ws.Cgroup); v < 500 {
		t.Errorf("small at level %d: weight on %s = %d, want ≥ 500", ws.Level, r.dev.Dev, v)
	}

	// Removing the bulk container releases it, and that is no error.
	dockertest.RemoveContainer(t, r.c, bulk.ID)
	s = waitFor(t, d, "bulk released", func(s *snapshot.Snapshot) bool {
		_, ok := byID(s, bulk.ID)
		return !ok
	})
	if n := errorCount(s, "actuate") + errorCount(s, "sense"); n != 0 {
		t.Errorf("errors after the bulk container went: %+v", s.Errors)
	}

	// Shutdown restores the small container's cgroup: no per-device weight.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if v, ok := r.deviceWeight(t, ws.Cgroup); ok {
		t.Errorf("after shutdown the small container still has weight %d on %s", v, r.dev.Dev)
	}
}

// TestRealDockerDaemonDockerActuator runs the loop with --actuator docker:
// level changes become "docker update --blkio-weight" calls. Where the
// engine applies them the container's HostConfig.BlkioWeight follows the
// level; where it discards them (dockerd 20.10 on kernels without
// blkio.weight, as on this project's CI host) the snapshot must show the
// failure — the paper's actuator silently does nothing there — and the
// container's cgroup must be untouched.
func TestRealDockerDaemonDockerActuator(t *testing.T) {
	r := newDockerRig(t)
	opts := r.options(t)
	opts.ActuatorName = "docker"
	opts.NewActuator = func(cfg actuate.Config, adopted []actuate.Original) (Actuator, error) {
		return actuate.NewDocker(cfg, r.c, adopted)
	}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, d)
	bulk := r.reader(t, "bulk", "--loop", "--duration", "2m")
	s := waitFor(t, d, "bulk at level 4", func(s *snapshot.Snapshot) bool {
		w, ok := byID(s, bulk.ID)
		return ok && w.Level == 4
	})
	if s.Actuator != "docker" {
		t.Errorf("snapshot actuator = %q", s.Actuator)
	}
	wb, _ := byID(s, bulk.ID)
	dir, err := r.h.Path(wb.Cgroup)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.c.ContainerInspect(context.Background(), bulk.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ci := res.Container
	bfq, err := os.ReadFile(filepath.Join(dir, "blkio.bfq.weight"))
	if err != nil {
		t.Fatal(err)
	}
	if len(wb.Applied) != 1 {
		t.Fatalf("applied = %+v, want one entry (the loop device)", wb.Applied)
	}
	ap := wb.Applied[0]
	t.Logf("level 4 via the Engine API: HostConfig.BlkioWeight %d, %s/blkio.bfq.weight %s, applied %+v, errors %+v",
		ci.HostConfig.BlkioWeight, wb.Cgroup, strings.TrimSpace(string(bfq)), ap, s.Errors)
	if strings.Contains(ap.Error, "discarded") {
		// The engine said it dropped the weight: so it must be.
		if ci.HostConfig.BlkioWeight != 0 {
			t.Errorf("engine discarded the weight but HostConfig.BlkioWeight = %d", ci.HostConfig.BlkioWeight)
		}
		if n, _ := strconv.Atoi(strings.TrimSpace(string(bfq))); n != 100 {
			t.Errorf("engine discarded the weight but blkio.bfq.weight = %d, want the default 100", n)
		}
		if errorCount(s, "actuate") == 0 {
			t.Errorf("a discarded weight was not counted as an actuate error: %+v", s.Errors)
		}
		t.Logf("this engine discards --blkio-weight: the Docker actuator cannot give QoS here, the cgroup actuator does")
	} else {
		if ap.Error != "" {
			t.Fatalf("docker actuator failed: %s", ap.Error)
		}
		if ci.HostConfig.BlkioWeight != 100 || ap.Weight != 100 {
			t.Errorf("level 4: HostConfig.BlkioWeight = %d, applied weight %d; want 100", ci.HostConfig.BlkioWeight, ap.Weight)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	res, err = r.c.ContainerInspect(context.Background(), bulk.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ci = res.Container
	if w := ci.HostConfig.BlkioWeight; w != 0 && int(w) != int(actuate.UnsetWeight(opts.Actuator.Devices)) {
		t.Errorf("after shutdown HostConfig.BlkioWeight = %d, want 0 or the kernel default %d", w, actuate.UnsetWeight(opts.Actuator.Devices))
	}
}

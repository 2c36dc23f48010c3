package actuate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/dockertest"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

var _ DockerAPI = (*client.Client)(nil)

// fakeEngine is a DockerAPI over a map of containers.
type fakeEngine struct {
	weights  map[string]uint16 // container id → HostConfig.BlkioWeight
	warnings []string          // returned by every update (the engine discards)
	fail     error             // returned by every call when set
	calls    []string          // "inspect ID", "update ID W"
}

func newFake(ids ...string) *fakeEngine {
	f := &fakeEngine{weights: map[string]uint16{}}
	for _, id := range ids {
		f.weights[id] = 0
	}
	return f
}

func (f *fakeEngine) ContainerInspect(_ context.Context, id string, _ client.ContainerInspectOptions) (client.ContainerInspectResult, error) {
	f.calls = append(f.calls, "inspect "+id)
	if f.fail != nil {
		return client.ContainerInspectResult{}, f.fail
	}
	w, ok := f.weights[id]
	if !ok {
		return client.ContainerInspectResult{}, fmt.Errorf("No such container: %s: %w", id, cerrdefs.ErrNotFound)
	}
	return client.ContainerInspectResult{Container: container.InspectResponse{ID: id,
		HostConfig: &container.HostConfig{Resources: container.Resources{BlkioWeight: w}}}}, nil
}

func (f *fakeEngine) ContainerUpdate(_ context.Context, id string, o client.ContainerUpdateOptions) (client.ContainerUpdateResult, error) {
	var wt uint16
	if o.Resources != nil {
		wt = o.Resources.BlkioWeight
	}
	f.calls = append(f.calls, fmt.Sprintf("update %s %d", id, wt))
	if f.fail != nil {
		return client.ContainerUpdateResult{}, f.fail
	}
	if _, ok := f.weights[id]; !ok {
		return client.ContainerUpdateResult{}, fmt.Errorf("No such container: %s: %w", id, cerrdefs.ErrNotFound)
	}
	if len(f.warnings) > 0 {
		return client.ContainerUpdateResult{Warnings: f.warnings}, nil
	}
	if wt != 0 {
		f.weights[id] = wt
	}
	return client.ContainerUpdateResult{}, nil
}

func (f *fakeEngine) take() []string {
	c := f.calls
	f.calls = nil
	return c
}

var bfqDev = Device{Name: "loop0", Dev: cgroupfs.Dev{Major: 7, Minor: 0}, Mech: host.MechBFQWeight}

func target(id string, level int, w cgroupfs.Weight) Target {
	return Target{ID: id, Cgroup: "/docker/" + id, Level: level, Weight: w}
}

func mustDocker(t *testing.T, cfg Config, f *fakeEngine, adopted ...Original) *Docker {
	t.Helper()
	d, err := NewDocker(cfg, f, adopted)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func expectCalls(t *testing.T, f *fakeEngine, want ...string) {
	t.Helper()
	if got := f.take(); !slices.Equal(got, want) {
		t.Fatalf("engine calls = %q, want %q", got, want)
	}
}

func TestDockerApplyWritesOnlyChanges(t *testing.T) {
	t.Parallel()
	f := newFake("a", "b")
	f.weights["b"] = 300 // docker run --blkio-weight 300
	d := mustDocker(t, Config{Devices: []Device{bfqDev}}, f)
	t0 := time.Unix(1000, 0)

	if _, err := d.Apply(t0, []Target{target("a", 1, 1000), target("b", 1, 1000)}); err != nil {
		t.Fatal(err)
	}
	// Every original is read (and made durable, Config.Persist) before
	// any update.
	expectCalls(t, f, "inspect a", "inspect b", "update a 1000", "update b 1000")
	origs, changed := d.Originals()
	want := []Original{{Cgroup: "a", Knob: dockerKnob}, {Cgroup: "b", Knob: dockerKnob, Value: "300"}}
	if !changed || !slices.Equal(origs, want) {
		t.Fatalf("Originals = %+v, %v; want %+v, true", origs, changed, want)
	}
	if _, changed := d.Originals(); changed {
		t.Fatal("Originals changed again without a write")
	}

	// Same levels: nothing is sent. A level change: one update, no inspect.
	if _, err := d.Apply(t0.Add(time.Second), []Target{target("a", 1, 1000), target("b", 2, 500)}); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, f, "update b 500")
	if ap := d.Applied("b"); len(ap) != 1 || ap[0].Device.Name != bfqDev.Name || ap[0].Weight != 500 || ap[0].Err != nil {
		t.Fatalf("Applied(b) = %+v", ap)
	}

	// Release restores what each container had: 300, or the kernel default
	// (BFQ: 100) for one that had none, since an update cannot unset.
	if err := d.Release("b"); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, f, "update b 300")
	if err := d.Release("a"); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, f, "update a 100")
	if origs, changed := d.Originals(); !changed || len(origs) != 0 {
		t.Fatalf("Originals after release = %+v, %v", origs, changed)
	}
	if d.Applied("a") != nil {
		t.Fatal("released container still has Applied")
	}
}

func TestDockerReassert(t *testing.T) {
	t.Parallel()
	f := newFake("a")
	d := mustDocker(t, Config{Devices: []Device{bfqDev}, Reassert: time.Minute}, f)
	t0 := time.Unix(1000, 0)
	tg := []Target{target("a", 1, 1000)}
	for _, step := range []struct {
		at   time.Duration
		want []string
	}{
		{0, []string{"inspect a", "update a 1000"}},
		{30 * time.Second, nil},
		{time.Minute, []string{"update a 1000"}}, // someone may have changed it
		{90 * time.Second, nil},
	} {
		if _, err := d.Apply(t0.Add(step.at), tg); err != nil {
			t.Fatal(err)
		}
		expectCalls(t, f, step.want...)
	}
}

func TestDockerDiscarded(t *testing.T) {
	t.Parallel()
	f := newFake("a")
	f.warnings = []string{"Your kernel does not support Block I/O weight or the cgroup is not mounted. Weight discarded."}
	d := mustDocker(t, Config{Reassert: time.Minute}, f)
	t0 := time.Unix(1000, 0)

	_, err := d.Apply(t0, []Target{target("a", 1, 1000)})
	if de, ok := errors.AsType[*WeightDiscardedError](err); !ok || de.ID != "a" || de.Weight != 1000 {
		t.Fatalf("Apply = %v, want a WeightDiscardedError", err)
	}
	expectCalls(t, f, "inspect a", "update a 1000")
	ap := d.Applied("a")
	if len(ap) != 1 || ap[0].Device.Name != "all" || ap[0].Device.Mech != mech.DockerWeight || !isDiscarded(ap[0].Err) {
		t.Fatalf("Applied(a) = %+v: want the pseudo-device all with the discard", ap)
	}
	// Not retried every tick: only on a level change or after Reassert.
	if _, err := d.Apply(t0.Add(time.Second), []Target{target("a", 1, 1000)}); err != nil {
		t.Fatalf("Apply of the same discarded weight = %v, want nil (not resent)", err)
	}
	expectCalls(t, f)
	if _, err := d.Apply(t0.Add(2*time.Second), []Target{target("a", 2, 500)}); !isDiscarded(err) {
		t.Fatalf("Apply of a new level = %v", err)
	}
	expectCalls(t, f, "update a 500")
	if _, err := d.Apply(t0.Add(time.Minute), []Target{target("a", 2, 500)}); !isDiscarded(err) {
		t.Fatalf("Apply after Reassert = %v", err)
	}
	expectCalls(t, f, "update a 500")
	// Restoring on an engine that discards: none of ours was in force.
	if err := d.RestoreAll(); err != nil {
		t.Fatalf("RestoreAll on a discarding engine = %v", err)
	}
	expectCalls(t, f, "update a 100")
}

func TestDockerContainerGone(t *testing.T) {
	t.Parallel()
	f := newFake("a", "b")
	d := mustDocker(t, Config{Devices: []Device{bfqDev}}, f)
	t0 := time.Unix(1000, 0)
	if _, err := d.Apply(t0, []Target{target("a", 1, 1000), target("b", 1, 1000)}); err != nil {
		t.Fatal(err)
	}
	f.take()
	delete(f.weights, "a")
	delete(f.weights, "b")
	// a gone at a level change (update fails), b gone before release.
	if _, err := d.Apply(t0.Add(time.Second), []Target{target("a", 2, 500), {ID: "gone", Weight: 1000, Level: 1}}); err != nil {
		t.Fatalf("Apply with vanished containers = %v, want nil", err)
	}
	expectCalls(t, f, "inspect gone", "update a 500")
	if d.Applied("a") != nil || d.Applied("gone") != nil {
		t.Fatal("vanished containers still tracked")
	}
	if err := d.Release("b"); err != nil {
		t.Fatalf("Release of a vanished container = %v", err)
	}
	if origs, _ := d.Originals(); len(origs) != 0 {
		t.Fatalf("originals of vanished containers kept: %+v", origs)
	}
}

func TestDockerEngineError(t *testing.T) {
	t.Parallel()
	f := newFake("a")
	d := mustDocker(t, Config{Devices: []Device{bfqDev}}, f)
	t0 := time.Unix(1000, 0)
	f.fail = errors.New("connection refused")
	_, err := d.Apply(t0, []Target{target("a", 1, 1000)})
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Apply = %v", err)
	}
	if ap := d.Applied("a"); len(ap) != 1 || ap[0].Err == nil {
		t.Fatalf("Applied(a) = %+v: want the error recorded", ap)
	}
	// Retried next tick, and it works once the engine is back.
	f.fail = nil
	f.take()
	if _, err := d.Apply(t0.Add(time.Second), []Target{target("a", 1, 1000)}); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, f, "inspect a", "update a 1000")
	if ap := d.Applied("a"); ap[0].Err != nil || ap[0].Weight != 1000 {
		t.Fatalf("Applied(a) = %+v", ap)
	}
	// An invalid weight is refused without a call.
	if _, err := d.Apply(t0.Add(2*time.Second), []Target{target("a", 1, 5)}); err == nil {
		t.Fatal("weight 5 accepted")
	}
	expectCalls(t, f)
}

func TestDockerExemptReleased(t *testing.T) {
	t.Parallel()
	f := newFake("a")
	f.weights["a"] = 700
	d := mustDocker(t, Config{Devices: []Device{bfqDev}}, f)
	t0 := time.Unix(1000, 0)
	if _, err := d.Apply(t0, []Target{target("a", 1, 1000)}); err != nil {
		t.Fatal(err)
	}
	f.take()
	if _, err := d.Apply(t0.Add(time.Second), []Target{{ID: "a", Exempt: true}}); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, f, "update a 700")
	if d.Applied("a") != nil || f.weights["a"] != 700 {
		t.Fatalf("exempt container: Applied %+v, weight %d", d.Applied("a"), f.weights["a"])
	}
	// Exempt and never seen: nothing at all.
	if _, err := d.Apply(t0.Add(2*time.Second), []Target{{ID: "a", Exempt: true}}); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, f)
}

func TestDockerDryRun(t *testing.T) {
	t.Parallel()
	f := newFake("a")
	d := mustDocker(t, Config{Devices: []Device{bfqDev}, DryRun: true}, f)
	if _, err := d.Apply(time.Unix(1000, 0), []Target{target("a", 3, 250)}); err != nil {
		t.Fatal(err)
	}
	if ap := d.Applied("a"); len(ap) != 1 || ap[0].Weight != 250 {
		t.Fatalf("dry-run Applied = %+v", ap)
	}
	if err := d.Release("a"); err != nil {
		t.Fatal(err)
	}
	if err := d.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, f)
	if origs, _ := d.Originals(); len(origs) != 0 {
		t.Fatalf("dry run recorded originals %+v", origs)
	}
}

func TestDockerAdoptedOriginals(t *testing.T) {
	t.Parallel()
	idLive := strings.Repeat("1", 64)
	idGone := strings.Repeat("2", 64)
	idTracked := strings.Repeat("3", 64)
	f := newFake(idLive, idTracked)
	adopted := []Original{
		{Cgroup: idGone, Knob: dockerKnob, Value: "300"},
		{Cgroup: idLive, Knob: dockerKnob},
		{Cgroup: idTracked, Knob: dockerKnob, Value: "600"},
	}
	d := mustDocker(t, Config{Devices: []Device{{Name: "sda", Mech: host.MechCFQWeight}}}, f, adopted...)
	// The adopted original is the truth: no inspect before the first write.
	if _, err := d.Apply(time.Unix(1000, 0), []Target{target(idTracked, 4, 100)}); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, f, "update "+idTracked+" 100")
	// idLive's container runs (its cgroup is live) but is not tracked yet;
	// idGone's is not there: restored (not found: nothing to do).
	if err := d.RestoreOrphans(map[string]bool{"/docker/" + idLive: true, "/docker/" + idTracked: true}); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, f, "update "+idGone+" 300")
	origs, _ := d.Originals()
	if len(origs) != 2 || origs[0].Cgroup != idLive || origs[1].Cgroup != idTracked {
		t.Fatalf("originals after RestoreOrphans = %+v", origs)
	}
	// Shutdown: the unset one gets CFQ's default, 500; the other its 600.
	if err := d.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, f, "update "+idLive+" 500", "update "+idTracked+" 600")
	if f.weights[idTracked] != 600 || f.weights[idLive] != 500 {
		t.Fatalf("weights after RestoreAll: %v", f.weights)
	}
}

func TestNewDockerRefusesCgroupOriginals(t *testing.T) {
	t.Parallel()
	_, err := NewDocker(Config{}, newFake(), []Original{{Cgroup: "/docker/x", Knob: "bfq", DevStr: "7:0"}})
	if err == nil || !strings.Contains(err.Error(), "--actuator cgroup") {
		t.Fatalf("NewDocker with a bfq original = %v", err)
	}
	if _, err := NewDocker(Config{}, nil, nil); err == nil {
		t.Fatal("NewDocker without a client succeeded")
	}
}

func TestDockerAppliedPerDeviceAndTop(t *testing.T) {
	t.Parallel()
	thr := Device{Name: "sdb", Dev: cgroupfs.Dev{Major: 8, Minor: 16}, Mech: host.MechThrottle}
	f := newFake("a", "b")
	d := mustDocker(t, Config{Devices: []Device{bfqDev, thr}}, f)
	ta, tb := target("a", 2, 500), target("b", 4, 100)
	ta.Active, tb.Active = []bool{true, false}, []bool{true, true}
	st, err := d.Apply(time.Unix(1000, 0), []Target{ta, tb})
	if err != nil {
		t.Fatal(err)
	}
	ap := d.Applied("a")
	if len(ap) != 2 || ap[0].Device.Name != bfqDev.Name || ap[1].Device.Name != thr.Name || ap[0].Weight != 500 || ap[1].Weight != 500 {
		t.Fatalf("Applied(a) = %+v: want the one weight on both devices", ap)
	}
	if len(st) != 2 || st[0].TopActive != 2 || st[1].TopActive != 4 || st[0].Device.Name != bfqDev.Name || st[0].Capping {
		t.Fatalf("device status = %+v; want top levels 2, 4 and no caps", st)
	}
	if !reflect.DeepEqual(d.Devices(), []Device{bfqDev, thr}) {
		t.Fatalf("Devices = %+v", d.Devices())
	}
}

func TestUnsetWeight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		devs []Device
		want uint16
	}{
		{nil, 100},
		{[]Device{{Mech: host.MechThrottle}, {Mech: host.MechBFQWeight}}, 100},
		{[]Device{{Mech: host.MechCFQWeight}}, 500},
		{[]Device{{Mech: host.MechIOCostWeight}}, 20},
	} {
		if got := UnsetWeight(tc.devs); got != tc.want {
			t.Errorf("UnsetWeight(%+v) = %d, want %d", tc.devs, got, tc.want)
		}
	}
	// 20 is the docker weight whose io.weight is nearest iocost's default
	// 100 through runc's mapping (Docker's weights go through runc, not
	// internal/mech's iocost scale).
	runc := func(w uint64) uint64 { return 1 + (w-10)*9999/990 }
	if n := runc(20); n < 100 || n > 110 || runc(19) > 100 {
		t.Errorf("io.weight of docker weight 20 = %d, of 19 = %d", n, runc(19))
	}
}

// ioCgroupDir returns the directory of pid's cgroup in the I/O hierarchy.
func ioCgroupDir(t *testing.T, pid int) string {
	t.Helper()
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.IOHierarchy()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 7:blkio:/docker/<id>   or   0::/system.slice/docker-<id>.scope
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if (h.Version == 1 && slices.Contains(strings.Split(parts[1], ","), "blkio")) || (h.Version == 2 && parts[0] == "0") {
			rel := parts[2]
			if h.Version == 1 {
				m, _ := l.V1Controller("blkio")
				if r, err := filepath.Rel(m.Root, rel); err == nil {
					rel = "/" + r
				}
			}
			p, err := h.Path(rel)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	t.Fatalf("no I/O cgroup line in /proc/%d/cgroup", pid)
	return ""
}

// bfqDefaultWeight reads the cgroup's BFQ default weight (v1
// blkio.bfq.weight "N", v2 io.bfq.weight "default N").
func bfqDefaultWeight(t *testing.T, dir string) string {
	t.Helper()
	for _, name := range []string{"blkio.bfq.weight", "io.bfq.weight"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		w, err := cgroupfs.ParseWeights(b, name)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(w.Default)
	}
	return "(no bfq weight file)"
}

// TestRealDockerActuator drives the Docker actuator against this machine's
// engine and reports what "docker update --blkio-weight" does here. On an
// engine that applies weights the container's HostConfig and its cgroup's
// BFQ weight follow each level; on one that discards them (dockerd 20.10 on
// a kernel without blkio.weight) the actuator must say so instead of
// pretending, and must write nothing.
func TestRealDockerActuator(t *testing.T) {
	testkit.NeedRoot(t)
	c := dockertest.Client(t)
	ref := dockertest.BuildImage(t, dockertest.UniqueTag("actuate"), dockertest.Remove())
	ctr := dockertest.RunContainer(t, c, dockertest.RunOptions{Image: ref,
		Args: []string{"workload", "--loop", "--bs", "4k", "--rate", "4k", "--duration", "5m", "read", "/ddiskqos"}})
	pid := dockertest.WaitRunning(t, c, ctr.ID, 30*time.Second)
	dir := ioCgroupDir(t, pid)
	before := bfqDefaultWeight(t, dir)

	d, err := NewDocker(Config{Devices: []Device{bfqDev}}, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, err = d.Apply(t0, []Target{target(ctr.ID, 2, 500)})
	inspect := func() uint16 {
		t.Helper()
		ci, err := c.ContainerInspect(context.Background(), ctr.ID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ci.Container.HostConfig.BlkioWeight
	}
	origs, _ := d.Originals()
	if len(origs) != 1 || origs[0].Cgroup != ctr.ID || origs[0].Value != "" {
		t.Fatalf("originals = %+v: want one unset original of %.12s", origs, ctr.ID)
	}
	if de, ok := errors.AsType[*WeightDiscardedError](err); ok {
		t.Logf("this engine discards blkio weights: %v", de)
		if w := inspect(); w != 0 {
			t.Errorf("engine discarded the weight but HostConfig.BlkioWeight = %d", w)
		}
		if after := bfqDefaultWeight(t, dir); after != before {
			t.Errorf("engine discarded the weight but the cgroup's BFQ weight went %s → %s", before, after)
		}
		if ap := d.Applied(ctr.ID); len(ap) != 1 || !isDiscarded(ap[0].Err) {
			t.Errorf("Applied = %+v: want the discard recorded", ap)
		}
		if _, err := d.Apply(t0.Add(time.Second), []Target{target(ctr.ID, 2, 500)}); err != nil {
			t.Errorf("same discarded weight resent: %v", err)
		}
	} else {
		if err != nil {
			t.Fatal(err)
		}
		if w := inspect(); w != 500 {
			t.Fatalf("HostConfig.BlkioWeight after update = %d, want 500", w)
		}
		t.Logf("this engine applies blkio weights: cgroup %s BFQ weight %s → %s", dir, before, bfqDefaultWeight(t, dir))
		if _, err := d.Apply(t0.Add(time.Second), []Target{target(ctr.ID, 4, 100)}); err != nil {
			t.Fatal(err)
		}
		if w := inspect(); w != 100 {
			t.Fatalf("HostConfig.BlkioWeight at level 4 = %d, want 100", w)
		}
	}
	if err := d.Release(ctr.ID); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if after := bfqDefaultWeight(t, dir); after != before {
		t.Errorf("after release the cgroup's BFQ weight is %s, was %s", after, before)
	}

	// A container that has gone is not an error.
	dockertest.RemoveContainer(t, c, ctr.ID)
	if _, err := d.Apply(t0.Add(2*time.Second), []Target{target(ctr.ID, 1, 1000)}); err != nil {
		t.Fatalf("Apply on a removed container = %v", err)
	}
	if d.Applied(ctr.ID) != nil {
		t.Fatal("removed container still tracked")
	}
}

// TestDockerUpdateWaitsForDurableOriginal: no container is updated before
// Config.Persist has stored its original; a failed Persist leaves it as it
// was and is tried again at the next Apply.
func TestDockerUpdateWaitsForDurableOriginal(t *testing.T) {
	t.Parallel()
	f := newFake("a")
	f.weights["a"] = 300
	var saved [][]Original
	fail := errors.New("read-only file system")
	cfg := Config{Devices: []Device{bfqDev}, Persist: func(o []Original) error {
		if fail != nil {
			return fail
		}
		saved = append(saved, o)
		return nil
	}}
	d := mustDocker(t, cfg, f)
	t0 := time.Unix(1000, 0)
	_, err := d.Apply(t0, []Target{target("a", 1, 1000)})
	if err == nil || !strings.Contains(err.Error(), "not durable") {
		t.Fatalf("Apply with a failing Persist = %v", err)
	}
	expectCalls(t, f, "inspect a")
	if f.weights["a"] != 300 || d.Applied("a")[0].Err == nil {
		t.Fatalf("updated before its original was durable: weight %d, applied %+v", f.weights["a"], d.Applied("a"))
	}
	fail = nil
	if _, err := d.Apply(t0.Add(time.Second), []Target{target("a", 1, 1000)}); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, f, "update a 1000")
	if len(saved) != 1 || saved[0][0].Value != "300" || f.weights["a"] != 1000 {
		t.Fatalf("saved %+v, weight %d", saved, f.weights["a"])
	}
}

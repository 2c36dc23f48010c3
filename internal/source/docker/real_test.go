package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// sleeperSrc is PID 1 of the test containers: it sleeps until SIGTERM, so
// "docker stop" ends it at once.
const sleeperSrc = `package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
`

// realEngine connects to the engine of this machine or skips (fails under
// DDISKQOS_REQUIRE_REAL=1).
func realEngine(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(client.FromEnv)
	testkit.Need(t, err == nil, "docker client: %v", err)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = c.Ping(ctx, client.PingOptions{})
	testkit.Need(t, err == nil, "docker engine not reachable at %s: %v", c.DaemonHost(), err)
	return c
}

// sleeperImage builds a static sleeper, imports it as a one-file image under
// a tag unique to this test, and removes the image when the test ends.
// There is no registry to pull from.
func sleeperImage(t *testing.T, c *client.Client) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	testkit.Need(t, err == nil, "go toolchain not in PATH (to build the test image)")
	dir := t.TempDir()
	for name, text := range map[string]string{"main.go": sleeperSrc, "go.mod": "module sleeper\n\ngo 1.22\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", "sleeper", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build sleeper: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(filepath.Join(dir, "sleeper"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "sleeper", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(bin); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ref := fmt.Sprintf("ddiskqos-test-sleeper:source-%d-%d", os.Getpid(), time.Now().UnixNano())
	ctx := context.Background()
	rc, err := c.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{})
	if err != nil {
		t.Fatalf("import image %s: %v", ref, err)
	}
	msg, _ := io.ReadAll(rc)
	rc.Close()
	t.Cleanup(func() {
		if _, err := c.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
			t.Errorf("remove image %s: %v", ref, err)
		}
	})
	if _, err := c.ImageInspect(ctx, ref); err != nil {
		t.Fatalf("image %s not there after import (%s): %v", ref, msg, err)
	}
	return ref
}

// createContainer creates a sleeper container, removed (forcibly) when the
// test ends, also on failure.
func createContainer(t *testing.T, c *client.Client, ref, name string, labels map[string]string, parent string) string {
	t.Helper()
	cr, err := c.ContainerCreate(context.Background(), client.ContainerCreateOptions{Name: name,
		Config:     &container.Config{Image: ref, Cmd: []string{"/sleeper"}, Labels: labels},
		HostConfig: &container.HostConfig{NetworkMode: "none", Resources: container.Resources{CgroupParent: parent}}})
	if err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, err := c.ContainerRemove(context.Background(), cr.ID, client.ContainerRemoveOptions{Force: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove container %s: %v", name, err)
		}
	})
	return cr.ID
}

func startContainer(t *testing.T, c *client.Client, id string) {
	t.Helper()
	if _, err := c.ContainerStart(context.Background(), id, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start container %.12s: %v", id, err)
	}
}

// ours filters the source's events down to the containers of this test
// and Synced: other tests may run containers on the same engine at the
// same time.
type ours struct {
	t   *testing.T
	ch  <-chan source.Event
	ids map[string]bool
}

func (o *ours) next(within time.Duration) (source.Event, bool) {
	o.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev := <-o.ch:
			if o.ids[ev.Workload.ID] || ev.Kind == source.Synced {
				return ev, true
			}
		case <-deadline:
			return source.Event{}, false
		}
	}
}

func (o *ours) expect(kind source.EventKind, id string) source.Workload {
	o.t.Helper()
	ev, ok := o.next(10 * time.Second)
	if !ok {
		o.t.Fatalf("no %v event for %.12s within 10s", kind, id)
	}
	if ev.Kind != kind || ev.Workload.ID != id {
		o.t.Fatalf("event = %v %.12s, want %v %.12s", ev.Kind, ev.Workload.ID, kind, id)
	}
	return ev.Workload
}

// TestRealDocker runs the source against this machine's engine: a container
// running before the source starts is listed, one started later arrives by
// event, docker update gives Updated, stop gives Removed, and every reported
// cgroup exists in the I/O hierarchy and holds the container's main pid.
func TestRealDocker(t *testing.T) {
	testkit.NeedRoot(t)
	c := realEngine(t)
	layout, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	h, err := layout.IOHierarchy()
	if err != nil {
		t.Fatal(err)
	}
	ir, err := c.Info(context.Background(), client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := ir.Info
	t.Logf("engine %s, API %s, cgroup driver %s, cgroup v%s, layout %s, I/O hierarchy v%d at %s",
		info.ServerVersion, c.ClientVersion(), info.CgroupDriver, info.CgroupVersion, layout.Mode, h.Version, h.Mount)

	ref := sleeperImage(t, c)
	uniq := strconv.FormatInt(time.Now().UnixNano(), 36)
	labels := map[string]string{"ddiskqos.test": "source", "ddiskqos.level": "high"}
	idA := createContainer(t, c, ref, "ddiskqos-test-src-a-"+uniq, labels, "")
	startContainer(t, c, idA)

	// No Engine: Run makes its own client from the environment, as the
	// daemon does.
	s, err := New(Options{Layout: layout, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan source.Event, 64)
	testkit.Background(t, 10*time.Second, func(ctx context.Context) error { return s.Run(ctx, out) })

	o := &ours{t: t, ch: out, ids: map[string]bool{idA: true}}
	check := func(wl source.Workload, name, wantCgroup string) {
		t.Helper()
		if wl.Name != name || !wl.Equal(source.Workload{ID: wl.ID, Name: name, Labels: labels, Cgroup: wl.Cgroup, Pid: wl.Pid}) {
			t.Errorf("workload %+v: want name %s, labels %v", wl, name, labels)
		}
		if wl.Cgroup != wantCgroup {
			t.Errorf("cgroup of %s = %s, want %s", name, wl.Cgroup, wantCgroup)
		}
		// The computation agreed; make sure /proc was read and agrees too,
		// not merely fallen back from.
		if p, err := s.resolver.fromProc(wl.ID, wl.Pid); err != nil || p != wl.Cgroup {
			t.Errorf("cgroup of %s from /proc/%d/cgroup = %q, %v; want %s", name, wl.Pid, p, err, wl.Cgroup)
		}
		dir, err := h.Path(wl.Cgroup)
		if err != nil {
			t.Fatal(err)
		}
		procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			t.Fatalf("cgroup of %s: %v", name, err)
		}
		if !slices.Contains(strings.Fields(string(procs)), strconv.Itoa(wl.Pid)) {
			t.Errorf("pid %d of %s not in %s/cgroup.procs (%q)", wl.Pid, name, dir, procs)
		}
	}
	want := func(id, parent string) string {
		t.Helper()
		p, err := ComputeCgroup(info.CgroupDriver, parent, id)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Listed at start.
	wlA := o.expect(source.Added, idA)
	check(wlA, "ddiskqos-test-src-a-"+uniq, want(idA, ""))
	// Other tests' containers may be listed after A; Synced comes after
	// all of them.
	o.expect(source.Synced, "")

	// Started afterwards, with its own cgroup parent: arrives by event, and
	// /proc and the configuration agree on where it lives.
	parent := "/ddiskqos-test-src-" + uniq
	if info.CgroupDriver == DriverSystemd {
		parent = "ddiskqos-test-src-" + uniq + ".slice"
	}
	t.Cleanup(func() { removeParent(t, layout, parent, info.CgroupDriver) })
	nameB := "ddiskqos-test-src-b-" + uniq
	idB := createContainer(t, c, ref, nameB, labels, parent)
	o.ids[idB] = true // before it starts: the event may beat this goroutine
	startContainer(t, c, idB)
	wlB := o.expect(source.Added, idB)
	check(wlB, nameB, want(idB, parent))

	// docker update --blkio-weight: Updated (20.10 emits "update").
	if _, err := c.ContainerUpdate(context.Background(), idB, client.ContainerUpdateOptions{Resources: &container.Resources{BlkioWeight: 300}}); err != nil {
		t.Fatalf("update %s: %v", nameB, err)
	}
	if wl := o.expect(source.Updated, idB); !wl.Equal(wlB) {
		t.Errorf("updated workload %+v, want %+v", wl, wlB)
	}

	// stop: Removed; rm afterwards: nothing more.
	if _, err := c.ContainerStop(context.Background(), idB, client.ContainerStopOptions{}); err != nil {
		t.Fatalf("stop %s: %v", nameB, err)
	}
	o.expect(source.Removed, idB)
	if _, err := c.ContainerRemove(context.Background(), idB, client.ContainerRemoveOptions{}); err != nil {
		t.Fatalf("rm %s: %v", nameB, err)
	}
	// rm -f of a running container: Removed.
	if _, err := c.ContainerRemove(context.Background(), idA, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatalf("rm -f %.12s: %v", idA, err)
	}
	o.expect(source.Removed, idA)
	if ev, ok := o.next(300 * time.Millisecond); ok {
		t.Errorf("unexpected event after removal: %v %.12s", ev.Kind, ev.Workload.ID)
	}
}

// removeParent removes the cgroup parent the engine made for a test
// container in every hierarchy (runc creates it and never removes it).
func removeParent(t *testing.T, l cgroupfs.Layout, parent, driver string) {
	t.Helper()
	rel := parent
	if driver == DriverSystemd {
		p, err := ExpandSlice(parent)
		if err != nil {
			return
		}
		rel = p // systemd removes empty slices itself; best effort here
	}
	var mounts []string
	for _, m := range l.V1 {
		mounts = append(mounts, m.Mountpoint)
	}
	if l.Unified != "" {
		mounts = append(mounts, l.Unified)
	}
	for _, m := range mounts {
		dir, err := (cgroupfs.Hierarchy{Mount: m}).Path(rel)
		if err != nil || dir == filepath.Clean(m) {
			continue
		}
		if _, err := os.Stat(dir); err == nil {
			testkit.RemoveCgroup(t, dir)
		}
	}
}

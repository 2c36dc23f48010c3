package cgroupdir

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestLXCRealContainer starts a real LXC container (Debian's lxc, the
// busybox template, no network) and checks that the lxc layout at the I/O
// hierarchy's root reports it by its name when it starts and as removed
// when it stops, and never its monitor. It covers the source only; the
// daemon over real LXC containers is cmd/ddiskqos's TestRealV1LXC. Events
// of other containers (that test's, run at the same time by go test ./...)
// are passed over.
func TestLXCRealContainer(t *testing.T) {
	testkit.HostOnly(t)
	testkit.NeedRoot(t)
	for _, bin := range []string{"lxc-create", "lxc-start", "lxc-stop", "lxc-destroy", "busybox"} {
		_, err := exec.LookPath(bin)
		testkit.Need(t, err == nil, "%s not found (apt-get install -y lxc busybox-static): %v", bin, err)
	}
	layout, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	h, err := layout.IOHierarchy()
	if err != nil {
		t.Fatal(err)
	}
	testkit.Need(t, h.Version == 1, "LXC's layout at the root is tested on v1 blkio; this host's I/O hierarchy is v%d", h.Version)
	name := fmt.Sprintf("ddq-lxc-%d", os.Getpid())
	conf := filepath.Join(t.TempDir(), "lxc.conf")
	if err := os.WriteFile(conf, []byte("lxc.net.0.type = empty\nlxc.apparmor.profile = unconfined\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lxc := func(args ...string) error {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %w: %s", args, err, out)
		}
		return nil
	}
	if err := lxc("lxc-create", "-n", name, "-t", "busybox", "-f", conf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lxc("lxc-stop", "-k", "-n", name)
		if err := lxc("lxc-destroy", "-n", name); err != nil {
			t.Error(err)
		}
		// LXC leaves its monitor's cgroup and lxc.pivot in every hierarchy.
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/lxc.monitor." + name)
		pivots, _ := filepath.Glob("/sys/fs/cgroup/*/lxc.pivot")
		for _, d := range append(dirs, pivots...) {
			os.Remove(d)
		}
	})
	s, err := New(Options{Hierarchy: h, Layout: LayoutLXC, Parent: "/", Rescan: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ch := ownEvents(t, run(t, s), name)
	expectSynced(t, ch, 5*time.Second) // nothing of ours yet
	start := time.Now()
	if err := lxc("lxc-start", "-n", name); err != nil {
		t.Fatal(err)
	}
	want := source.Workload{ID: name, Name: name, Cgroup: "/lxc.payload." + name}
	expectWL(t, ch, 5*time.Second, source.Added, want)
	t.Logf("container %s seen %s after lxc-start", name, time.Since(start))
	if err := lxc("lxc-stop", "-k", "-n", name); err != nil {
		t.Fatal(err)
	}
	expectWL(t, ch, 5*time.Second, source.Removed, want)
}

// ownEvents passes on the events of in that are about the workload name,
// and Synced; those of other workloads are dropped.
func ownEvents(t *testing.T, in <-chan source.Event, name string) <-chan source.Event {
	out := make(chan source.Event)
	testkit.Background(t, 5*time.Second, func(ctx context.Context) error {
		for {
			select {
			case ev := <-in:
				if ev.Kind != source.Synced && ev.Workload.Name != name {
					continue
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return nil
				}
			case <-ctx.Done():
				return nil
			}
		}
	})
	return out
}

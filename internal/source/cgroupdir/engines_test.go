package cgroupdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

func TestLXCNameAndLibpodID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, name string }{
		{"lxc.payload.web1", "web1"},
		{"lxc.payload.a.b-c", "a.b-c"},
		{"lxc.payload.", ""},
		{"lxc.monitor.web1", ""},
		{"lxc.pivot", ""},
		{"lxc.payload", ""},
		{"system.slice", ""},
	} {
		name, ok := lxcName(tc.in)
		if ok != (tc.name != "") || ok && name != tc.name {
			t.Errorf("lxcName(%q) = %q %v, want %q", tc.in, name, ok, tc.name)
		}
	}
	for _, tc := range []struct{ in, id string }{
		{"libpod-" + ctr1, ctr1},
		{"libpod-" + ctr1 + ".scope", ctr1},
		{"libpod-conmon-" + ctr1 + ".scope", ""},
		{"libpod-conmon-" + ctr1, ""},
		{"libpod-", ""},
		{"libpod-.scope", ""},
		{"conmon", ""},
		{"machine-qemu\\x2d1.scope", ""},
	} {
		id, ok := libpodID(tc.in)
		if ok != (tc.id != "") || id != tc.id {
			t.Errorf("libpodID(%q) = %q %v, want %q", tc.in, id, ok, tc.id)
		}
	}
}

// engineTree drives a source over a fake tree below mount: dirs made
// first, the workloads expected (in order), one directory made later and
// one removed, each with its event.
type engineTree struct {
	name, parent string
	layout       Layout // as given; "" is auto
	dirs         []string
	want         []source.Workload
	later        string
	laterWant    source.Workload
	gone         string
	goneWant     source.Workload
}

func TestLXCAndPodmanTrees(t *testing.T) {
	t.Parallel()
	lxc := func(parent, name string, extra ...string) source.Workload {
		return source.Workload{ID: name, Name: name, Cgroup: filepath.Join(parent, "lxc.payload."+name), Labels: labels(extra...)}
	}
	pod := func(parent, dir, id string) source.Workload {
		return source.Workload{ID: id, Name: id[:12], Cgroup: filepath.Join(parent, dir)}
	}
	// LXC 5 on v1: siblings at the hierarchy's root, beside the system's
	// own cgroups and the Docker engine's.
	lxcRoot := []string{"lxc.payload.web1", "lxc.monitor.web1", "lxc.payload.db", "lxc.monitor.db",
		"lxc.pivot", "system.slice", "init.scope", "docker", "user.slice"}
	for _, tc := range []engineTree{
		{name: "lxc at the root, auto", parent: "/", dirs: lxcRoot,
			want:  []source.Workload{lxc("/", "db", policy.LabelLevel, "4"), lxc("/", "web1")},
			later: "lxc.payload.new", laterWant: lxc("/", "new"),
			gone: "lxc.payload.web1", goneWant: lxc("/", "web1")},
		{name: "lxc at the root", parent: "/", layout: LayoutLXC, dirs: append(lxcRoot, "lxc.payload.web1/nested"),
			want:  []source.Workload{lxc("/", "db", policy.LabelLevel, "4"), lxc("/", "web1")},
			later: "lxc.monitor.new", // a monitor is never a workload: the removal comes next
			gone:  "lxc.payload.db", goneWant: lxc("/", "db", policy.LabelLevel, "4")},
		// lxc.cgroup.dir = lxc, or v2 below the cgroup lxc-start ran in.
		{name: "lxc below lxc.cgroup.dir, auto by the tree", parent: "/lxc", dirs: []string{"lxc.payload.web1", "lxc.monitor.web1", "other"},
			want:  []source.Workload{lxc("/lxc", "web1")},
			later: "lxc.payload.web2", laterWant: lxc("/lxc", "web2"),
			gone: "lxc.payload.web1", goneWant: lxc("/lxc", "web1")},
		{name: "lxc below a parent, empty at start", parent: "/user.slice/lxc.scope", layout: LayoutLXC, dirs: []string{"lxc.pivot"},
			later: "lxc.payload.web1", laterWant: lxc("/user.slice/lxc.scope", "web1"),
			gone: "lxc.payload.web1", goneWant: lxc("/user.slice/lxc.scope", "web1")},
		{name: "podman cgroupfs, auto by name", parent: "/libpod_parent", dirs: []string{"libpod-" + ctr1, "conmon"},
			want:  []source.Workload{pod("/libpod_parent", "libpod-"+ctr1, ctr1)},
			later: "libpod-" + ctr2, laterWant: pod("/libpod_parent", "libpod-"+ctr2, ctr2),
			gone: "libpod-" + ctr1, goneWant: pod("/libpod_parent", "libpod-"+ctr1, ctr1)},
		{name: "podman systemd, auto by the tree", parent: "/machine.slice",
			dirs:  []string{"libpod-" + ctr1 + ".scope", "libpod-conmon-" + ctr1 + ".scope", "machine-qemu.scope"},
			want:  []source.Workload{pod("/machine.slice", "libpod-"+ctr1+".scope", ctr1)},
			later: "libpod-" + ctr2 + ".scope", laterWant: pod("/machine.slice", "libpod-"+ctr2+".scope", ctr2),
			gone: "libpod-" + ctr1 + ".scope", goneWant: pod("/machine.slice", "libpod-"+ctr1+".scope", ctr1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mount := t.TempDir()
			h := cgroupfs.Hierarchy{Version: 1, Mount: mount}
			mk := func(rel string) {
				if err := os.MkdirAll(filepath.Join(mount, tc.parent, rel), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			mk("")
			for _, d := range tc.dirs {
				mk(d)
			}
			if err := os.WriteFile(filepath.Join(mount, tc.parent, "lxc.payload.file"), nil, 0o644); err != nil {
				t.Fatal(err) // a file, as cgroupfs' own, is never a workload
			}
			s, err := New(Options{Hierarchy: h, Parent: tc.parent, Layout: tc.layout, Rescan: time.Hour,
				Levels: []LevelGlob{{Glob: "db", Level: 4}}})
			if err != nil {
				t.Fatal(err)
			}
			want := LayoutLXC
			if strings.Contains(tc.name, "podman") {
				want = LayoutPodman
			}
			if s.Layout() != want {
				t.Fatalf("layout %s, want %s", s.Layout(), want)
			}
			ch := run(t, s)
			const within = 2 * time.Second
			for _, w := range tc.want {
				expectWL(t, ch, within, source.Added, w)
			}
			expectSynced(t, ch, within)
			mk(tc.later)
			if tc.laterWant.ID != "" {
				expectWL(t, ch, within, source.Added, tc.laterWant)
			}
			if err := os.Remove(filepath.Join(mount, tc.parent, tc.gone)); err != nil {
				t.Fatal(err)
			}
			expectWL(t, ch, within, source.Removed, tc.goneWant)
		})
	}
}

func TestLayoutAtTheRoot(t *testing.T) {
	t.Parallel()
	h := cgroupfs.Hierarchy{Version: 1, Mount: t.TempDir()}
	for _, l := range []Layout{LayoutChildren, LayoutKubepods} {
		if _, err := New(Options{Hierarchy: h, Parent: "/", Layout: l}); err == nil || !strings.Contains(err.Error(), "--cgroup-layout lxc") {
			t.Errorf("layout %s at the root: err %v, want a refusal naming --cgroup-layout lxc", l, err)
		}
	}
	if _, err := New(Options{Hierarchy: h, Parent: "/", Layout: "lxd"}); err == nil || !strings.Contains(err.Error(), `"lxd"`) {
		t.Errorf("layout lxd: err %v, want one naming it", err)
	}
	for parent, want := range map[string]Layout{"/": LayoutLXC, "/lxc": LayoutChildren, "/x/libpod_parent": LayoutPodman, "/kubepods.slice": LayoutKubepods} {
		s, err := New(Options{Hierarchy: h, Parent: parent})
		if err != nil || s.Layout() != want {
			t.Errorf("auto for %s: %v %v, want %s", parent, s.Layout(), err, want)
		}
	}
}

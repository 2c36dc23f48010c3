package cgroupdir

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// expectWL waits up to within for the next event and checks it against
// want, labels included.
func expectWL(t *testing.T, ch <-chan source.Event, within time.Duration, kind source.EventKind, want source.Workload) {
	t.Helper()
	select {
	case ev := <-ch:
		if ev.Kind != kind || !ev.Workload.Equal(want) {
			t.Fatalf("event = %v %+v\nwant    %v %+v", ev.Kind, ev.Workload, kind, want)
		}
	case <-time.After(within):
		t.Fatalf("no %v event for %s within %s", kind, want.Name, within)
	}
}

func TestParentPath(t *testing.T) {
	t.Parallel()
	v1 := cgroupfs.Hierarchy{Version: 1, Mount: "/sys/fs/cgroup/blkio"}
	v2 := cgroupfs.Hierarchy{Version: 2, Mount: "/sys/fs/cgroup"}
	for _, tc := range []struct {
		h    cgroupfs.Hierarchy
		in   string
		want string // "" means an error
		err  string
	}{
		{v1, "/lxc", "/lxc", ""},
		{v1, "lxc.payload", "/lxc.payload", ""},
		{v1, "/sys/fs/cgroup/blkio/x", "/x", ""},
		{v1, "/sys/fs/cgroup/blkio/x/", "/x", ""},
		{v1, "/sys/fs/cgroup/blkio/kubepods/burstable", "/kubepods/burstable", ""},
		{v1, "/sys/fs/cgroup/blkio", "/", ""},
		{v1, "/sys/fs/cgroup/blkio/../memory/x", "",
			"cgroup parent /sys/fs/cgroup/blkio/../memory/x: a directory outside the I/O hierarchy's mount /sys/fs/cgroup/blkio"},
		{v1, "/sys/fs/cgroup/memory/x", "",
			"cgroup parent /sys/fs/cgroup/memory/x: a directory outside the I/O hierarchy's mount /sys/fs/cgroup/blkio; give a directory under /sys/fs/cgroup/blkio, or the cgroup path as in /proc/PID/cgroup (such as /lxc)"},
		{v1, "/sys/fs/cgroup/unified/x", "", "outside the I/O hierarchy's mount /sys/fs/cgroup/blkio"},
		{v2, "/sys/fs/cgroup/system.slice", "/system.slice", ""},
		{v2, "/system.slice", "/system.slice", ""},
		{v1, "", "", "empty"},
	} {
		got, err := ParentPath(tc.h, tc.in)
		switch {
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("ParentPath(%s, %q) = %q, %v; want %q", tc.h.Mount, tc.in, got, err, tc.want)
		case tc.want == "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParentPath(%s, %q) = %q, %v; want an error with %q", tc.h.Mount, tc.in, got, err, tc.err)
		}
	}
}

// The errors of New name the bad pattern.
func TestNewNamesBadPatterns(t *testing.T) {
	t.Parallel()
	h := cgroupfs.Hierarchy{Version: 1, Mount: t.TempDir()}
	_, err := New(Options{Hierarchy: h, Parent: "/lxc", Exempt: []string{"ok-*", "sys[tem-*"},
		Levels: []LevelGlob{{"db-*", 1}, {"[", 2}, {"batch-*", 0}}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`cgroup exempt pattern "sys[tem-*": bad glob: syntax error in pattern`,
		`cgroup level pattern "[": bad glob`,
		`cgroup level pattern "batch-*": level 0, want 1 to 4`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "ok-*") || strings.Contains(err.Error(), `"db-*"`) {
		t.Errorf("error names a good pattern: %v", err)
	}
}

func labels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// pinTree runs a source with exemptions and pins over mount/parent, whose
// children are db-1, system-journal and web, and checks the labels each is
// reported with, also for a child made while it runs.
func pinTree(t *testing.T, h cgroupfs.Hierarchy, parent string, parentArg string, mkdir func(name string)) {
	t.Helper()
	for _, n := range []string{"db-1", "system-journal", "web"} {
		mkdir(n)
	}
	s, err := New(Options{Hierarchy: h, Parent: parentArg, Rescan: time.Hour,
		Exempt: []string{"system-*"},
		Levels: []LevelGlob{{"db-*", 1}, {"system-*", 2}, {"*", 4}}})
	if err != nil {
		t.Fatal(err)
	}
	ch := run(t, s)
	const within = 2 * time.Second
	wl := func(n string, l map[string]string) source.Workload {
		return source.Workload{ID: n, Name: n, Cgroup: parent + "/" + n, Labels: l}
	}
	expectWL(t, ch, within, source.Added, wl("db-1", labels(policy.LabelLevel, "1")))
	// Exempt wins over a level glob: no ddiskqos.level, so no conflict.
	expectWL(t, ch, within, source.Added, wl("system-journal", labels(policy.LabelExempt, "true")))
	expectWL(t, ch, within, source.Added, wl("web", labels(policy.LabelLevel, "4")))
	expectSynced(t, ch, within)
	mkdir("db-2")
	expectWL(t, ch, within, source.Added, wl("db-2", labels(policy.LabelLevel, "1")))
}

func TestPinsAndExemptions(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	h := cgroupfs.Hierarchy{Version: 1, Mount: mount}
	pinTree(t, h, "/lxc", mount+"/lxc", func(n string) {
		if err := os.MkdirAll(filepath.Join(mount, "lxc", n), 0o755); err != nil {
			t.Fatal(err)
		}
	})
}

// The same on real v1 cgroups, with the parent given as the absolute path
// under the blkio mount (/sys/fs/cgroup/blkio/<parent>), which used to be
// refused with the mount doubled.
func TestRealPinsAndExemptions(t *testing.T) {
	testkit.NeedRoot(t)
	layout, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	testkit.Need(t, err == nil, "cgroup layout: %v", err)
	m, ok := layout.V1Controller("blkio")
	testkit.Need(t, ok, "a cgroup v1 blkio hierarchy")
	h := cgroupfs.Hierarchy{Version: 1, Mount: m.Mountpoint}
	parent := fmt.Sprintf("/ddiskqos-test-pins-%d", rand.IntN(1<<30))
	dir := testkit.Cgroup(t, h.Mount+parent)
	pinTree(t, h, parent, dir, func(n string) {
		c := testkit.Cgroup(t, filepath.Join(dir, n))
		if _, err := os.Stat(filepath.Join(c, "blkio.throttle.io_service_bytes")); err != nil {
			t.Fatalf("%s is not a blkio cgroup: %v", c, err)
		}
	})
}

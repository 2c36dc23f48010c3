package cgroupdir

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// run starts s and returns its event channel; the source is stopped (and
// must return nil) when the test ends.
func run(t *testing.T, s *Source) <-chan source.Event {
	t.Helper()
	out := make(chan source.Event)
	testkit.Background(t, 5*time.Second, func(ctx context.Context) error { return s.Run(ctx, out) })
	return out
}

// expect waits up to within for the next event and checks it.
func expect(t *testing.T, ch <-chan source.Event, within time.Duration, kind source.EventKind, name, cgroup string) {
	t.Helper()
	select {
	case ev := <-ch:
		want := source.Workload{ID: name, Name: name, Cgroup: cgroup}
		if ev.Kind != kind || !ev.Workload.Equal(want) {
			t.Fatalf("event = %v %+v, want %v %+v", ev.Kind, ev.Workload, kind, want)
		}
	case <-time.After(within):
		t.Fatalf("no %v event for %s within %s", kind, name, within)
	}
}

// expectSynced waits up to within for the next event and checks that it is
// Synced: the first listing is complete.
func expectSynced(t *testing.T, ch <-chan source.Event, within time.Duration) {
	t.Helper()
	select {
	case ev := <-ch:
		if ev.Kind != source.Synced || !ev.Workload.Equal(source.Workload{}) {
			t.Fatalf("event = %v %+v, want synced (the end of the first listing)", ev.Kind, ev.Workload)
		}
	case <-time.After(within):
		t.Fatalf("no synced event within %s", within)
	}
}

func expectNone(t *testing.T, ch <-chan source.Event, wait time.Duration) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("unexpected event %v %+v", ev.Kind, ev.Workload)
	case <-time.After(wait):
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	h := cgroupfs.Hierarchy{Version: 1, Mount: t.TempDir()}
	for _, tc := range []struct {
		name string
		o    Options
		ok   bool
		want string // Name()
	}{
		{"plain", Options{Hierarchy: h, Parent: "/lxc"}, true, "cgroup:/lxc"},
		{"relative is made absolute", Options{Hierarchy: h, Parent: "kubepods.slice"}, true, "cgroup:/kubepods.slice (kubepods)"},
		{"mount path accepted", Options{Hierarchy: h, Parent: h.Mount + "/lxc"}, true, "cgroup:/lxc"},
		{"layout forced", Options{Hierarchy: h, Parent: "/k8s", Layout: LayoutKubepods}, true, "cgroup:/k8s (kubepods)"},
		{"layout children on kubepods", Options{Hierarchy: h, Parent: "/kubepods", Layout: LayoutChildren}, true, "cgroup:/kubepods"},
		{"bad layout", Options{Hierarchy: h, Parent: "/x", Layout: "flat"}, false, ""},
		{"bad exempt glob", Options{Hierarchy: h, Parent: "/x", Exempt: []string{"[x"}}, false, ""},
		{"bad level", Options{Hierarchy: h, Parent: "/x", Levels: []LevelGlob{{"db-*", 5}}}, false, ""},
		{"dot-dot cannot leave the hierarchy", Options{Hierarchy: h, Parent: "/../../etc"}, true, "cgroup:/etc"},
		{"root is lxc's", Options{Hierarchy: h, Parent: "/"}, true, "cgroup:/ (lxc)"},
		{"root refused to children", Options{Hierarchy: h, Parent: "/", Layout: LayoutChildren}, false, ""},
		{"empty parent", Options{Hierarchy: h}, false, ""},
		{"negative rescan", Options{Hierarchy: h, Parent: "/x", Rescan: -time.Second}, false, ""},
		{"no mount", Options{Parent: "/x"}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := New(tc.o)
			if (err == nil) != tc.ok {
				t.Fatalf("New(%+v) error = %v, want ok=%v", tc.o, err, tc.ok)
			}
			if err == nil {
				if s.Name() != tc.want {
					t.Errorf("Name() = %q, want %q", s.Name(), tc.want)
				}
				if !filepath.IsAbs(s.dir) || !cgroupfsWithinDir(h.Mount, s.dir) {
					t.Errorf("dir %q is not inside the mount %q", s.dir, h.Mount)
				}
			}
		})
	}
}

func cgroupfsWithinDir(mount, dir string) bool {
	rel, err := filepath.Rel(mount, dir)
	return err == nil && rel != ".." && !filepath.IsAbs(rel) && (len(rel) < 3 || rel[:3] != "../")
}

func TestRunMissingParentFails(t *testing.T) {
	t.Parallel()
	s, err := New(Options{Hierarchy: cgroupfs.Hierarchy{Version: 1, Mount: t.TempDir()}, Parent: "/nope"})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Run(context.Background(), make(chan source.Event, 1))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Run on a missing parent = %v, want an error wrapping ErrNotExist", err)
	}
}

// TestTree drives the source over a directory tree in t.TempDir, once with
// inotify (events within a short bound, rescan far away) and once with the
// periodic rescan only.
func TestTree(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		noInotify bool
		rescan    time.Duration
		within    time.Duration
	}{
		{"inotify", false, time.Hour, 2 * time.Second},
		{"rescan only", true, 20 * time.Millisecond, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mount := t.TempDir()
			parent := filepath.Join(mount, "lxc")
			for _, d := range []string{"lxc/b", "lxc/a", "lxc/a/nested"} {
				if err := os.MkdirAll(filepath.Join(mount, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			// Files in the parent (cgroup control files) are not workloads.
			if err := os.WriteFile(filepath.Join(parent, "blkio.weight"), []byte("500\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := New(Options{Hierarchy: cgroupfs.Hierarchy{Version: 1, Mount: mount}, Parent: "lxc",
				Rescan: tc.rescan, NoInotify: tc.noInotify})
			if err != nil {
				t.Fatal(err)
			}
			ch := run(t, s)
			// Initial children, in name order; the grandchild is not one.
			expect(t, ch, tc.within, source.Added, "a", "/lxc/a")
			expect(t, ch, tc.within, source.Added, "b", "/lxc/b")
			expectSynced(t, ch, tc.within) // once: not after later scans

			if err := os.Mkdir(filepath.Join(parent, "c"), 0o755); err != nil {
				t.Fatal(err)
			}
			expect(t, ch, tc.within, source.Added, "c", "/lxc/c")
			if err := os.Remove(filepath.Join(parent, "b")); err != nil {
				t.Fatal(err)
			}
			expect(t, ch, tc.within, source.Removed, "b", "/lxc/b")
			if err := os.Rename(filepath.Join(parent, "c"), filepath.Join(parent, "d")); err != nil {
				t.Fatal(err)
			}
			expect(t, ch, tc.within, source.Removed, "c", "/lxc/c")
			expect(t, ch, tc.within, source.Added, "d", "/lxc/d")

			// The parent goes away: its children are gone. It comes back:
			// it is watched again.
			if err := os.RemoveAll(parent); err != nil {
				t.Fatal(err)
			}
			expect(t, ch, tc.within, source.Removed, "a", "/lxc/a")
			expect(t, ch, tc.within, source.Removed, "d", "/lxc/d")
			// Let the rescans the removal's events queued run first: one
			// that ran after the mkdir below would find the new parent
			// (seen once under load).
			expectNone(t, ch, 100*time.Millisecond)
			if err := os.MkdirAll(filepath.Join(parent, "e"), 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.noInotify {
				expect(t, ch, tc.within, source.Added, "e", "/lxc/e")
			} else {
				// The new parent is a new inode, not watched until the next
				// rescan (an hour away here): nothing may be invented.
				// TestReArmAfterParentRecreated covers the re-arming.
				expectNone(t, ch, 100*time.Millisecond)
			}
		})
	}
}

// TestReArmAfterParentRecreated checks that after the parent is removed and
// made again, inotify events of the new directory are seen once a rescan
// has re-armed the watch.
func TestReArmAfterParentRecreated(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	parent := filepath.Join(mount, "p")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Hierarchy: cgroupfs.Hierarchy{Version: 1, Mount: mount}, Parent: "/p", Rescan: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ch := run(t, s)
	expectSynced(t, ch, 2*time.Second) // an empty parent lists nothing, then is synced
	expectNone(t, ch, 20*time.Millisecond)
	if err := os.Remove(parent); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // several rescans: watch re-armed
	if err := os.Mkdir(filepath.Join(parent, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, 2*time.Second, source.Added, "x", "/p/x")
}

// TestStalledConsumerDoesNotBlockCancel: Run must return on cancellation
// even while nobody reads its events.
func TestStalledConsumerDoesNotBlockCancel(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	if err := os.MkdirAll(filepath.Join(mount, "p", "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Hierarchy: cgroupfs.Hierarchy{Version: 1, Mount: mount}, Parent: "/p"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, make(chan source.Event)) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run blocked on a stalled consumer after cancellation")
	}
}

// TestRealCgroupfs runs the source on this machine's I/O hierarchy
// (v1 blkio on hybrid and v1 hosts, cgroup2 otherwise) with the rescan set
// to an hour, so events within the bound prove inotify works on cgroupfs.
func TestRealCgroupfs(t *testing.T) {
	testkit.NeedRoot(t)
	layout, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	testkit.Need(t, err == nil, "cgroup layout: %v", err)
	h, err := layout.IOHierarchy()
	testkit.Need(t, err == nil, "I/O hierarchy: %v", err)

	parent := fmt.Sprintf("/ddiskqos-test-source-%d-%d", os.Getpid(), time.Now().UnixNano())
	dir, err := h.Path(parent)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Cgroup(t, dir)
	first := testkit.Cgroup(t, filepath.Join(dir, "first"))

	for _, tc := range []struct {
		name      string
		noInotify bool
		rescan    time.Duration
	}{
		{"inotify", false, time.Hour},
		{"rescan only", true, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Options{Hierarchy: h, Parent: parent, Rescan: tc.rescan, NoInotify: tc.noInotify})
			if err != nil {
				t.Fatal(err)
			}
			ch := run(t, s)
			const within = 2 * time.Second
			expect(t, ch, within, source.Added, "first", parent+"/first")
			expectSynced(t, ch, within)
			if _, err := os.Stat(filepath.Join(first, "cgroup.procs")); err != nil {
				t.Fatalf("%s is not a cgroup: %v", first, err)
			}
			second := filepath.Join(dir, "second")
			testkit.Cgroup(t, second)
			start := time.Now()
			expect(t, ch, within, source.Added, "second", parent+"/second")
			t.Logf("%s: mkdir seen after %s", tc.name, time.Since(start))
			if err := os.Remove(second); err != nil {
				t.Fatal(err)
			}
			start = time.Now()
			expect(t, ch, within, source.Removed, "second", parent+"/second")
			t.Logf("%s: rmdir seen after %s", tc.name, time.Since(start))
		})
	}
}

package state

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/policy"
)

// TestStoreAdoptsOnlyTheSameCgroups: of a previous run's entries, those of
// a cgroup still there under the inode recorded are kept; those of a
// removed cgroup, or of one created again under the same name (another
// inode), are dropped; a Docker knob names a container and is kept. The
// next Save writes the file without the dropped ones, once.
func TestStoreAdoptsOnlyTheSameCgroups(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	h := cgroupfs.Hierarchy{Version: 2, Mount: mount}
	for _, cg := range []string{"kept", "again"} {
		if _, err := h.Create(cg); err != nil {
			t.Fatal(err)
		}
	}
	keptIno, err := h.DirIno("/kept")
	if err != nil || keptIno == 0 {
		t.Fatalf("inode of /kept: %d %v", keptIno, err)
	}
	againIno, _ := h.DirIno("/again")
	path := filepath.Join(t.TempDir(), "state.json")
	orig := func(cg, knob string) actuate.Original { return actuate.Original{Cgroup: cg, Knob: knob, DevStr: "8:0"} }
	prev := File{HierarchyVersion: 2, HierarchyMount: mount,
		Originals: []actuate.Original{orig("/kept", "bfq"), orig("/gone", "bfq"), orig("/again", "bfq"), orig("abc123", "docker-blkio-weight")},
		Workloads: []Workload{{Cgroup: "/kept", View: policy.View{ID: "k", Level: policy.Level3}},
			{Cgroup: "/gone", View: policy.View{ID: "g", Level: policy.Level4}}},
		Inodes: map[string]uint64{"/kept": keptIno, "/again": againIno + 1}}
	if err := Save(path, prev); err != nil {
		t.Fatal(err)
	}
	var origs []actuate.Original
	s := &Store{Path: path, Hierarchy: h, Log: slog.New(slog.DiscardHandler), Now: time.Now,
		Originals: func() ([]actuate.Original, bool) { return origs, false },
		Workloads: func(dst []Workload) []Workload { return dst }}
	f, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range f.Originals {
		got = append(got, o.Cgroup)
	}
	if strings.Join(got, " ") != "/kept abc123" || len(f.Workloads) != 1 || f.Workloads[0].Cgroup != "/kept" {
		t.Fatalf("adopted originals %v, workloads %+v; want /kept and abc123, /kept", got, f.Workloads)
	}
	origs = f.Originals
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	again, err := Load(path)
	if err != nil || len(again.Originals) != 2 || again.Inodes["/kept"] != keptIno || again.Inodes["/again"] != 0 {
		t.Fatalf("saved after adopting: %+v %v", again, err)
	}
	// Nothing changed since: the file is not written again.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("clean store wrote the file again: %v", err)
	}
}

// TestStoreRefusesAnotherHierarchy: a file whose originals were written for
// another mount is an error that names the file, and nothing is adopted.
func TestStoreRefusesAnotherHierarchy(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.json")
	if err := Save(path, File{HierarchyVersion: 1, HierarchyMount: "/sys/fs/cgroup/blkio",
		Originals: []actuate.Original{{Cgroup: "/a", Knob: "bfq"}}}); err != nil {
		t.Fatal(err)
	}
	s := &Store{Path: path, Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: t.TempDir()}, Log: slog.New(slog.DiscardHandler)}
	if f, err := s.Load(); err == nil || !strings.Contains(err.Error(), path) || len(f.Originals) != 0 {
		t.Fatalf("another hierarchy: %+v %v", f, err)
	}
}

// TestStoreLoadRemovesLeftoverTemps: a Save cut short by a kill leaves its
// temporary file; the next Load removes it (and the older ".state-*.tmp"
// pattern's), and nothing else in the directory.
func TestStoreLoadRemovesLeftoverTemps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := Save(path, File{HierarchyVersion: 1, HierarchyMount: "/sys/fs/cgroup/blkio"}); err != nil {
		t.Fatal(err)
	}
	gone := []string{".state.json.123.tmp", ".state-456.tmp"}
	kept := []string{"state.json", ".other.json.1.tmp", "notes.tmp"}
	for _, n := range append(slices.Clone(gone), kept[1:]...) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := Store{Path: path, Hierarchy: cgroupfs.Hierarchy{Version: 1, Mount: "/sys/fs/cgroup/blkio"},
		Log: slog.New(slog.DiscardHandler), Now: time.Now}
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	want := slices.Sorted(slices.Values(kept))
	if !slices.Equal(names, want) {
		t.Fatalf("after Load the state dir holds %q, want %q", names, want)
	}
}

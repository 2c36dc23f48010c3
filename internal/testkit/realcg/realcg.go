// Package realcg is the test rig for "a real cgroup on a real disk, host
// or VM": a cgroup of the kernel's I/O hierarchy made for one test, whose
// children are the test's workloads, and a disk the test has to itself —
// on the host a cgroup of the v1 blkio hierarchy and a new loop device, in
// the test VM (go test -exec vmexec) a cgroup v2 cgroup with the io
// controller on for its children and the VM's disk. Everything is undone
// when the test ends, also when it fails. A package of its own (not
// testkit) because it builds on internal/cgroupfs, whose own tests use
// testkit.
package realcg

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// Options say what the test needs besides the defaults.
type Options struct {
	// LoopMiB is the loop device's size on the host; 0 means 64.
	LoopMiB int
	// Scheduler, when set, is selected on the disk for the test (and the
	// old one put back at its end).
	Scheduler string
	// Controllers are enabled for the children on v2 besides io (memory
	// for writeback, cpu, pids); they must be enabled in the root.
	Controllers []string
}

// Rig is the test's cgroup and disk.
type Rig struct {
	Layout cgroupfs.Layout
	// H is the I/O hierarchy: v1 blkio on the host, cgroup2 in the VM.
	H    cgroupfs.Hierarchy
	Disk testkit.Disk
	Dev  cgroupfs.Dev
	// Parent is the test's cgroup relative to H, named after the test;
	// Child makes the workloads' cgroups below it.
	Parent string
}

// New makes the rig. It needs root, and the v1 blkio hierarchy on the host
// or cgroup2 with io in the VM: a skip when they are missing, a failure
// under DDISKQOS_REQUIRE_REAL=1.
func New(t testing.TB, o Options) *Rig {
	t.Helper()
	testkit.NeedRoot(t)
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	r := &Rig{Layout: l, Parent: fmt.Sprintf("/ddiskqos-test-%s-%d", strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()), os.Getpid())}
	if testkit.InVM() {
		testkit.Need(t, l.Mode == cgroupfs.ModeV2, "the VM should mount cgroup2 only, layout is %s", l.Mode)
		r.H = cgroupfs.Hierarchy{Version: 2, Mount: l.Unified}
		r.Disk = testkit.VMDisk(t)
	} else {
		m, ok := l.V1Controller("blkio")
		testkit.Need(t, ok, "cgroup v1 blkio hierarchy not mounted (layout %s)", l.Mode)
		r.H = cgroupfs.Hierarchy{Version: 1, Mount: m.Mountpoint}
		r.Disk = testkit.LoopDevice(t, cmpOr(o.LoopMiB, 64)).Disk(t)
	}
	r.Dev = cgroupfs.Dev{Major: r.Disk.Major, Minor: r.Disk.Minor}
	if o.Scheduler != "" {
		testkit.SetScheduler(t, r.Disk.Name, o.Scheduler)
	}
	// v1 counts a disk only once a rule was written for it.
	if err := r.H.EnableV1Accounting(r.Dev); err != nil {
		t.Fatal(err)
	}
	dir := testkit.Cgroup(t, r.Dir(t, r.Parent))
	if r.H.Version == 2 {
		ctl := append([]string{"io"}, o.Controllers...)
		root, err := os.ReadFile(filepath.Join(r.H.Mount, "cgroup.subtree_control"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ctl {
			testkit.Need(t, strings.Contains(" "+strings.TrimSpace(string(root))+" ", " "+c+" "),
				"%s controller not enabled in the root's cgroup.subtree_control (%q)", c, root)
			if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0); err != nil {
				t.Fatalf("enable %s for the children of %s: %v", c, r.Parent, err)
			}
		}
	}
	return r
}

// Child makes the cgroup name below Parent, removed when the test ends,
// and returns its path relative to H.
func (r *Rig) Child(t testing.TB, name string) string {
	t.Helper()
	rel := r.Parent + "/" + name
	testkit.Cgroup(t, r.Dir(t, rel))
	return rel
}

// Dir is the directory of the cgroup rel.
func (r *Rig) Dir(t testing.TB, rel string) string {
	t.Helper()
	dir, err := r.H.Path(rel)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func cmpOr(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

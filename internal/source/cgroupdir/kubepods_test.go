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

func TestPodUIDAndContainerID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, uid string }{
		{"pod0f6c1e0a-6b7d-4b6f-9d2a-1f2e3d4c5b6a", "0f6c1e0a-6b7d-4b6f-9d2a-1f2e3d4c5b6a"},
		{"kubepods-burstable-pod0f6c1e0a_6b7d_4b6f_9d2a_1f2e3d4c5b6a.slice", "0f6c1e0a-6b7d-4b6f-9d2a-1f2e3d4c5b6a"},
		{"kubepods-pod12_34.slice", "12-34"},
		{"kubepods-besteffort-podab.slice", "ab"},
		{"pod", ""},
		{"kubepods-burstable.slice", ""},
		{"system.slice", ""},
		{"other-podx.slice", ""},
		{"kubepods-pod.slice", ""},
	} {
		uid, ok := podUID(tc.in)
		if ok != (tc.uid != "") || uid != tc.uid {
			t.Errorf("podUID(%q) = %q %v, want %q", tc.in, uid, ok, tc.uid)
		}
	}
	for _, tc := range []struct{ in, id string }{
		{"cri-containerd-4a5b.scope", "4a5b"},
		{"crio-77aa.scope", "77aa"},
		{"docker-99ff.scope", "99ff"},
		{"crio-conmon-77aa.scope", ""},
		{"4a5b6c", "4a5b6c"},
		{"cri-containerd-.scope", ""},
	} {
		id, ok := containerID(tc.in)
		if ok != (tc.id != "") || id != tc.id {
			t.Errorf("containerID(%q) = %q %v, want %q", tc.in, id, ok, tc.id)
		}
	}
}

// A node's tree, for either kubelet cgroup driver: the dirs to make below
// the parent and the workloads they are, in the order they are reported.
type nodeTree struct {
	parent string // kubepods or kubepods.slice
	dirs   []string
	want   []source.Workload
	// later: a pod made while the source runs, and its workload.
	later     []string
	laterWant source.Workload
	// gone: a container directory removed while it runs.
	gone     string
	goneWant source.Workload
}

const (
	uidG  = "11111111-aaaa-4bbb-8ccc-000000000001"
	uidB  = "22222222-aaaa-4bbb-8ccc-000000000002"
	uidBE = "33333333-aaaa-4bbb-8ccc-000000000003"
	uidN  = "44444444-aaaa-4bbb-8ccc-000000000004"
	ctr1  = "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1"
	ctr2  = "c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2"
	ctr3  = "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3"
	ctr4  = "c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4"
	ctr5  = "c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5"
)

func kwl(root, rel, uid, id, qos string, extra ...string) source.Workload {
	n := "pod" + uid + "/" + id
	return source.Workload{ID: n, Name: n, Cgroup: root + "/" + rel,
		Labels: labels(append([]string{LabelPodUID, uid, LabelQoSClass, qos}, extra...)...)}
}

func sd(uid string) string { return strings.ReplaceAll(uid, "-", "_") }

// systemdTree is the kubelet's tree with the systemd driver and
// containerd; exemptG marks the Guaranteed pod's containers exempt.
func systemdTree(root string, exemptG bool) nodeTree {
	g := []string{}
	if exemptG {
		g = []string{policy.LabelExempt, "true"}
	}
	b := "kubepods-burstable.slice/kubepods-burstable-pod" + sd(uidB) + ".slice"
	be := "kubepods-besteffort.slice/kubepods-besteffort-pod" + sd(uidBE) + ".slice"
	gp := "kubepods-pod" + sd(uidG) + ".slice"
	tr := nodeTree{parent: "kubepods.slice",
		dirs: []string{
			gp + "/cri-containerd-" + ctr1 + ".scope",
			b + "/cri-containerd-" + ctr2 + ".scope",
			b + "/cri-containerd-" + ctr3 + ".scope",
			be + "/cri-containerd-" + ctr4 + ".scope",
			"kubepods-besteffort.slice/not-a-pod",
		},
		later: []string{"kubepods-burstable.slice/kubepods-burstable-pod" + sd(uidN) + ".slice/cri-containerd-" + ctr5 + ".scope"},
		gone:  b + "/cri-containerd-" + ctr3 + ".scope",
	}
	r := root + "/kubepods.slice"
	// Sorted by path below the parent: besteffort, burstable, then the
	// Guaranteed pod ("kubepods-be" < "kubepods-bu" < "kubepods-p").
	tr.want = []source.Workload{
		kwl(r, be+"/cri-containerd-"+ctr4+".scope", uidBE, ctr4, QoSBestEffort),
		kwl(r, b+"/cri-containerd-"+ctr2+".scope", uidB, ctr2, QoSBurstable),
		kwl(r, b+"/cri-containerd-"+ctr3+".scope", uidB, ctr3, QoSBurstable),
		kwl(r, gp+"/cri-containerd-"+ctr1+".scope", uidG, ctr1, QoSGuaranteed, g...),
	}
	tr.laterWant = kwl(r, tr.later[0], uidN, ctr5, QoSBurstable)
	tr.goneWant = tr.want[2]
	return tr
}

// cgroupfsTree is the kubelet's tree with the cgroupfs driver.
func cgroupfsTree(root string, exemptG bool) nodeTree {
	g := []string{}
	if exemptG {
		g = []string{policy.LabelExempt, "true"}
	}
	tr := nodeTree{parent: "kubepods",
		dirs: []string{
			"pod" + uidG + "/" + ctr1,
			"burstable/pod" + uidB + "/" + ctr2,
			"burstable/pod" + uidB + "/" + ctr3,
			"besteffort/pod" + uidBE + "/" + ctr4,
		},
		later: []string{"besteffort/pod" + uidN + "/" + ctr5},
		gone:  "burstable/pod" + uidB + "/" + ctr3,
	}
	r := root + "/kubepods"
	tr.want = []source.Workload{
		kwl(r, "besteffort/pod"+uidBE+"/"+ctr4, uidBE, ctr4, QoSBestEffort),
		kwl(r, "burstable/pod"+uidB+"/"+ctr2, uidB, ctr2, QoSBurstable),
		kwl(r, "burstable/pod"+uidB+"/"+ctr3, uidB, ctr3, QoSBurstable),
		kwl(r, "pod"+uidG+"/"+ctr1, uidG, ctr1, QoSGuaranteed, g...),
	}
	tr.laterWant = kwl(r, tr.later[0], uidN, ctr5, QoSBestEffort)
	tr.goneWant = tr.want[2]
	return tr
}

// driveNode makes tr below dir (the hierarchy path of root), runs the
// source on root/<parent>, and checks the initial workloads, a pod made
// later (seen through inotify on the QoS directory, the rescan being an
// hour away), and a container removed.
func driveNode(t *testing.T, h cgroupfs.Hierarchy, root string, tr nodeTree, exemptG bool, mkdir func(rel string), rmdir func(rel string)) {
	t.Helper()
	for _, d := range tr.dirs {
		mkdir(tr.parent + "/" + d)
	}
	// The kubelet's own files and the pods' cgroup files are no workloads.
	s, err := New(Options{Hierarchy: h, Parent: root + "/" + tr.parent, Rescan: time.Hour, ExemptGuaranteed: exemptG})
	if err != nil {
		t.Fatal(err)
	}
	if s.Layout() != LayoutKubepods {
		t.Fatalf("layout %s for parent %s, want kubepods", s.Layout(), tr.parent)
	}
	ch := run(t, s)
	const within = 2 * time.Second
	for _, w := range tr.want {
		expectWL(t, ch, within, source.Added, w)
	}
	expectSynced(t, ch, within)
	expectNone(t, ch, 50*time.Millisecond)
	start := time.Now()
	mkdir(tr.parent + "/" + tr.later[0])
	expectWL(t, ch, within, source.Added, tr.laterWant)
	t.Logf("new pod's container seen after %s", time.Since(start))
	rmdir(tr.parent + "/" + tr.gone)
	expectWL(t, ch, within, source.Removed, tr.goneWant)
}

func TestKubepodsTree(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		tree    func(root string, exemptG bool) nodeTree
		exemptG bool
	}{
		{"systemd", systemdTree, false},
		{"systemd exempt guaranteed", systemdTree, true},
		{"cgroupfs", cgroupfsTree, false},
		{"cgroupfs exempt guaranteed", cgroupfsTree, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mount := t.TempDir()
			h := cgroupfs.Hierarchy{Version: 1, Mount: mount}
			tr := tc.tree("/node", tc.exemptG)
			// cgroup files next to the directories are not workloads.
			if err := os.MkdirAll(filepath.Join(mount, "node", tr.parent), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(mount, "node", tr.parent, "cgroup.procs"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			driveNode(t, h, "/node", tr, tc.exemptG,
				func(rel string) {
					if err := os.MkdirAll(filepath.Join(mount, "node", rel), 0o755); err != nil {
						t.Fatal(err)
					}
				},
				func(rel string) {
					if err := os.Remove(filepath.Join(mount, "node", rel)); err != nil {
						t.Fatal(err)
					}
				})
		})
	}
}

// TestRealKubepods: both kubelet trees made of real cgroups in this
// machine's I/O hierarchy (v1 blkio here), under
// ddiskqos-test-kubepods-<rand>, and discovered through inotify on
// cgroupfs.
func TestRealKubepods(t *testing.T) {
	testkit.NeedRoot(t)
	layout, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	testkit.Need(t, err == nil, "cgroup layout: %v", err)
	h, err := layout.IOHierarchy()
	testkit.Need(t, err == nil, "I/O hierarchy: %v", err)
	root := fmt.Sprintf("/ddiskqos-test-kubepods-%d", rand.IntN(1<<30))
	rootDir := testkit.Cgroup(t, h.Mount+root) // removed with everything below it
	for _, tc := range []struct {
		name string
		tree func(root string, exemptG bool) nodeTree
	}{
		{"systemd", systemdTree},
		{"cgroupfs", cgroupfsTree},
	} {
		t.Run(tc.name, func(t *testing.T) {
			driveNode(t, h, root, tc.tree(root, true), true,
				func(rel string) {
					if err := os.MkdirAll(filepath.Join(rootDir, rel), 0o755); err != nil {
						t.Fatal(err)
					}
					if _, err := os.Stat(filepath.Join(rootDir, rel, "cgroup.procs")); err != nil {
						t.Fatalf("%s is not a cgroup: %v", rel, err)
					}
				},
				func(rel string) {
					if err := os.Remove(filepath.Join(rootDir, rel)); err != nil {
						t.Fatal(err)
					}
				})
		})
	}
}

// Any directory path below a kubepods parent either is no workload or is
// one inside the parent, named pod<uid>/<id>.
func FuzzKubepodsWorkload(f *testing.F) {
	f.Add("kubepods-burstable.slice/kubepods-burstable-pod1_2.slice/cri-containerd-ab.scope")
	f.Add("burstable/pod12/ab")
	f.Add("pod12/../../etc")
	f.Add("kubepods-pod.slice/crio-conmon-x.scope")
	f.Add("burstable/pod1/..")
	s, err := New(Options{Hierarchy: cgroupfs.Hierarchy{Version: 1, Mount: "/sys/fs/cgroup/blkio"}, Parent: "/node/kubepods.slice",
		Exempt: []string{"pod1*/*"}, Levels: []LevelGlob{{"*/*", 2}}, ExemptGuaranteed: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		wl, ok := s.workload(rel)
		if !ok {
			return
		}
		if wl.Cgroup != "/node/kubepods.slice/"+rel || !strings.HasPrefix(wl.Name, "pod") || wl.ID != wl.Name {
			t.Fatalf("workload(%q) = %+v", rel, wl)
		}
		if _, ex := wl.Labels[policy.LabelExempt]; ex == (wl.Labels[policy.LabelLevel] == "2") {
			t.Fatalf("workload(%q): exempt and pinned, or neither: %v", rel, wl.Labels)
		}
	})
}

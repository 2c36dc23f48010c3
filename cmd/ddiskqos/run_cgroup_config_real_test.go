package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// The cgroup source's config pins and exemptions, end to end: the real
// binary on real v1 cgroups over a loop device with BFQ, the parent given
// as its path under the blkio mount. pin-db is held at level 3 (weight
// 250: the first matching pattern wins) although it did no I/O; ex-sys keeps the weight it had before the
// daemon started; plain gets level 1's 1000. A read of 3 MiB does not move
// the pinned workload.
func TestRealRunCgroupPinsAndExemptions(t *testing.T) {
	r := newRunRig(t)
	pin, ex, plain := r.child(t, "pin-db"), r.child(t, "ex-sys"), r.child(t, "plain")
	if err := r.setWeight(t, ex, "300"); err != nil {
		t.Fatal(err)
	}
	d := r.start(t, "--cgroup-parent", r.h.Mount+r.parent, "--cgroup-exempt", "ex-*", "--cgroup-levels", "pin-*=3,pin-db=2")
	r.waitLevel(t, "pin-db", 3)
	r.waitLevel(t, "plain", 1)
	byName := func() map[string]*snapshot.Workload {
		t.Helper()
		s, err := r.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]*snapshot.Workload{}
		for _, w := range s.Workloads {
			m[w.Name] = w
		}
		return m
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		w := byName()["ex-sys"]
		if w != nil && w.Exempt {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ex-sys not exempt: %+v", w)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ws := byName()
	if !ws["pin-db"].Pinned || ws["plain"].Pinned || ws["plain"].Exempt {
		t.Errorf("pin-db %+v, plain %+v", ws["pin-db"], ws["plain"])
	}
	waitWeight := func(cg string, want uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			v, ok := r.weight(t, cg)
			if ok && v == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s has weight %d (%v), want %d", cg, v, ok, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitWeight(pin, 250)
	waitWeight(plain, 1000)
	if v, _ := r.weight(t, ex); v != 300 {
		t.Fatalf("exempt ex-sys has weight %d, want its own 300", v)
	}
	r.read(t, pin, 3<<20, 0)
	time.Sleep(500 * time.Millisecond) // several intervals
	if w := byName()["pin-db"]; w.Level != 3 || w.ReadBytes < 3<<20 {
		t.Fatalf("pinned pin-db after reading 3 MiB: level %d, read_bytes %d", w.Level, w.ReadBytes)
	}
	stopWith(t, d, syscall.SIGTERM)
	if v, _ := r.weight(t, ex); v != 300 {
		t.Fatalf("after SIGTERM ex-sys has weight %d, want 300", v)
	}
	t.Logf("pin-db level 3 weight 250 after 3 MiB read; ex-sys exempt, weight 300 kept; plain level 1 weight 1000")
}

// A --cgroup-parent under another cgroup mount is refused, naming both.
func TestRealRunCgroupParentOutsideMount(t *testing.T) {
	testkit.NeedRoot(t)
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	m, ok := l.V1Controller("blkio")
	testkit.Need(t, ok, "cgroup v1 blkio hierarchy not mounted (layout %s)", l.Mode)
	var out, errOut bytes.Buffer
	other := "/sys/fs/cgroup/memory/ddiskqos-test-elsewhere"
	code := runDaemon([]string{"--source", "cgroup", "--cgroup-parent", other, "--listen", "",
		"--state-file", filepath.Join(t.TempDir(), "state.json")}, &out, &errOut)
	want := "cgroup parent " + other + ": a directory outside the I/O hierarchy's mount " + m.Mountpoint
	if code != 1 || !strings.Contains(errOut.String(), want) {
		t.Fatalf("exit %d, stderr %q; want 1 and %q", code, errOut.String(), want)
	}
}

// A Kubernetes node's tree (systemd driver, containerd) made of real v1
// cgroups under <blkio>/ddiskqos-test-kubepods-<rand>/kubepods.slice:
// the daemon finds the layout from the name, tracks every container as
// pod<uid>/<id> with its QoS class, leaves the Guaranteed pod's container
// alone (--cgroup-exempt-guaranteed) and gives the others level 1.
func TestRealRunKubepods(t *testing.T) {
	r := newRunRig(t)
	root := fmt.Sprintf("/ddiskqos-test-kubepods-%d", rand.IntN(1<<30))
	rootDir := testkit.Cgroup(t, r.h.Mount+root) // removed with everything below it
	const (
		uidG, uidB = "0a0a0a0a-1111-4222-8333-444444444444", "0b0b0b0b-1111-4222-8333-444444444444"
		idG, idB   = "6a7b8c9d0e1f6a7b8c9d0e1f6a7b8c9d0e1f6a7b8c9d0e1f6a7b8c9d0e1f6a7b", "1f2e3d4c5b6a1f2e3d4c5b6a1f2e3d4c5b6a1f2e3d4c5b6a1f2e3d4c5b6a1f2e"
	)
	g := "kubepods.slice/kubepods-pod" + strings.ReplaceAll(uidG, "-", "_") + ".slice/cri-containerd-" + idG + ".scope"
	b := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uidB, "-", "_") + ".slice/cri-containerd-" + idB + ".scope"
	for _, d := range []string{g, b} {
		if err := os.MkdirAll(filepath.Join(rootDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.setWeight(t, root+"/"+g, "300"); err != nil {
		t.Fatal(err)
	}
	d := r.start(t, "--cgroup-parent", root+"/kubepods.slice", "--cgroup-exempt-guaranteed")
	nameB, nameG := "pod"+uidB+"/"+idB, "pod"+uidG+"/"+idG
	r.waitLevel(t, nameB, 1)
	s, err := r.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, w := range s.Workloads {
		switch w.Name {
		case nameB:
			seen++
			if w.Labels["ddiskqos.qos_class"] != "Burstable" || w.Labels["io.kubernetes.pod.uid"] != uidB || w.Cgroup != root+"/"+b {
				t.Errorf("burstable container: %+v", w)
			}
		case nameG:
			seen++
			if !w.Exempt || w.Labels["ddiskqos.qos_class"] != "Guaranteed" {
				t.Errorf("guaranteed container: %+v", w)
			}
		}
	}
	if seen != 2 || len(s.Workloads) != 2 || !strings.Contains(s.Source, "kubepods") {
		t.Fatalf("source %q, workloads %+v", s.Source, s.Workloads)
	}
	if v, _ := r.weight(t, root+"/"+b); v != 1000 {
		t.Errorf("burstable container weight %d, want 1000", v)
	}
	if v, _ := r.weight(t, root+"/"+g); v != 300 {
		t.Errorf("exempt guaranteed container weight %d, want its own 300", v)
	}
	// A new pod appears: it is tracked without waiting for a rescan.
	uidN, idN := "0c0c0c0c-1111-4222-8333-444444444444", "2c3d4e5f6a7b2c3d4e5f6a7b2c3d4e5f6a7b2c3d4e5f6a7b2c3d4e5f6a7b2c3d"
	n := "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uidN, "-", "_") + ".slice/cri-containerd-" + idN + ".scope"
	if err := os.MkdirAll(filepath.Join(rootDir, n), 0o755); err != nil {
		t.Fatal(err)
	}
	r.waitLevel(t, "pod"+uidN+"/"+idN, 1)
	stopWith(t, d, syscall.SIGTERM)
	t.Logf("source %s: %s level 1, %s exempt, new BestEffort pod tracked", s.Source, nameB, nameG)
}

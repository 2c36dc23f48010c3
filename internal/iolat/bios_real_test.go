package iolat_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// biosRig is a parent cgroup with two children, one of them with a child of
// its own, on one disk.
type biosRig struct {
	h         cgroupfs.Hierarchy
	path      string // what the readers read
	dev       cgroupfs.Dev
	parent    string
	a, inner  string // a and a/inner
	b         string
	subtreeIO bool // v2: the children's io controller is enabled
}

// realBiosRig is the rig on this kernel: the host's v1 blkio hierarchy and
// a loop device, or the VM's cgroup v2 and its disk.
func realBiosRig(t *testing.T) biosRig {
	t.Helper()
	testkit.NeedRoot(t)
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var r biosRig
	r.parent = fmt.Sprintf("/ddiskqos-test-bios-%d", os.Getpid())
	if testkit.InVM() {
		testkit.Need(t, l.Unified != "", "no cgroup v2 hierarchy (layout %s)", l.Mode)
		r.h = cgroupfs.Hierarchy{Version: 2, Mount: l.Unified}
		r.path = os.Getenv("DDISKQOS_VM_DISK")
		testkit.Need(t, r.path != "", "DDISKQOS_VM_DISK not set")
		devText, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(r.path), "dev"))
		if err != nil {
			t.Fatal(err)
		}
		if r.dev, err = cgroupfs.ParseDev(strings.TrimSpace(string(devText))); err != nil {
			t.Fatal(err)
		}
		r.subtreeIO = true
	} else {
		m, ok := l.V1Controller("blkio")
		testkit.Need(t, ok, "cgroup v1 blkio hierarchy not mounted (layout %s)", l.Mode)
		r.h = cgroupfs.Hierarchy{Version: 1, Mount: m.Mountpoint}
		loop := testkit.LoopDevice(t, 64)
		r.path, r.dev = loop.Path, cgroupfs.Dev{Major: loop.Major, Minor: loop.Minor}
		if err := r.h.EnableV1Accounting(r.dev); err != nil {
			t.Fatal(err)
		}
	}
	r.a, r.inner, r.b = r.parent+"/a", r.parent+"/a/inner", r.parent+"/b"
	for _, rel := range []string{r.parent, r.a, r.inner, r.b} {
		dir, _ := r.h.Path(rel)
		testkit.Cgroup(t, dir)
		if r.subtreeIO && rel != r.inner && rel != r.b {
			if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+io"), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	return r
}

// read runs one O_DIRECT reader of n bytes in blocks of bs in cgroup rel.
func (r biosRig) read(t *testing.T, rel, bs, n string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := workload.RunIn(ctx, os.Args[0], []string{workload.EnvMain + "=1"},
		[]string{"--wait-stdin", "--json", "--direct", "--bs", bs, "--bytes", n, "read", r.path},
		func(pid int) error { return r.h.AddProcess(rel, pid) })
	if err != nil {
		t.Fatalf("reader in %s: %v", rel, err)
	}
}

// fileBytes is cgroup rel's read and write bytes on the rig's disk, from its
// counter file.
func (r biosRig) fileBytes(t *testing.T, rel string) uint64 {
	t.Helper()
	c, err := r.h.Open(rel)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.ReadIO()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := st.Device(r.dev)
	return d.RBytes + d.WBytes
}

func TestRealV1Bios(t *testing.T) {
	if testkit.InVM() {
		t.Skip("a host test: the VM has no v1 blkio hierarchy")
	}
	testBios(t)
}

func TestRealV2Bios(t *testing.T) {
	if !testkit.InVM() {
		t.Skip("runs in the cgroup-v2 test VM (make test-v2)")
	}
	testBios(t)
}

// testBios: the kernel's bio counters count a watched cgroup's bytes as
// its counter file does (its descendants' included), and a watched parent's
// as what its subtree did beyond the watched cgroups below it; a cgroup no
// longer watched is counted to its nearest watched ancestor. On the host
// (v1 blkio, a loop device: TestRealV1Bios) and in the VM (v2, its disk:
// TestRealV2Bios).
func testBios(t *testing.T) {
	rig := realBiosRig(t)
	r := openReal(t)
	b := r.Bios()
	if b == nil {
		t.Fatal("the reader of the kernel's sensor has no bio counters")
	}
	ino := func(rel string) uint64 {
		i, err := rig.h.DirIno(rel)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	pIno, aIno := ino(rig.parent), ino(rig.a)
	for _, i := range []uint64{pIno, aIno} {
		if err := b.Watch(i, rig.dev); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, i := range []uint64{pIno, aIno} {
			if err := b.Unwatch(i, rig.dev); err != nil {
				t.Errorf("unwatch: %v", err)
			}
		}
	})
	if b.Watched() != 2 {
		t.Fatalf("watched %d keys, want 2", b.Watched())
	}
	bytesOf := func(i uint64) uint64 {
		n, err := b.Bytes(i, rig.dev)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a0, b0 := rig.fileBytes(t, rig.a), rig.fileBytes(t, rig.b)
	rig.read(t, rig.inner, "1MiB", "6MiB") // a's descendant
	rig.read(t, rig.b, "256KiB", "3MiB")   // the parent's other child
	aFile, bFile := rig.fileBytes(t, rig.a)-a0, rig.fileBytes(t, rig.b)-b0
	aBio, pBio := bytesOf(aIno), bytesOf(pIno)
	t.Logf("a: file %d B, bios %d B; b: file %d B, the parent's bios %d B", aFile, aBio, bFile, pBio)
	if aFile < 6<<20 || bFile < 3<<20 {
		t.Fatalf("the counter files saw a %d B and b %d B; the readers read 6 MiB and 3 MiB", aFile, bFile)
	}
	if aBio != aFile {
		t.Errorf("a (watched, read by its child): bios %d B, its counter file %d B", aBio, aFile)
	}
	if pBio != bFile {
		t.Errorf("the parent (watched): bios %d B, want b's %d B (a's are a's)", pBio, bFile)
	}

	// Each: the same counts in one batch, and only this disk's.
	each := map[uint64]uint64{}
	if err := b.Each(rig.dev, func(ino, bytes uint64) { each[ino] = bytes }); err != nil {
		t.Fatal(err)
	}
	if len(each) != 2 || each[aIno] != aBio || each[pIno] != pBio {
		t.Errorf("Each on %s: %v; want a (inode %d) %d B and the parent (inode %d) %d B", rig.dev, each, aIno, aBio, pIno, pBio)
	}
	other := cgroupfs.Dev{Major: rig.dev.Major, Minor: rig.dev.Minor + 1}
	if err := b.Each(other, func(ino, bytes uint64) { t.Errorf("Each on %s: inode %d, watched on %s only", other, ino, rig.dev) }); err != nil {
		t.Fatal(err)
	}

	// Unwatched, a's bytes are the parent's.
	if err := b.Watch(aIno, rig.dev); err != nil { // a second watch: one count
		t.Fatal(err)
	}
	for range 2 {
		if err := b.Unwatch(aIno, rig.dev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Bytes(aIno, rig.dev); err == nil {
		t.Error("a: still counted after its last Unwatch")
	}
	a1 := rig.fileBytes(t, rig.a)
	rig.read(t, rig.inner, "1MiB", "2MiB")
	aMore := rig.fileBytes(t, rig.a) - a1
	if got := bytesOf(pIno) - pBio; got != aMore {
		t.Errorf("the parent after a's Unwatch: %d B more, want a's %d B", got, aMore)
	}
	if err := b.Watch(aIno, rig.dev); err != nil { // for the cleanup's Unwatch
		t.Fatal(err)
	}
	if n := bytesOf(aIno); n != 0 {
		t.Errorf("a watched again: %d B, want 0 (counted from its watch)", n)
	}
}

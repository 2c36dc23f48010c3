package host

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// The v2 claim of cgroup.writeback, measured in the test VM (cgroup v2,
// +io +memory): writeback is charged to the cgroup that owns the file's
// cached pages, not to whoever dirties them later. A file written by
// cgroup A and then rewritten in place by cgroup B (pages still cached) is
// charged to A, also when B calls fsync itself, and, once A is removed, to
// A's parent: never to B. Only once B's pages are its own (the cache
// dropped, so B's writes allocate new pages charged to B) does the
// kernel's foreign-inode detection move the file to B, after a few rounds
// of writeback.
//
// Kernel (6.1, fs/fs-writeback.c, mm/page-writeback.c): the first page
// dirtied attaches the inode to its memcg's writeback context
// (__inode_attach_wb, from folio_account_dirtied); every writeback of the
// inode, fsync included (wbc_attach_fdatawrite_inode), tags its bios with
// that context's blkcg (wbc_init_bio). wbc_account_cgroup_owner votes for
// the memcg each written page is charged to — the one that allocated it,
// not the one that dirtied it — and ignores dead ones; wbc_detach_inode
// switches the inode (inode_switch_wbs) only when another memcg won more
// than half of ~2 s of writeback history (9 of 16 slots, at most 5 per
// round). A rewriter of cached pages never wins a vote.
// cleanup_offline_cgwb moves a removed cgroup's inodes to the nearest
// living ancestor. mem_cgroup_track_foreign_dirty only records, on the
// page's memcg, that a foreign writeback context dirties its pages (to
// flush it when that memcg runs out of dirty room); it moves no charge.
func TestRealV2WritebackOwner(t *testing.T) {
	testkit.VMOnly(t)
	testkit.NeedRoot(t)
	layout, err := Layout(DefaultRoots())
	testkit.Need(t, err == nil && layout.Unified != "", "cgroup2 mounted: layout %+v, %v", layout, err)
	disk := os.Getenv("DDISKQOS_VM_DISK")
	testkit.Need(t, disk != "", "the VM's test disk (DDISKQOS_VM_DISK)")
	_, err = exec.LookPath("mkfs.ext4")
	testkit.Need(t, err == nil, "mkfs.ext4 (e2fsprogs) not in PATH")
	devText, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(disk), "dev"))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cgroupfs.ParseDev(strings.TrimSpace(string(devText)))
	if err != nil {
		t.Fatal(err)
	}
	mnt := mountExt4(t, testkit.Loop{Path: disk})
	file := filepath.Join(mnt, "shared")

	h := cgroupfs.Hierarchy{Version: 2, Mount: layout.Unified}
	parent := fmt.Sprintf("/ddiskqos-test-wbowner-%d", os.Getpid())
	pdir := testkit.Cgroup(t, filepath.Join(layout.Unified, parent))
	if err := os.WriteFile(filepath.Join(pdir, "cgroup.subtree_control"), []byte("+io +memory"), 0); err != nil {
		t.Fatalf("enable +io +memory for %s: %v", parent, err)
	}
	a, b := parent+"/a", parent+"/b"
	adir := testkit.Cgroup(t, filepath.Join(layout.Unified, a))
	testkit.Cgroup(t, filepath.Join(layout.Unified, b))

	const size = 64 << 20
	written := func(cg string) uint64 {
		t.Helper()
		c, err := h.Open(cg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		st, err := c.ReadIO()
		if err != nil {
			t.Fatal(err)
		}
		d, _ := st.Device(dev)
		return d.WBytes
	}
	// devWritten is what the disk has written (sectors written, the 7th
	// field of /sys/block/<dev>/stat), in bytes.
	devWritten := func() uint64 {
		t.Helper()
		p := filepath.Join("/sys/block", filepath.Base(disk), "stat")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		if len(f) < 7 {
			t.Fatalf("%s: %q", p, b)
		}
		n, err := strconv.ParseUint(f[6], 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return n * 512
	}
	// write writes the file's 64 MiB in place from a process in cg (with
	// conv, e.g. ",fsync"), then syncs from outside, and returns the bytes
	// charged to each of the cgroups in cgs meanwhile, and last what the
	// disk wrote.
	write := func(cg, conv string, cgs ...string) []uint64 {
		t.Helper()
		cgs = append(cgs, "")
		before := make([]uint64, len(cgs))
		for i, c := range cgs {
			if c == "" {
				before[i] = devWritten()
			} else {
				before[i] = written(c)
			}
		}
		dir, _ := h.Path(cg)
		script := `echo $$ > "$1/cgroup.procs" && exec dd if=/dev/urandom of="$2" bs=1M count=64 conv=notrunc` + conv + ` status=none`
		if out, err := exec.Command("sh", "-c", script, "sh", dir, file).CombinedOutput(); err != nil {
			t.Fatalf("dd in %s: %v: %s", cg, err, out)
		}
		unix.Sync()
		got := make([]uint64, len(cgs))
		for i, c := range cgs {
			if c == "" {
				got[i] = devWritten() - before[i]
			} else {
				got[i] = written(c) - before[i]
			}
		}
		return got
	}
	mib := func(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
	const most, little = size * 9 / 10, size / 20

	// A writes the file first: its pages are A's, and so is the inode.
	got := write(a, "", a, b)
	t.Logf("A writes the new file: A charged %s, B %s; the disk wrote %s", mib(got[0]), mib(got[1]), mib(got[2]))
	if got[0] < most || got[1] > little {
		t.Fatalf("first writer A charged %s, B %s; want A >= 90 %% of 64 MiB", mib(got[0]), mib(got[1]))
	}
	// B rewrites it in place, the pages still cached: A pays, whoever syncs.
	for _, conv := range []string{"", ",fsync", ""} {
		got = write(b, conv, a, b)
		t.Logf("B rewrites it (dd conv=notrunc%s): A charged %s, B %s; the disk wrote %s", conv, mib(got[0]), mib(got[1]), mib(got[2]))
		if got[0] < most || got[1] > little {
			t.Fatalf("B's rewrite of A's cached file (conv=notrunc%s): A charged %s, B %s; want A >= 90 %%, B <= 5 %%",
				conv, mib(got[0]), mib(got[1]))
		}
	}
	// A is removed (as a container that ends): its parent pays, B still not.
	testkit.RemoveCgroup(t, adir)
	for range 2 {
		got = write(b, "", parent, b)
		t.Logf("B rewrites it, A removed: the parent (recursive) charged %s, B %s; the disk wrote %s", mib(got[0]), mib(got[1]), mib(got[2]))
		if got[0] < most || got[1] > little {
			t.Fatalf("B's rewrite of the removed A's cached file: the parent charged %s, B %s; want >= 90 %% and <= 5 %% of 64 MiB", mib(got[0]), mib(got[1]))
		}
	}
	// The file's pages dropped from the cache, B's writes allocate pages
	// charged to B: the inode switches to B after a few rounds.
	switched := -1
	var shares []string
	for round := range 5 {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		if err != nil {
			t.Fatalf("fadvise DONTNEED %s: %v", file, err)
		}
		got = write(b, "", b)
		shares = append(shares, mib(got[0])+" of "+mib(got[1]))
		if got[0] >= most {
			switched = round
			break
		}
	}
	t.Logf("B rewrites it with the cache dropped before each round: B charged %s", strings.Join(shares, ", "))
	// One round adds at most 5 of the 9 foreign slots a switch needs.
	if switched < 1 {
		t.Fatalf("B's rewrites of pages it owns: charged to B from round %d (%s); want after the first, within 5", switched+1, strings.Join(shares, ", "))
	}
	t.Logf("the inode switched to B before round %d of writing its own pages", switched+1)
}

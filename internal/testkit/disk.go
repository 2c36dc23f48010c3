package testkit

// Real disks a test may use as its own: a loop device made for it, or the
// test VM's disk; and their I/O schedulers.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/kconfig"
	"github.com/ddiskqos/ddiskqos/internal/loopdev"
	"golang.org/x/sys/unix"
)

// Loop is a loop device made for one test.
type Loop struct {
	Name  string // e.g. "loop3"
	Path  string // e.g. "/dev/loop3"
	Major uint32
	Minor uint32
	File  string // backing file
}

// Dev returns "MAJ:MIN".
func (l Loop) Dev() string { return fmt.Sprintf("%d:%d", l.Major, l.Minor) }

// LoopDevice attaches a loop device over a new sparse file of sizeMiB MiB,
// filled with data so reads are not of holes, and detaches it when the test
// ends. The backing file lives under /var/tmp (not tmpfs) and the loop
// device reads it with direct I/O, so the real disk, not the page cache, is
// what readers compete for — as with a container volume on a real disk.
func LoopDevice(t testing.TB, sizeMiB int) Loop {
	t.Helper()
	NeedRoot(t)
	_, err := exec.LookPath("losetup")
	Need(t, err == nil, "losetup (util-linux) not found in PATH")
	dir, err := os.MkdirTemp("/var/tmp", "ddiskqos-loop-")
	if err != nil {
		t.Fatalf("loop backing dir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	file := filepath.Join(dir, "disk.img")
	f, err := os.Create(file)
	if err != nil {
		t.Fatalf("loop backing file: %v", err)
	}
	// Write real (non-zero) data so every block is allocated.
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i*7 + 1)
	}
	for i := 0; i < sizeMiB; i++ {
		if _, err := f.Write(chunk); err != nil {
			f.Close()
			t.Fatalf("fill loop backing file %s: %v", file, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close %s: %v", file, err)
	}
	// A brand-new device (see loopdev): loop0..7 keep queue state from
	// whatever used them before.
	ld, err := loopdev.Attach(file, true)
	if err != nil {
		t.Fatalf("loop device over %s: %v", file, err)
	}
	t.Cleanup(func() {
		if err := ld.Detach(); err != nil {
			t.Errorf("detach %s: %v", ld.Path, err)
		}
	})
	path := ld.Path
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return Loop{Name: filepath.Base(path), Path: path, Major: unix.Major(st.Rdev), Minor: unix.Minor(st.Rdev), File: file}
}

// SetScheduler selects the I/O scheduler of block device name (e.g.
// "loop3", "vda" inside the test VM) and puts the old one back when the test
// ends. It refuses the host's own disk: only loop devices, or any device
// inside the test VM.
func SetScheduler(t testing.TB, name, sched string) {
	t.Helper()
	if !strings.HasPrefix(name, "loop") && !InVM() {
		t.Fatalf("refusing to change the scheduler of %s outside the test VM: use a loop device", name)
	}
	p := filepath.Join("/sys/block", name, "queue", "scheduler")
	old, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	cur := ActiveScheduler(string(old))
	if !strings.Contains(string(old), sched) && sched == "bfq" && NoBFQ() {
		// Not something to install: the kernel has none to load. The
		// test's subject (a group weight) does not exist on this kernel
		// under cgroup v1.
		SkipNoBFQ(t, fmt.Sprintf("%s offers %q", name, strings.TrimSpace(string(old))))
	}
	Need(t, strings.Contains(string(old), sched), "scheduler %q not offered by %s (%q)", sched, name, strings.TrimSpace(string(old)))
	if err := os.WriteFile(p, []byte(sched), 0); err != nil {
		t.Fatalf("set scheduler %s on %s: %v", sched, name, err)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(p); err != nil {
			return // device already gone
		}
		if err := os.WriteFile(p, []byte(cur), 0); err != nil {
			t.Errorf("restore scheduler %s on %s: %v", cur, name, err)
		}
	})
}

// NoBFQ reports whether the running kernel is built without bfq
// (kconfig.WithoutBFQ): nothing to install or load, and no group weight
// under cgroup v1.
func NoBFQ() bool { return kconfig.WithoutBFQ("/proc") }

// SkipNoBFQ skips a test that needs bfq's group weights on a kernel built
// without bfq (NoBFQ), even under DDISKQOS_REQUIRE_REAL: nothing is
// missing that an install could give. seen says what showed it.
func SkipNoBFQ(t testing.TB, seen string) {
	t.Helper()
	var u unix.Utsname
	unix.Uname(&u)
	t.Skipf("kernel %s is built without bfq (/proc/config.gz: CONFIG_IOSCHED_BFQ is not set; %s): this test needs bfq's group weights",
		unix.ByteSliceToString(u.Release[:]), seen)
}

// PreferBFQ selects bfq on block device name (SetScheduler) and reports
// true, or, on a kernel built without bfq (NoBFQ), leaves the device's
// scheduler as it is and reports false: for a rig whose tests shape I/O
// through whichever mechanism the device offers (bfq's weights beside
// the throttle's caps, or the caps alone).
func PreferBFQ(t testing.TB, name string) bool {
	t.Helper()
	if NoBFQ() {
		return false
	}
	SetScheduler(t, name, "bfq")
	return true
}

// ActiveScheduler returns the bracketed entry of a queue/scheduler file.
func ActiveScheduler(s string) string {
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]") {
			return strings.Trim(f, "[]")
		}
	}
	return ""
}

// Disk is a real block device a test may use as its own, whole: a loop
// device made for it (LoopDevice), or the test VM's disk (VMDisk).
type Disk struct {
	Name  string // as in /sys/block: "loop3", "vda"
	Path  string // "/dev/loop3"
	Major uint32
	Minor uint32
	Size  int64 // bytes
}

// Dev returns "MAJ:MIN".
func (d Disk) Dev() string { return fmt.Sprintf("%d:%d", d.Major, d.Minor) }

// Disk is l as a Disk.
func (l Loop) Disk(t testing.TB) Disk {
	t.Helper()
	return diskOf(t, l.Path)
}

// VMDisk is the test VM's disk (EnvVMDisk, set by the VM's init): a skip,
// or a failure under EnvRequireReal, where there is none.
func VMDisk(t testing.TB) Disk {
	t.Helper()
	p := VMDiskPath()
	Need(t, p != "", "%s is not set: no test VM disk (run in the VM: go test -exec vmexec)", EnvVMDisk)
	return diskOf(t, p)
}

// OwnDisk is a real disk for the test alone: the VM's disk inside the test
// VM, else a new loop device of sizeMiB MiB.
func OwnDisk(t testing.TB, sizeMiB int) Disk {
	t.Helper()
	if InVM() {
		return VMDisk(t)
	}
	return LoopDevice(t, sizeMiB).Disk(t)
}

// diskOf reads the device numbers and size of the block device at path
// from sysfs.
func diskOf(t testing.TB, path string) Disk {
	t.Helper()
	d := Disk{Name: filepath.Base(path), Path: path}
	dev, err := os.ReadFile(filepath.Join("/sys/block", d.Name, "dev"))
	if err != nil {
		t.Fatalf("disk %s: %v", path, err)
	}
	if _, err := fmt.Sscanf(strings.TrimSpace(string(dev)), "%d:%d", &d.Major, &d.Minor); err != nil {
		t.Fatalf("disk %s: /sys/block/%s/dev %q: %v", path, d.Name, dev, err)
	}
	size, err := os.ReadFile(filepath.Join("/sys/block", d.Name, "size"))
	if err != nil {
		t.Fatalf("disk %s: %v", path, err)
	}
	sectors, err := strconv.ParseInt(strings.TrimSpace(string(size)), 10, 64)
	if err != nil {
		t.Fatalf("disk %s: /sys/block/%s/size %q: %v", path, d.Name, size, err)
	}
	d.Size = sectors * 512
	return d
}

// Package testkit holds the helpers that real-kernel tests share: skipping
// (or, in CI, failing) when a prerequisite is missing, and loop devices and
// cgroups that are removed again when the test ends, also when it fails.
//
// Set DDISKQOS_REQUIRE_REAL=1 (the README's test command does) and every
// missing prerequisite becomes a test failure instead of a skip, so the
// real-kernel tests can never be skipped silently where they must run.
package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Strict reports whether missing prerequisites fail tests instead of
// skipping them.
func Strict() bool { return os.Getenv("DDISKQOS_REQUIRE_REAL") == "1" }

// InVM reports whether the test runs inside the nested test VM (vmexec).
func InVM() bool { return os.Getenv("DDISKQOS_IN_VM") == "1" }

// Need skips the test with the reason when ok is false — or fails it, when
// DDISKQOS_REQUIRE_REAL=1.
func Need(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if Strict() {
		t.Fatalf("prerequisite missing (DDISKQOS_REQUIRE_REAL=1): %s", msg)
	}
	t.Skipf("prerequisite missing: %s", msg)
}

// NeedRoot requires uid 0.
func NeedRoot(t testing.TB) {
	t.Helper()
	Need(t, os.Geteuid() == 0, "needs root to create cgroups and loop devices (uid is %d)", os.Geteuid())
}

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

// newLoopNode adds a brand-new loop device (LOOP_CTL_ADD at a free index
// from 64 up) and removes it again when the test ends. A new device has a
// new request queue, so each test meets the kernel as a fresh machine would
// — loop0..7 keep per-queue state (schedulers, blk-throttle set-up) from
// whatever used them before.
func newLoopNode(t testing.TB) string {
	t.Helper()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open /dev/loop-control: %v", err)
	}
	defer ctl.Close()
	for idx := 64; idx < 1024; idx++ {
		if _, err := os.Stat(fmt.Sprintf("/sys/block/loop%d", idx)); err == nil {
			continue
		}
		n, err := ioctlArg(int(ctl.Fd()), unix.LOOP_CTL_ADD, idx)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			t.Fatalf("LOOP_CTL_ADD %d: %v", idx, err)
		}
		path := fmt.Sprintf("/dev/loop%d", n)
		t.Cleanup(func() {
			c, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
			if err != nil {
				t.Errorf("open /dev/loop-control: %v", err)
				return
			}
			defer c.Close()
			for try := 0; ; try++ {
				_, err := ioctlArg(int(c.Fd()), unix.LOOP_CTL_REMOVE, n)
				if err == nil || err == unix.ENODEV || err == unix.ENXIO {
					return
				}
				if try == 50 {
					t.Errorf("LOOP_CTL_REMOVE %d: %v", n, err)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
		// devtmpfs creates the node; wait for it briefly.
		for i := 0; i < 100; i++ {
			if _, err := os.Stat(path); err == nil {
				return path
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("%s did not appear after LOOP_CTL_ADD", path)
	}
	t.Fatal("no free loop device index below 1024")
	return ""
}

// ioctlArg is an ioctl whose argument is a plain integer and whose result
// is the return value.
func ioctlArg(fd int, req uint, arg int) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

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
	path := newLoopNode(t)
	if out, err := exec.Command("losetup", "--direct-io=on", path, file).CombinedOutput(); err != nil {
		t.Fatalf("losetup --direct-io=on %s %s: %v: %s", path, file, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "--detach", path).CombinedOutput(); err != nil {
			t.Errorf("losetup --detach %s: %v: %s", path, err, out)
		}
	})
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

// ActiveScheduler returns the bracketed entry of a queue/scheduler file.
func ActiveScheduler(s string) string {
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]") {
			return strings.Trim(f, "[]")
		}
	}
	return ""
}

// Cgroup creates the directory dir (a cgroup) and removes it when the test
// ends, after killing any process still in it.
func Cgroup(t testing.TB, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("create cgroup %s: %v", dir, err)
	}
	t.Cleanup(func() { RemoveCgroup(t, dir) })
	return dir
}

// RemoveCgroup kills the processes in dir and its children, then removes
// them deepest first. Errors are reported with t.Errorf.
func RemoveCgroup(t testing.TB, dir string) {
	t.Helper()
	var dirs []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		deadline := time.Now().Add(5 * time.Second)
		for {
			pids, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(pids)) {
				if pid, err := strconv.Atoi(f); err == nil {
					if p, err := os.FindProcess(pid); err == nil {
						p.Kill()
					}
				}
			}
			err := os.Remove(d)
			if err == nil || os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("remove cgroup %s: %v", d, err)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

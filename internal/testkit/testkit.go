// Package testkit holds the helpers that real-kernel tests share: skipping
// (or, in CI, failing) when a prerequisite is missing, and loop devices and
// cgroups that are removed again when the test ends, also when it fails.
//
// Set DDISKQOS_REQUIRE_REAL=1 (the README's test command does) and every
// missing prerequisite becomes a test failure instead of a skip, so the
// real-kernel tests can never be skipped silently where they must run.
package testkit

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/loopdev"
	"golang.org/x/sys/unix"
)

// Main is a test package's TestMain (see Run) that exits with the tests'
// code.
func Main(m *testing.M, children ...func()) { os.Exit(Run(m, children...)) }

// Run is what Main does, returning the tests' code for a TestMain that
// cleans up after them. A test that starts this test binary again as a
// child process (a workload generator, a lock holder, the ddiskqos
// command) marks the child in its environment: each of children returns at
// once unless the environment says this process is its child, and else
// runs the child and exits (workload.MaybeRunFromEnv). Otherwise the tests
// run.
func Run(m *testing.M, children ...func()) int {
	for _, child := range children {
		child()
	}
	return m.Run()
}

// Background runs fn in a goroutine until the test ends: then fn's context
// is cancelled, and fn must return nil within grace (a source's Run, a
// server). The returned cancel ends fn earlier.
func Background(t testing.TB, grace time.Duration, fn func(ctx context.Context) error) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("returned %v after cancellation, want nil", err)
			}
		case <-time.After(grace):
			t.Errorf("did not return within %s of cancellation", grace)
		}
	})
	return cancel
}

// update is go test's -update: golden files are rewritten from the output.
var update = flag.Bool("update", false, "rewrite the golden files from the output")

// Updating reports whether -update was given.
func Updating() bool { return *update }

// Golden compares got with the golden file path; under -update it writes
// got there instead (creating the directory).
func Golden(t testing.TB, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the output (run with -update after checking the diff):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

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

// SyncBuffer is a log sink that a child process or goroutines write while
// the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FreeAddr returns a loopback address whose port was free just now, for a
// daemon under test to listen on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

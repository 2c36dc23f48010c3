package containers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

func TestCgroupOf(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	os.MkdirAll(filepath.Join(proc, "42"), 0o755)
	os.WriteFile(filepath.Join(proc, "42", "cgroup"), []byte(
		"12:cpu,cpuacct:/docker/abc\n4:blkio:/docker/abc\n\n0::/system.slice/docker-abc.scope\n"), 0o644)
	for _, tc := range []struct{ ctrl, want string }{{"blkio", "/docker/abc"}, {"", "/system.slice/docker-abc.scope"}, {"cpu", "/docker/abc"}} {
		got, err := CgroupOf(proc, 42, tc.ctrl)
		if err != nil || got != tc.want {
			t.Errorf("CgroupOf(%q) = %q, %v; want %q", tc.ctrl, got, err, tc.want)
		}
	}
	if _, err := CgroupOf(proc, 42, "memory"); err == nil {
		t.Error("no memory hierarchy: want an error")
	}
}

// TestIsStatic checks IsStatic against what the kernel does when it runs
// a binary: a dynamically linked one gets its ELF interpreter (ld.so) mapped
// into the process, a static one does not. The cases are a program built
// here with CGO_ENABLED=0 and the system's sleep(1).
func TestIsStatic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"time\"\n\nfunc main() { time.Sleep(time.Minute) }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	static := filepath.Join(dir, "sleeper")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", static, src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build a static program: %v\n%s", err, out)
	}
	sleep, err := exec.LookPath("sleep")
	testkit.Need(t, err == nil, "sleep(1) not found in PATH: %v", err)
	got := map[bool]bool{}
	for _, exe := range []string{static, sleep} {
		want := !mapsInterpreter(t, exe)
		static, err := IsStatic(exe)
		if err != nil || static != want {
			t.Errorf("IsStatic(%s) = %v, %v; the kernel mapped an interpreter: %v", exe, static, err, !want)
		}
		got[want] = true
	}
	if !got[true] || !got[false] {
		t.Fatalf("the cases were not one static and one dynamic binary: %v", got)
	}
	if _, err := IsStatic(src); err == nil {
		t.Error("IsStatic of a text file: want an error")
	}
}

// mapsInterpreter runs exe and reports whether the kernel mapped an ELF
// interpreter (ld-linux, ld-musl) into it, read from /proc/<pid>/maps once
// exe itself is mapped.
func mapsInterpreter(t *testing.T, exe string) bool {
	t.Helper()
	cmd := exec.Command(exe, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		// Until execve is done the maps are the forking test binary's.
		// execve maps exe before its interpreter, and a reader may come
		// in between: once exe is mapped, wait until the program runs its
		// own code (execve has returned), then read the maps again.
		if strings.Contains(string(maps), exe) {
			time.Sleep(300 * time.Millisecond)
			if maps, err = os.ReadFile(fmt.Sprintf("/proc/%d/maps", cmd.Process.Pid)); err != nil {
				t.Fatal(err)
			}
			return strings.Contains(string(maps), "/ld-linux") || strings.Contains(string(maps), "/ld-musl")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never appeared in its process's maps", exe)
	return false
}

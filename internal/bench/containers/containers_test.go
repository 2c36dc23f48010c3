package containers

import (
	"os"
	"path/filepath"
	"testing"
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

func TestIsStatic(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := IsStatic(exe); err != nil {
		t.Errorf("IsStatic(%s): %v", exe, err)
	}
	if _, err := IsStatic("/etc/hostname"); err == nil {
		t.Error("IsStatic of a text file: want an error")
	}
}

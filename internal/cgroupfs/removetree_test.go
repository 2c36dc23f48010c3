package cgroupfs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestRealRemoveTree: a real v1 cgroup tree with a process in its deepest
// cgroup is gone after RemoveTree, and the process is killed.
func TestRealRemoveTree(t *testing.T) {
	if testkit.InVM() {
		t.Skip("the v1 hierarchy is tested on the host")
	}
	testkit.NeedRoot(t)
	mount := "/sys/fs/cgroup/blkio"
	_, err := os.Stat(filepath.Join(mount, "cgroup.procs"))
	testkit.Need(t, err == nil, "no v1 blkio hierarchy at %s: %v", mount, err)
	top := filepath.Join(mount, fmt.Sprintf("ddiskqos-test-removetree-%d", os.Getpid()))
	deep := filepath.Join(top, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(deep); os.Remove(filepath.Dir(deep)); os.Remove(top) })
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	if err := os.WriteFile(filepath.Join(deep, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	if err := RemoveTree(top); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(top); !os.IsNotExist(err) {
		t.Errorf("%s still there (%v)", top, err)
	}
	if err := <-done; err == nil {
		t.Errorf("the process in the tree exited cleanly; want it killed")
	}
}

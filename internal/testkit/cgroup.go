package testkit

// Real cgroups made for a test and removed when it ends.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

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

package hostlock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAcquireRefusesSecondHolder: a second holder is refused with the
// first one's pid; after Release the lock is free again.
func TestAcquireRefusesSecondHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "ddiskqos.lock")
	l, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks are per open file description: a second Acquire in this
	// process conflicts like one in another process would.
	_, err = Acquire(path)
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second Acquire: %v; want ErrHeld naming pid %d and %s", err, os.Getpid(), path)
	}
	// And from another process (flock(1) exits 1 when it cannot lock).
	if _, err := exec.LookPath("flock"); err == nil {
		if err := exec.Command("flock", "-n", path, "true").Run(); err == nil {
			t.Fatal("flock(1) took the lock while it is held")
		}
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
}

func TestPathFromEnv(t *testing.T) {
	t.Setenv(EnvPath, "")
	if Path() != DefaultPath {
		t.Fatalf("Path() = %s, want %s", Path(), DefaultPath)
	}
	t.Setenv(EnvPath, "/tmp/x.lock")
	if Path() != "/tmp/x.lock" {
		t.Fatalf("Path() = %s", Path())
	}
}

// Package hostlock keeps one ddiskqos daemon per host. Two daemons on one
// host undo each other: the second records the first one's values as
// originals, or restores the first one's knobs when it stops. The lock is
// an flock(2) on a file (DefaultPath, or $DDISKQOS_LOCK_FILE): the kernel
// drops it when its holder dies, also on SIGKILL, so a stale file never
// blocks a restart. The file holds the holder's pid, for the refusal.
package hostlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// DefaultPath is the lock file of `ddiskqos run`.
const DefaultPath = "/run/ddiskqos/ddiskqos.lock"

// EnvPath names the environment variable that overrides DefaultPath (two
// daemons on one host for separate cgroup trees, or tests).
const EnvPath = "DDISKQOS_LOCK_FILE"

// Path is the lock file to use: $DDISKQOS_LOCK_FILE, else DefaultPath.
func Path() string {
	if p := os.Getenv(EnvPath); p != "" {
		return p
	}
	return DefaultPath
}

// ErrHeld is returned (wrapped) by Acquire when another process holds the
// lock.
var ErrHeld = errors.New("held by another process")

// Lock is a held host lock.
type Lock struct {
	f *os.File
}

// Acquire takes the lock at path without waiting, creating the file (and
// its directory) if needed. When another process holds it the error wraps
// ErrHeld and names that process's pid.
func Acquire(path string) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "an unknown pid"
			if b, err := os.ReadFile(path); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					holder = "pid " + strconv.Itoa(pid)
				}
			}
			return nil, fmt.Errorf("another ddiskqos daemon runs on this host: lock file %s is %w (%s); one daemon per host (set %s to run one for a separate cgroup tree)",
				path, ErrHeld, holder, EnvPath)
		}
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock file %s: %w", path, err)
		}
	}
	return &Lock{f: f}, nil
}

// Release drops the lock. The file stays (removing it would let a third
// process lock a new file while a second waits on the old one).
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	return err
}

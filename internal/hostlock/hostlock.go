// Package hostlock keeps one ddiskqos daemon per host. Two daemons on one
// host undo each other: the second records the first one's values as
// originals, or restores the first one's knobs when it stops. The lock is
// an flock(2) on a file (DefaultPath, or $DDISKQOS_LOCK_FILE): the kernel
// drops it when its holder dies, also on SIGKILL, so a stale file never
// blocks a restart. The file holds the holder's pid and pid namespace, for
// the refusal: a daemon in a container is pid 1 of its own namespace, and
// "held by pid 1" would name init on the host.
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
			b, _ := os.ReadFile(path)
			return nil, fmt.Errorf("another ddiskqos daemon runs on this host: lock file %s is %w: %s; one daemon per host (set %s to run one for a separate cgroup tree)",
				path, ErrHeld, holder(b, "/proc"), EnvPath)
		}
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		ns, _ := os.Readlink("/proc/self/ns/pid")
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"+ns+"\n"), 0)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock file %s: %w", path, err)
		}
	}
	return &Lock{f: f}, nil
}

// holder describes the process that holds the lock from what the lock
// file holds: "PID\nNS\n", its pid and its pid namespace as the holder
// sees them (NS as readlink /proc/self/ns/pid says: pid:[4026531836]). In
// another namespace than ours the pid is not ours to name: say so, and find
// its pid here among the processes of proc if we can see it.
func holder(file []byte, proc string) string {
	f := strings.Fields(string(file))
	if len(f) == 0 {
		return "pid unknown"
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return "pid unknown"
	}
	own, _ := os.Readlink(filepath.Join(proc, "self", "ns", "pid"))
	if len(f) < 2 || f[1] == own || own == "" {
		return "pid " + strconv.Itoa(pid)
	}
	if here := pidHere(proc, f[1], pid); here > 0 {
		return fmt.Sprintf("a process in another pid namespace (pid %d there, pid %d here; a daemon in a container?)", pid, here)
	}
	return fmt.Sprintf("a process in another pid namespace (pid %d there; a daemon in a container?)", pid)
}

// pidHere returns the pid in proc's namespace of the process whose pid in
// the namespace ns is pid (the last NSpid of /proc/N/status), or 0.
func pidHere(proc, ns string, pid int) int {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return 0
	}
	want := strconv.Itoa(pid)
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, _ := os.Readlink(filepath.Join(proc, e.Name(), "ns", "pid")); l != ns {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "status"))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
				if ids := strings.Fields(rest); len(ids) > 1 && ids[len(ids)-1] == want {
					return n
				}
			}
		}
	}
	return 0
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

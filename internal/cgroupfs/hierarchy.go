package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Hierarchy is the cgroup hierarchy that holds the I/O controller: v1 blkio
// or the unified v2 tree. Its Mount is a value so tests can use a temp dir.
type Hierarchy struct {
	Version int    // 1 or 2
	Mount   string // e.g. /sys/fs/cgroup/blkio (v1) or /sys/fs/cgroup (v2)
}

// Path returns the directory of the cgroup named rel inside the hierarchy.
// rel is cleaned as an absolute path first, so no name — a container name, a
// label, a config value — can walk out of the hierarchy with "..".
func (h Hierarchy) Path(rel string) (string, error) {
	if h.Mount == "" {
		return "", fmt.Errorf("cgroup %q: hierarchy has no mount point", rel)
	}
	if strings.ContainsRune(rel, 0) {
		return "", fmt.Errorf("cgroup %q: %w", rel, ErrOutsideHierarchy)
	}
	clean := filepath.Clean("/" + rel)
	p := filepath.Join(h.Mount, clean)
	mount := filepath.Clean(h.Mount)
	if p != mount && !strings.HasPrefix(p, mount+string(filepath.Separator)) {
		return "", fmt.Errorf("cgroup %q: %w", rel, ErrOutsideHierarchy)
	}
	return p, nil
}

// Within returns the path of child (a relative name) under the cgroup
// parent, refusing any child that would resolve outside parent.
func Within(parent, child string) (string, error) {
	if strings.ContainsRune(child, 0) {
		return "", fmt.Errorf("cgroup %q under %q: %w", child, parent, ErrOutsideHierarchy)
	}
	clean := filepath.Clean("/" + child)
	if clean == "/" {
		return "", fmt.Errorf("cgroup %q under %q: empty name: %w", child, parent, ErrOutsideHierarchy)
	}
	return filepath.Join(filepath.Clean("/"+parent), clean), nil
}

// DirIno is the inode of cgroup rel's directory: a cgroup removed and
// created again under the same name has another one. 0 when the file
// system gives none.
func (h Hierarchy) DirIno(rel string) (uint64, error) {
	p, err := h.Path(rel)
	if err != nil {
		return 0, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino, nil
	}
	return 0, nil
}

// Recreated reports whether cgroup rel, whose directory had inode ino when
// first seen (0: unknown), is another directory now: removed and created
// again under the same name. A cgroup that is gone is not recreated.
func (h Hierarchy) Recreated(rel string, ino uint64) bool {
	now, err := h.DirIno(rel)
	return err == nil && ino != 0 && now != ino
}

// Create makes the cgroup rel (and its parents) and returns its directory.
func (h Hierarchy) Create(rel string) (string, error) {
	p, err := h.Path(rel)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return "", fmt.Errorf("create cgroup %s: %w", p, err)
	}
	return p, nil
}

// Remove removes the cgroup rel and every cgroup below it, deepest first.
// Processes must already have left them. A cgroup already gone is no error.
func (h Hierarchy) Remove(rel string) error {
	p, err := h.Path(rel)
	if err != nil {
		return err
	}
	if p == filepath.Clean(h.Mount) {
		return fmt.Errorf("remove cgroup %q: refusing to remove the hierarchy root", rel)
	}
	var dirs []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove cgroup %s: %w", p, err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove cgroup %s: %w", dirs[i], err)
		}
	}
	return nil
}

// AddProcess moves process pid into the cgroup rel.
func (h Hierarchy) AddProcess(rel string, pid int) error {
	p, err := h.Path(rel)
	if err != nil {
		return err
	}
	f := filepath.Join(p, "cgroup.procs")
	if err := os.WriteFile(f, []byte(fmt.Sprintf("%d\n", pid)), 0); err != nil {
		return fmt.Errorf("add pid %d to %s: %w", pid, f, err)
	}
	return nil
}

package host

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Roots are the filesystem roots the host facts are read from. Nothing in
// this package opens a path that does not start at one of them, so tests
// (and a check run from a container with the host's /sys and /proc mounted
// elsewhere) point the same code at another tree.
type Roots struct {
	Sys  string // sysfs, normally /sys
	Proc string // procfs, normally /proc
	// Mountinfo is the mount table that says where cgroups are mounted;
	// "" means <Proc>/self/mountinfo.
	Mountinfo string
}

// DefaultRoots are the host's own /sys and /proc.
func DefaultRoots() Roots { return Roots{Sys: "/sys", Proc: "/proc"} }

func (r Roots) sys(parts ...string) string {
	return filepath.Join(append([]string{r.Sys}, parts...)...)
}
func (r Roots) proc(parts ...string) string {
	return filepath.Join(append([]string{r.Proc}, parts...)...)
}

// MountinfoPath is the mount table read by Layout.
func (r Roots) MountinfoPath() string {
	if r.Mountinfo != "" {
		return r.Mountinfo
	}
	return r.proc("self", "mountinfo")
}

// Layout detects the cgroup layout from the mount table and re-roots every
// mount point below /sys onto r.Sys. Cgroup filesystems are mounted under
// /sys/fs/cgroup on every distribution, so with --path-sys=/host/sys the layout
// points into /host/sys/fs/cgroup, and a test's tree in t.TempDir() works
// with an ordinary mountinfo. Mount points elsewhere are kept as they are.
func Layout(r Roots) (cgroupfs.Layout, error) {
	l, err := cgroupfs.DetectLayout(r.MountinfoPath())
	if err != nil {
		return cgroupfs.Layout{}, err
	}
	l.Unified = r.reroot(l.Unified)
	v1 := make([]cgroupfs.V1Mount, len(l.V1))
	for i, m := range l.V1 {
		m.Mountpoint = r.reroot(m.Mountpoint)
		m.Controllers = append([]string(nil), m.Controllers...)
		v1[i] = m
	}
	l.V1 = v1
	return l, nil
}

func (r Roots) reroot(mountpoint string) string {
	if mountpoint == "" || r.Sys == "" || filepath.Clean(r.Sys) == "/sys" {
		return mountpoint
	}
	clean := filepath.Clean(mountpoint)
	if clean == "/sys" || strings.HasPrefix(clean, "/sys/") {
		return filepath.Join(r.Sys, strings.TrimPrefix(clean, "/sys"))
	}
	return mountpoint
}

func (r Roots) String() string { return fmt.Sprintf("sys=%s proc=%s", r.Sys, r.Proc) }

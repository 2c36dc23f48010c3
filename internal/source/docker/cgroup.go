package docker

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Cgroup drivers of the Docker engine, as its Info reports them.
const (
	DriverCgroupfs = "cgroupfs"
	DriverSystemd  = "systemd"
)

// ErrUnresolved means a container's cgroup could be found neither from its
// process nor from its configuration.
var ErrUnresolved = errors.New("container cgroup not resolved")

// ioLine picks the path of the I/O hierarchy: the blkio line on v1 (and
// hybrid, where block I/O is still v1's), the "0::" line on v2.
func ioLine(lines []cgroupfs.ProcCgroup, version int) (string, bool) {
	if version == 1 {
		return cgroupfs.CgroupIn(lines, "blkio")
	}
	return cgroupfs.CgroupIn(lines, "")
}

// containerPart cuts a process's cgroup path after the component that names
// the container: "<id>" (cgroupfs driver) or "docker-<id>.scope" (systemd),
// so a main process that moved into a child (".../<id>/init" when the
// container runs its own init) still yields the container's cgroup. A path
// without the id does not belong to this container (the pid was reused, or
// it lives in another pid namespace) and is refused.
func containerPart(p, id string) (string, bool) {
	if id == "" {
		return "", false
	}
	comps := strings.Split(strings.Trim(p, "/"), "/")
	for i, c := range comps {
		if c == ".." {
			return "", false // outside our cgroup namespace
		}
		if strings.Contains(c, id) {
			return "/" + strings.Join(comps[:i+1], "/"), true
		}
	}
	return "", false
}

// stripRoot makes a path from /proc (relative to the cgroup namespace)
// relative to the hierarchy's mount, whose root is the cgroup root ("/" on a
// host, e.g. "/docker/<self>" when ddiskqos itself runs in a container that
// sees only its part of the tree).
func stripRoot(p, root string) (string, bool) {
	root = path.Clean("/" + root)
	if root == "/" {
		return p, true
	}
	if p == root {
		return "/", true
	}
	if rest, ok := strings.CutPrefix(p, root+"/"); ok {
		return "/" + rest, true
	}
	return "", false
}

// ExpandSlice turns a systemd slice name into its cgroup path, the way
// systemd nests slices by their dash-separated prefixes:
//
//	-.slice          → /
//	system.slice     → /system.slice
//	a-b-c.slice      → /a.slice/a-b.slice/a-b-c.slice
func ExpandSlice(slice string) (string, error) {
	if slice == "-.slice" {
		return "/", nil
	}
	name, ok := strings.CutSuffix(slice, ".slice")
	if !ok || name == "" || strings.ContainsAny(name, "/\x00") {
		return "", fmt.Errorf("systemd slice %q: want a name like a-b.slice", slice)
	}
	var b strings.Builder
	prefix := ""
	for _, comp := range strings.Split(name, "-") {
		if comp == "" {
			return "", fmt.Errorf("systemd slice %q: empty component between dashes", slice)
		}
		b.WriteString("/" + prefix + comp + ".slice")
		prefix += comp + "-"
	}
	return b.String(), nil
}

// ComputeCgroup derives a container's cgroup, relative to the I/O
// hierarchy, from its configuration alone, as dockerd asks runc to make it:
//
//	cgroupfs driver: <parent or /docker>/<id>
//	systemd driver:  <expanded parent slice or /system.slice>/docker-<id>.scope
//
// The layout (v1, v2, hybrid) does not change the path, only the hierarchy
// it lives in. An engine started with its own --cgroup-parent does not
// report it, which is why the main process's /proc/<pid>/cgroup is
// preferred; see resolver.
func ComputeCgroup(driver, parent, id string) (string, error) {
	if id == "" || strings.ContainsAny(id, "/\x00") || id == "." || id == ".." {
		return "", fmt.Errorf("container id %q: not a valid id", id)
	}
	switch driver {
	case DriverCgroupfs:
		if parent == "" {
			parent = "/docker"
		}
		return cgroupfs.Within(parent, id)
	case DriverSystemd:
		if parent == "" {
			parent = "system.slice"
		}
		dir, err := ExpandSlice(parent)
		if err != nil {
			return "", fmt.Errorf("cgroup parent of container %s: %w", id, err)
		}
		return cgroupfs.Within(dir, "docker-"+id+".scope")
	}
	return "", fmt.Errorf("cgroup driver %q of container %s: %w", driver, id, ErrUnresolved)
}

// resolver finds the cgroup of a container.
type resolver struct {
	procfs  string // root of procfs, normally /proc
	version int    // version of the I/O hierarchy: 1 (v1 and hybrid) or 2
	root    string // cgroup of the I/O hierarchy's mount root, "/" on a host
}

// resolve returns the container's cgroup relative to the I/O hierarchy's
// mount, and how it was found ("proc" or "config"). The main process's
// /proc/<pid>/cgroup is the truth; when it cannot be read or does not name
// the container, the path is computed from the engine's cgroup driver and
// the container's cgroup parent.
func (r resolver) resolve(id string, pid int, driver, parent string) (string, string, error) {
	if pid > 0 {
		if p, err := r.fromProc(id, pid); err == nil {
			return p, "proc", nil
		}
	}
	p, err := ComputeCgroup(driver, parent, id)
	if err != nil {
		return "", "", err
	}
	return p, "config", nil
}

func (r resolver) fromProc(id string, pid int) (string, error) {
	f := filepath.Join(r.procfs, strconv.Itoa(pid), "cgroup")
	lines, err := cgroupfs.ReadProcCgroup(r.procfs, pid)
	if err != nil {
		return "", err
	}
	p, ok := ioLine(lines, r.version)
	if !ok {
		return "", fmt.Errorf("%s: no line for the v%d I/O hierarchy: %w", f, r.version, ErrUnresolved)
	}
	cp, ok := containerPart(p, id)
	if !ok {
		return "", fmt.Errorf("%s: path %s does not name container %s: %w", f, p, id, ErrUnresolved)
	}
	rel, ok := stripRoot(cp, r.root)
	if !ok {
		return "", fmt.Errorf("%s: %s is outside the mount root %s: %w", f, cp, r.root, ErrUnresolved)
	}
	return rel, nil
}

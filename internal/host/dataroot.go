package host

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// MountOf returns the mount that holds dir: the one with the longest
// mount point that is dir or a parent of it; of several mounts on the same
// point the last (the one on top). ok is false when none holds it.
func MountOf(mounts []cgroupfs.Mount, dir string) (cgroupfs.Mount, bool) {
	dir = path.Clean("/" + dir)
	var best cgroupfs.Mount
	found := false
	for _, m := range mounts {
		mp := path.Clean(m.Mountpoint)
		if mp != "/" && dir != mp && !strings.HasPrefix(dir, mp+"/") {
			continue
		}
		if !found || len(mp) >= len(path.Clean(best.Mountpoint)) {
			best, found = m, true
		}
	}
	return best, found
}

// DataRoot is where Docker's data root (image layers, container
// filesystems, volumes) lives, down to the disks its I/O reaches.
type DataRoot struct {
	Dir        string `json:"dir"`
	Mountpoint string `json:"mountpoint,omitempty"`
	FSType     string `json:"fstype,omitempty"`
	Source     string `json:"source,omitempty"`
	Dev        string `json:"dev,omitempty"` // the filesystem's MAJ:MIN
	// Devices are the block devices its I/O goes through, the
	// filesystem's own disk first, then what that stacks on: the disks
	// under a dm or md device, the disk holding a loop device's backing
	// file, recursively. Empty when the filesystem has no block device
	// (tmpfs, overlay, a network filesystem).
	Devices []string `json:"devices,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// ResolveDataRoot finds the mount of dir in the mount table at mountinfo
// and the block devices under it, following dm/md slaves and loop backing
// files through devs as Lowers does.
func ResolveDataRoot(r Roots, mountinfo, dir string, devs []Device) DataRoot {
	d := DataRoot{Dir: dir}
	mounts, err := cgroupfs.ReadMounts(mountinfo)
	if err != nil {
		d.Error = err.Error()
		return d
	}
	m, ok := MountOf(mounts, dir)
	if !ok {
		d.Error = fmt.Sprintf("no mount in %s holds %s", mountinfo, dir)
		return d
	}
	d.Mountpoint, d.FSType, d.Source, d.Dev = m.Mountpoint, m.FSType, m.Source, m.Dev.String()
	disk, err := ResolveDisk(r, d.Dev)
	if err != nil && strings.HasPrefix(m.Source, "/dev/") {
		// btrfs reports an anonymous 0:N device; its source names the disk.
		disk, err = ResolveDisk(r, filepath.Base(m.Source))
	}
	if err != nil {
		return d // no block device: tmpfs, overlay, nfs
	}
	byName := map[string]Device{}
	for _, dv := range devs {
		byName[dv.Name] = dv
	}
	queue := []string{disk}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if slices.Contains(d.Devices, name) {
			continue
		}
		d.Devices = append(d.Devices, name)
		dv, ok := byName[name]
		if !ok {
			continue
		}
		queue = append(queue, dv.Slaves...)
		if dv.BackingFile != "" {
			if lower, err := diskOfFile(r, dv.BackingFile); err == nil {
				queue = append(queue, lower)
			}
		}
	}
	return d
}

// Shaped reports whether the daemon shapes I/O on d given the device globs
// of its config (run's --devices): a Selected device where a mechanism
// reaches. It is the rule internal/app applies.
func Shaped(d Device, globs []string) bool {
	return Selected(d, globs) && d.Mechanism != MechNone && d.Mechanism != ""
}

// Selected reports whether the device globs of the config choose d: with
// globs, every device whose name matches one; without, every target
// device. Globs are checked by the config; a bad one matches nothing.
func Selected(d Device, globs []string) bool {
	if len(globs) == 0 {
		return d.Target
	}
	for _, g := range globs {
		if ok, _ := filepath.Match(g, d.Name); ok {
			return true
		}
	}
	return false
}

// RTRuntime is cpu.rt_runtime_us of the cgroup v1 parent that the
// containers' cgroups are created in: a task may only use a real-time
// policy (SCHED_FIFO, SCHED_RR) in a cgroup with runtime above 0, and a
// new cgroup starts at 0.
type RTRuntime struct {
	// Parent is the containers' parent cgroup: /docker (cgroupfs driver)
	// or /system.slice (systemd driver).
	Parent string
	Mount  string // the v1 cpu hierarchy's mount
	// Present is false when the kernel has no RT group scheduling
	// (CONFIG_RT_GROUP_SCHED off: the root has no cpu.rt_runtime_us).
	Present bool
	Root    int64 // the root's cpu.rt_runtime_us
	// ParentExists is false until the engine made the parent (at the first
	// container start).
	ParentExists bool
	Value        int64 // the parent's cpu.rt_runtime_us
	Err          error
}

// File is the parent's cpu.rt_runtime_us.
func (rt RTRuntime) File() string {
	return filepath.Join(rt.Mount, rt.Parent, "cpu.rt_runtime_us")
}

// ReadRTRuntime reads cpu.rt_runtime_us of the root and of parent in the
// v1 cpu hierarchy at mount.
func ReadRTRuntime(mount, parent string) RTRuntime {
	rt := RTRuntime{Parent: parent, Mount: mount}
	read := func(p string) (int64, error) {
		s, err := readTrim(p)
		if err != nil {
			return 0, err
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not a number", p, s)
		}
		return v, nil
	}
	var err error
	rt.Root, err = read(filepath.Join(mount, "cpu.rt_runtime_us"))
	if errors.Is(err, fs.ErrNotExist) {
		return rt
	}
	if err != nil {
		rt.Err = err
		return rt
	}
	rt.Present = true
	rt.Value, err = read(rt.File())
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		rt.Err = err
	default:
		rt.ParentExists = true
	}
	return rt
}

// containersParent is the cgroup Docker puts containers under with
// driver.
func containersParent(driver string) string {
	if driver == "systemd" {
		return "/system.slice"
	}
	return "/docker"
}

// hasFilesystem reports whether /proc/filesystems lists fstype.
func hasFilesystem(r Roots, fstype string) (bool, error) {
	f, err := os.Open(r.proc("filesystems"))
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 && fields[len(fields)-1] == fstype {
			return true, nil
		}
	}
	return false, sc.Err()
}

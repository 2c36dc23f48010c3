package host

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Mount is one line of a mountinfo file.
type Mount struct {
	Mountpoint string
	Dev        string // MAJ:MIN of the filesystem (0:N for ones without a block device)
	FSType     string
	Source     string // e.g. /dev/vda1, tmpfs, overlay
}

// ParseMounts parses /proc/<pid>/mountinfo (proc(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//	(1)(2)(3)   (4)   (5)      (6)      (7)   (8) (9)   (10)         (11)
//
// Field 7 is zero or more optional fields ended by a single "-". Blank
// lines are skipped; a line without six fields, the "-" and two more is a
// *cgroupfs.ParseError.
func ParseMounts(r io.Reader) ([]Mount, error) {
	var out []Mount
	err := eachLine("mountinfo", r, func(n int, line string) error {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			return nil
		}
		sep := slices.Index(fields, "-")
		if sep < 6 || len(fields) < sep+3 {
			return &cgroupfs.ParseError{File: "mountinfo", Line: n, Text: line, Msg: "expected at least 6 fields, '-', and 2 more"}
		}
		if _, _, err := parseDev(fields[2]); err != nil {
			return &cgroupfs.ParseError{File: "mountinfo", Line: n, Text: line, Msg: err.Error()}
		}
		out = append(out, Mount{Mountpoint: unescapeOctal(fields[4]), Dev: fields[2],
			FSType: fields[sep+1], Source: unescapeOctal(fields[sep+2])})
		return nil
	})
	return out, err
}

// unescapeOctal undoes the \ooo escapes (space, tab, newline, backslash)
// the kernel writes into mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// MountOf returns the mount that holds dir: the one with the longest
// mount point that is dir or a parent of it; of several mounts on the same
// point the last (the one on top). ok is false when none holds it.
func MountOf(mounts []Mount, dir string) (Mount, bool) {
	dir = path.Clean("/" + dir)
	var best Mount
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
	f, err := os.Open(mountinfo)
	if err != nil {
		d.Error = err.Error()
		return d
	}
	mounts, err := ParseMounts(f)
	f.Close()
	if err != nil {
		d.Error = fmt.Sprintf("%s: %v", mountinfo, err)
		return d
	}
	m, ok := MountOf(mounts, dir)
	if !ok {
		d.Error = fmt.Sprintf("no mount in %s holds %s", mountinfo, dir)
		return d
	}
	d.Mountpoint, d.FSType, d.Source, d.Dev = m.Mountpoint, m.FSType, m.Source, m.Dev
	disk, err := ResolveDisk(r, m.Dev)
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
// of its config (run's --devices): with globs, every device whose name
// matches one; without, every target device. Either way only where a
// mechanism reaches. It is the rule internal/wiring applies.
func Shaped(d Device, globs []string) bool {
	if d.Mechanism == MechNone || d.Mechanism == "" {
		return false
	}
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

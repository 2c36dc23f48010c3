// Package volume is the benchmark's disk: a loop device over a file, with
// an ext4 file system on it, mounted in a private directory, filled with
// the files the readers read (or, with NoLoop, a directory on the host's
// own file system and the disk under it). Only its own loop device's scheduler is ever
// changed, and Close undoes everything Create did, in reverse order, also
// after a partial Create.
//
// The loop device reads its backing file with direct I/O (losetup
// --direct-io=on), so what readers compete for is the real disk under
// /var/tmp, not the host's page cache — as with a container volume on a
// real disk.
package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/loopdev"
)

// Packages that provide the tools, for the error that says what to install.
const (
	PkgE2fsprogs = "e2fsprogs"  // mkfs.ext4
	PkgUtilLinux = "util-linux" // losetup
)

// MissingToolError is a tool the volume needs that is not installed.
type MissingToolError struct {
	Tool, Package string
}

func (e *MissingToolError) Error() string {
	return fmt.Sprintf("%s not found in PATH: install the %s package (apt-get install %s)", e.Tool, e.Package, e.Package)
}

// CheckTools reports the first missing tool as a *MissingToolError.
func CheckTools() error {
	for _, t := range []MissingToolError{{"losetup", PkgUtilLinux}, {"mkfs.ext4", PkgE2fsprogs}} {
		if _, err := exec.LookPath(t.Tool); err != nil {
			return &t
		}
	}
	return nil
}

// Options describe a volume.
type Options struct {
	// Dir holds the backing file and the mount point, in a new directory
	// removed by Close. It must be on a real disk (not tmpfs). "" is /var/tmp.
	Dir string
	// Size is the volume's size in bytes.
	Size int64
	// Sys is the sysfs root, "" for /sys.
	Sys string
	// AllowTmpfs lets Dir be on tmpfs, for a fast device class whose
	// contention is the CPU the loop worker takes (Linux 6.6 and later
	// give tmpfs direct I/O; without it Create fails as before).
	AllowTmpfs bool
	// NoLoop puts the files straight in a new directory on Dir's file
	// system: the volume is the disk under Dir as it is, shared with the
	// rest of the host. Its scheduler is never changed (SetScheduler
	// refuses any other) and nothing is mounted.
	NoLoop bool
}

// Volume is a mounted loop device.
type Volume struct {
	Name    string // e.g. "loop3"; with NoLoop the disk, e.g. "vda"
	Path    string // e.g. "/dev/loop3"
	Dev     cgroupfs.Dev
	Backing string // the backing file; "" with NoLoop
	Mount   string // where the file system is mounted; with NoLoop the files' directory
	// DefaultScheduler is the scheduler the device had when attached.
	DefaultScheduler string

	dir     string
	sys     string
	loop    *loopdev.Device
	mounted bool
}

// Create makes the volume. On error everything made so far is undone.
func Create(ctx context.Context, o Options) (v *Volume, err error) {
	if err := CheckTools(); err != nil {
		return nil, err
	}
	if o.Dir == "" {
		o.Dir = "/var/tmp"
	}
	if o.Sys == "" {
		o.Sys = "/sys"
	}
	if o.Size < 64<<20 {
		return nil, fmt.Errorf("volume size %d bytes: want at least 64 MiB", o.Size)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(o.Dir, &st); err != nil {
		return nil, fmt.Errorf("statfs %s: %w", o.Dir, err)
	}
	if st.Type == unix.TMPFS_MAGIC && (o.NoLoop || !o.AllowTmpfs) {
		return nil, fmt.Errorf("%s is tmpfs: the volume must sit on a real disk", o.Dir)
	}
	if free := int64(st.Bavail) * st.Bsize; free < o.Size+(1<<30) {
		return nil, fmt.Errorf("%s has %d MiB free; the volume needs %d MiB plus 1 GiB to spare", o.Dir, free>>20, o.Size>>20)
	}
	dir, err := os.MkdirTemp(o.Dir, "ddiskqos-bench-paper-")
	if err != nil {
		return nil, err
	}
	v = &Volume{dir: dir, sys: o.Sys, Backing: filepath.Join(dir, "disk.img"), Mount: filepath.Join(dir, "mnt")}
	defer func() {
		if err != nil {
			err = errors.Join(err, v.Close())
			v = nil
		}
	}()
	if o.NoLoop {
		v.Backing, v.Mount = "", dir
		if v.Name, v.Dev, err = DiskOf(o.Sys, dir); err != nil {
			return v, err
		}
		v.Path = "/dev/" + v.Name
		v.DefaultScheduler, _, err = v.Scheduler()
		return v, err
	}
	f, err := os.Create(v.Backing)
	if err != nil {
		return v, err
	}
	err = f.Truncate(o.Size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return v, fmt.Errorf("size backing file %s: %w", v.Backing, err)
	}
	// A brand-new loop device (loopdev): loop0..7 keep the scheduler and
	// blk-throttle state of whatever used them before.
	ld, err := loopdev.Attach(v.Backing, true)
	if err != nil {
		return v, err
	}
	v.loop = ld
	if !ld.Direct {
		return v, fmt.Errorf("loop device over %s: no direct I/O (is %s on tmpfs?): the readers would compete for the page cache, not the disk", v.Backing, o.Dir)
	}
	v.Path, v.Name = ld.Path, ld.Name
	devText, err := os.ReadFile(filepath.Join(o.Sys, "block", v.Name, "dev"))
	if err != nil {
		return v, err
	}
	if v.Dev, err = cgroupfs.ParseDev(strings.TrimSpace(string(devText))); err != nil {
		return v, err
	}
	if v.DefaultScheduler, _, err = v.Scheduler(); err != nil {
		return v, err
	}
	// Initialise inode tables and journal now, so no ext4lazyinit thread
	// writes in the background while readers are timed.
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", v.Path).CombinedOutput()
	if err != nil {
		return v, fmt.Errorf("mkfs.ext4 %s: %w: %s", v.Path, err, bytesTrim(out))
	}
	if err := os.Mkdir(v.Mount, 0o755); err != nil {
		return v, err
	}
	if err := unix.Mount(v.Path, v.Mount, "ext4", unix.MS_NOATIME, ""); err != nil {
		return v, fmt.Errorf("mount %s on %s: %w", v.Path, v.Mount, err)
	}
	v.mounted = true
	return v, nil
}

func bytesTrim(b []byte) string { return strings.TrimSpace(string(b)) }

// DiskOf is the whole disk that holds dir's file system (the disk of a
// partition; a loop device or any other disk as it is), from the file
// system's device number (host.ResolveDisk): the device blk-throttle caps
// and whose scheduler decides.
func DiskOf(sys, dir string) (name string, dev cgroupfs.Dev, err error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "", dev, fmt.Errorf("stat %s: %w", dir, err)
	}
	num := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	if name, err = host.ResolveDisk(host.Roots{Sys: sys}, num); err != nil {
		return "", dev, fmt.Errorf("%s is on device %s: %w: want a file system on a disk", dir, num, err)
	}
	b, err := os.ReadFile(filepath.Join(sys, "block", name, "dev"))
	if err != nil {
		return "", dev, err
	}
	if dev, err = cgroupfs.ParseDev(strings.TrimSpace(string(b))); err != nil {
		return "", dev, err
	}
	if _, err := os.Stat(filepath.Join(sys, "block", name, "queue", "scheduler")); err != nil {
		return "", dev, fmt.Errorf("%s (under %s) has no I/O queue: %w", name, dir, err)
	}
	return name, dev, nil
}

// WriteFile writes a file of size bytes of non-zero data at name in the
// volume, flushes it to the device and drops it from the page cache, so
// the first read of it is cold.
func (v *Volume) WriteFile(ctx context.Context, name string, size int64) (string, error) {
	p := filepath.Join(v.Mount, filepath.Clean("/"+name))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	defer f.Close()
	chunk := make([]byte, 4<<20)
	for i := range chunk {
		chunk[i] = byte(i*7 + 1)
	}
	for left := size; left > 0; {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n := min(left, int64(len(chunk)))
		if _, err := f.Write(chunk[:n]); err != nil {
			return "", fmt.Errorf("write %s: %w", p, err)
		}
		left -= n
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("fsync %s: %w", p, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return "", fmt.Errorf("drop cache of %s: %w", p, err)
	}
	return p, f.Close()
}

func (v *Volume) schedulerPath() string {
	return filepath.Join(v.sys, "block", v.Name, "queue", "scheduler")
}

// Scheduler returns the device's active scheduler and the ones it offers.
func (v *Volume) Scheduler() (active string, offered []string, err error) {
	b, err := os.ReadFile(v.schedulerPath())
	if err != nil {
		return "", nil, err
	}
	for _, f := range strings.Fields(string(b)) {
		if strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]") {
			f = strings.Trim(f, "[]")
			active = f
		}
		offered = append(offered, f)
	}
	return active, offered, nil
}

// SetScheduler selects the I/O scheduler of the volume's own loop device;
// Close puts the default back.
func (v *Volume) SetScheduler(s string) error {
	cur, offered, err := v.Scheduler()
	if err != nil {
		return err
	}
	if cur == s {
		return nil
	}
	if !strings.HasPrefix(v.Name, "loop") {
		return fmt.Errorf("refusing to change the scheduler of %s from %s to %s: not a loop device", v.Name, cur, s)
	}
	found := false
	for _, o := range offered {
		found = found || o == s
	}
	if !found {
		return fmt.Errorf("scheduler %q not offered by %s (%v)", s, v.Name, offered)
	}
	if err := os.WriteFile(v.schedulerPath(), []byte(s), 0); err != nil {
		return fmt.Errorf("set scheduler %s on %s: %w", s, v.Name, err)
	}
	return nil
}

// Close unmounts, restores the scheduler, detaches the loop device and
// removes the directory. It is safe to call more than once.
func (v *Volume) Close() error {
	var errs []error
	if v.mounted {
		if err := unix.Unmount(v.Mount, 0); err != nil {
			// Busy (a container still holds it): detach it lazily so the
			// loop device goes when the last user does.
			if err2 := unix.Unmount(v.Mount, unix.MNT_DETACH); err2 != nil {
				errs = append(errs, fmt.Errorf("unmount %s: %w", v.Mount, err))
			}
		}
		v.mounted = false
	}
	if v.loop != nil {
		if v.DefaultScheduler != "" {
			if cur, _, err := v.Scheduler(); err == nil && cur != v.DefaultScheduler {
				if err := os.WriteFile(v.schedulerPath(), []byte(v.DefaultScheduler), 0); err != nil {
					errs = append(errs, fmt.Errorf("restore scheduler of %s: %w", v.Name, err))
				}
			}
		}
		if err := v.loop.Detach(); err != nil {
			errs = append(errs, err)
		}
		v.loop = nil
	}
	if v.dir != "" {
		if err := os.RemoveAll(v.dir); err != nil {
			errs = append(errs, err)
		}
		v.dir = ""
	}
	return errors.Join(errs...)
}

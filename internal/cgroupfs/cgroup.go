package cgroupfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Cgroup is an open cgroup of the I/O hierarchy. It keeps the descriptors of
// its counter files open and re-reads them with pread, several times cheaper
// than open/read/close (figures: BenchmarkRealV1ReadIO and the README), which is
// what lets one daemon poll 10,000 cgroups.
//
// It holds raw descriptors, not *os.File, and builds its paths only when it
// opens a file or names one in an error: a daemon keeps one Cgroup per
// workload, and at 10,000 workloads the files, their names and a read buffer
// each were ~10 MiB of live heap (scale.md). Close it when its cgroup goes
// away: nothing closes the descriptors for it, and they pin the kernel's
// objects.
//
// A Cgroup is not safe for concurrent use; different Cgroups are.
type Cgroup struct {
	h   Hierarchy
	rel string // clean, with a leading slash

	// files names the counter files (an entry of v1StatFiles, or v2's
	// io.stat and io.pressure).
	files *[2]string
	// The byte counters' descriptor (v2: io.stat; v1: the bytes rwstat
	// file), always open; the detail file's (v1: the serviced counts, v2:
	// io.pressure), -1 while not kept (CloseDetail: then it is opened for
	// each read that needs it).
	statFD, detailFD int32
	// hasDetail: the detail file exists and is read (v1: not BytesOnly;
	// v2: io.pressure exists, PSI on).
	hasDetail bool
	validDevs bool // devs and last hold the previous read
	// iosStale: devs holds bytes newer than its serviced counts (v1: a
	// ReadBytes saw the bytes move and did not read the serviced file).
	iosStale bool
	sinceIOs uint8 // v1 reads since the serviced file was last read

	devs []DeviceIO
	// last is the primary file's content at the previous read: when it
	// has not changed, neither have the counters, and ReadIO returns the
	// previous ones without parsing (v1: without reading the serviced
	// file either, see detailEvery). It is also what devs was parsed
	// from; reads go through a pooled buffer (readBufs).
	last []byte
}

// detailEvery bounds how many reads the v1 serviced counts may be reused
// while the byte counters stand still (an I/O without bytes, a flush, moves
// only the serviced counts): they are re-read at least every detailEvery
// reads.
const detailEvery = 16

// v1 counter files, in order of preference. The throttle files count on every
// kernel that has blk-throttle; the bfq.* ones read "Total 0" on kernels built
// without BFQ debug statistics, so they are the last resort.
var v1StatFiles = [][2]string{
	{"blkio.throttle.io_service_bytes_recursive", "blkio.throttle.io_serviced_recursive"},
	{"blkio.throttle.io_service_bytes", "blkio.throttle.io_serviced"},
	{"blkio.bfq.io_service_bytes_recursive", "blkio.bfq.io_serviced_recursive"},
}

var v2Files = [2]string{"io.stat", "io.pressure"}

// Open opens the cgroup rel of the hierarchy for reading its counters. It
// returns an error wrapping ErrCgroupGone when the directory does not exist,
// and ErrNotAvailable when no I/O counter file exists in it.
func (h Hierarchy) Open(rel string) (*Cgroup, error) {
	dir, err := h.Path(rel)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open cgroup %s: %w", dir, ErrCgroupGone)
		}
		return nil, fmt.Errorf("open cgroup %s: %w", dir, err)
	}
	c := &Cgroup{h: h, rel: cleanRel(rel), statFD: -1, detailFD: -1}
	switch h.Version {
	case 2:
		c.files = &v2Files
		fd, err := c.openOptional(dir, v2Files[0])
		if err != nil {
			return nil, err
		}
		if fd < 0 {
			return nil, fmt.Errorf("open cgroup %s: io.stat: %w (is the io controller enabled in the parent's cgroup.subtree_control?)", dir, ErrNotAvailable)
		}
		c.statFD = fd
		if fd, err = c.openOptional(dir, v2Files[1]); err != nil {
			if !errors.Is(pressureErr(dir, err), ErrNotAvailable) {
				c.Close()
				return nil, err
			}
			fd = -1
		}
		c.detailFD, c.hasDetail = fd, fd >= 0
	case 1:
		for i := range v1StatFiles {
			fd, err := c.openOptional(dir, v1StatFiles[i][0])
			if err != nil {
				return nil, err
			}
			if fd < 0 {
				continue
			}
			c.files, c.statFD = &v1StatFiles[i], fd
			if fd, err = c.openOptional(dir, v1StatFiles[i][1]); err != nil {
				c.Close()
				return nil, err
			}
			// A missing serviced file is opened (and found missing) at
			// each read that wants it, as before: the bytes still count.
			c.detailFD, c.hasDetail = fd, true
			break
		}
		if c.statFD < 0 {
			return nil, fmt.Errorf("open cgroup %s: no blkio counter file: %w", dir, ErrNotAvailable)
		}
	default:
		return nil, fmt.Errorf("open cgroup %s: unknown cgroup version %d", dir, h.Version)
	}
	return c, nil
}

// cleanRel is rel as a clean path with a leading slash, rel itself (no
// copy) when it is one already.
func cleanRel(rel string) string {
	if len(rel) > 0 && rel[0] == '/' {
		if c := filepath.Clean(rel); c == rel {
			return rel
		}
	}
	return filepath.Clean("/" + rel)
}

// KeptFiles is how many descriptors the cgroup holds open.
func (c *Cgroup) KeptFiles() int {
	n := 0
	if c.statFD >= 0 {
		n++
	}
	if c.detailFD >= 0 {
		n++
	}
	return n
}

// CloseDetail closes the descriptor of the detail file (v1 the serviced
// counts, v2 io.pressure), leaving one kept descriptor, the byte counters.
// The detail file is then opened for each read that needs it. The daemon
// does this when the open-file budget is short and for quiet workloads.
func (c *Cgroup) CloseDetail() error {
	if c.detailFD < 0 {
		return nil
	}
	err := syscall.Close(int(c.detailFD))
	c.detailFD = -1
	if err != nil {
		return fmt.Errorf("close %s: %w", c.path(c.files[1]), err)
	}
	return nil
}

// KeepDetail opens the detail file again and keeps it (undoes
// CloseDetail). A cgroup without one is no error.
func (c *Cgroup) KeepDetail() error {
	if c.detailFD >= 0 || !c.hasDetail || c.statFD < 0 {
		return nil
	}
	fd, err := c.openOptional(c.Dir(), c.files[1])
	if err != nil {
		return err
	}
	c.detailFD = fd
	return nil
}

// BytesOnly makes the cgroup read its byte counters and nothing else: the
// detail files (v1 the serviced counts, v2 io.pressure) are closed and
// never read again, so ReadIO is one pread. The throttle's fast loop reads
// its cgroups hundreds of times a second and needs only their bytes;
// ReadIO's serviced counts then stay zero.
func (c *Cgroup) BytesOnly() error {
	err := c.CloseDetail()
	c.hasDetail = false
	return err
}

// DetailKept reports whether the detail file's descriptor is kept.
func (c *Cgroup) DetailKept() bool { return c.detailFD >= 0 || !c.hasDetail }

// HasPressure reports whether the cgroup has an io.pressure file (v2 with
// PSI on); ReadPressure fails with ErrNotAvailable when it does not.
func (c *Cgroup) HasPressure() bool { return c.h.Version == 2 && c.hasDetail }

// openOptional opens the file name of the cgroup's directory dir; -1 and
// no error when it does not exist.
func (c *Cgroup) openOptional(dir, name string) (int32, error) {
	p := filepath.Join(dir, name)
	fd, err := openRead(p)
	if err == nil {
		return int32(fd), nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil && errors.Is(serr, fs.ErrNotExist) {
			return -1, fmt.Errorf("open %s: %w", p, ErrCgroupGone)
		}
		return -1, nil
	}
	return -1, fmt.Errorf("open %s: %w", p, err)
}

// openRead opens path read-only with a raw system call: no *os.File, no
// runtime poller registration (kernfs files are not pollable: os.Open
// would try and fail, one epoll_ctl per open).
func openRead(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// Rel returns the cgroup's path relative to the hierarchy mount.
func (c *Cgroup) Rel() string { return c.rel }

// Dir returns the cgroup's directory.
func (c *Cgroup) Dir() string { return filepath.Join(c.h.Mount, c.rel) }

// path is the path of the cgroup's file name (for errors).
func (c *Cgroup) path(name string) string { return filepath.Join(c.h.Mount, c.rel, name) }

// Hierarchy returns the hierarchy the cgroup belongs to.
func (c *Cgroup) Hierarchy() Hierarchy { return c.h }

// StatFile names the counter file the cgroup is read from.
func (c *Cgroup) StatFile() string {
	if c.files == nil {
		return ""
	}
	return c.files[0]
}

// Close releases the kept descriptors.
func (c *Cgroup) Close() error {
	var errs []error
	for _, fd := range []*int32{&c.statFD, &c.detailFD} {
		if *fd >= 0 {
			if err := syscall.Close(int(*fd)); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", c.Dir(), err))
			}
			*fd = -1
		}
	}
	return errors.Join(errs...)
}

// readBufs are the read buffers of every Cgroup: one per read in flight
// (the daemon's loop and the throttle's fast loops read at the same time),
// not one per cgroup.
var readBufs = sync.Pool{New: func() any { b := make([]byte, initialBuf); return &b }}

// initialBuf is the pooled read buffer's size: a v1 rwstat file is ~13
// lines per device (~330 bytes), io.stat one line per device.
const initialBuf = 4096

// preadFD reads the whole of the file open as fd from offset 0 into *bp,
// growing it as needed; name is the file's name in the cgroup (for
// errors). cgroupfs files are produced whole at each read from offset 0,
// so a read shorter than the buffer is all of it: one pread(2) per file.
func (c *Cgroup) preadFD(fd int32, bp *[]byte, name string) ([]byte, error) {
	for {
		n, err := syscall.Pread(int(fd), *bp, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			if isGone(err) {
				return nil, fmt.Errorf("read %s: %w", c.path(name), ErrCgroupGone)
			}
			return nil, fmt.Errorf("read %s: %w", c.path(name), err)
		}
		if n < len(*bp) {
			return (*bp)[:n], nil
		}
		// Full: grow and read the whole file again from 0, so the result
		// is one consistent generation of it.
		*bp = make([]byte, max(2*len(*bp), initialBuf))
	}
}

// readDetail reads the detail file through its kept descriptor, else
// opens, reads and closes it. ok is false when the file does not exist.
func (c *Cgroup) readDetail(bp *[]byte) (data []byte, ok bool, err error) {
	name := c.files[1]
	if c.detailFD >= 0 {
		data, err = c.preadFD(c.detailFD, bp, name)
		return data, err == nil, err
	}
	p := c.path(name)
	fd, err := openRead(p)
	if err != nil {
		if isGone(err) {
			if _, serr := os.Stat(c.Dir()); serr != nil && errors.Is(serr, fs.ErrNotExist) {
				return nil, false, fmt.Errorf("open %s: %w", p, ErrCgroupGone)
			}
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("open %s: %w", p, err)
	}
	defer syscall.Close(fd)
	data, err = c.preadFD(int32(fd), bp, name)
	return data, err == nil, err
}

// isGone reports whether err from a kept cgroup file means the cgroup was
// removed: kernfs answers ENODEV for reads of a deleted node.
func isGone(err error) bool {
	return errors.Is(err, syscall.ENODEV) || errors.Is(err, fs.ErrNotExist)
}

// ReadIO returns the cgroup's I/O counters per device. The returned slice is
// reused by the next call; copy what must outlive it.
//
// When the byte counters' file reads exactly as at the previous call, the
// previous counters are returned without parsing; on v1 the serviced
// counts are then re-read only every detailEvery calls.
func (c *Cgroup) ReadIO() (IOStat, error) { return c.read(true) }

// ReadBytes is ReadIO without the v1 serviced counts when the bytes moved:
// one pread. The I/O counts it returns are those of the last read that
// read them, and IOStat.StaleIOs says so; a device that appeared since
// has none yet. On v2 (io.stat holds both) it is ReadIO.
func (c *Cgroup) ReadBytes() (IOStat, error) { return c.read(c.h.Version == 2) }

func (c *Cgroup) read(ios bool) (IOStat, error) {
	if c.statFD < 0 {
		return IOStat{}, fmt.Errorf("read cgroup %s: closed", c.Dir())
	}
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	data, err := c.preadFD(c.statFD, bp, c.files[0])
	if err != nil {
		return IOStat{}, err
	}
	same := c.validDevs && bytes.Equal(data, c.last)
	if !same {
		c.last = append(c.last[:0], data...)
	}
	data = c.last       // bp is reused below
	c.validDevs = false // until this read has parsed everything
	switch c.h.Version {
	case 2:
		if !same {
			c.devs, err = ParseIOStat(data, c.devs[:0])
			if err != nil {
				return IOStat{}, fmt.Errorf("%s: %w", c.path(c.files[0]), err)
			}
		}
	default:
		switch {
		case same && (!ios || !c.hasDetail || !c.iosStale && c.sinceIOs < detailEvery-1):
			// Nothing moved; the serviced counts are as fresh as before
			// (a flush moves them alone: re-read every detailEvery).
			if ios && c.hasDetail {
				c.sinceIOs++
			}
		case !ios || !c.hasDetail:
			// The bytes moved: parse them over the previous counters,
			// whose serviced counts stay (stale, if there is a file).
			for i := range c.devs {
				c.devs[i].RBytes, c.devs[i].WBytes, c.devs[i].DBytes = 0, 0, 0
			}
			c.devs, err = ParseBlkioRWStat(data, c.files[0], false, c.devs)
			if err != nil {
				return IOStat{}, fmt.Errorf("%s: %w", c.path(c.files[0]), err)
			}
			c.iosStale = c.hasDetail
		default:
			c.devs, err = ParseBlkioRWStat(data, c.files[0], false, c.devs[:0])
			if err != nil {
				return IOStat{}, fmt.Errorf("%s: %w", c.path(c.files[0]), err)
			}
			d, ok, err := c.readDetail(bp)
			if err != nil {
				return IOStat{}, err
			}
			if ok {
				c.devs, err = ParseBlkioRWStat(d, c.files[1], true, c.devs)
				if err != nil {
					return IOStat{}, fmt.Errorf("%s: %w", c.path(c.files[1]), err)
				}
			}
			c.sinceIOs, c.iosStale = 0, false
		}
	}
	c.validDevs = true
	return IOStat{Devices: c.devs, StaleIOs: c.iosStale}, nil
}

// ReadPressure returns the cgroup's I/O pressure (v2 io.pressure). It
// returns ErrNotAvailable on v1, where cgroups have no PSI files, and when
// PSI is disabled.
func (c *Cgroup) ReadPressure() (Pressure, error) {
	if !c.HasPressure() {
		return Pressure{}, fmt.Errorf("io.pressure of %s: %w", c.Dir(), ErrNotAvailable)
	}
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	data, ok, err := c.readDetail(bp)
	if err != nil {
		return Pressure{}, pressureErr(c.Dir(), err)
	}
	if !ok {
		return Pressure{}, fmt.Errorf("io.pressure of %s: %w", c.Dir(), ErrNotAvailable)
	}
	p, err := ParsePressure(data)
	if err != nil {
		return Pressure{}, fmt.Errorf("%s: %w", c.path("io.pressure"), err)
	}
	return p, nil
}

// ReadHostPressure reads a system-wide PSI file such as /proc/pressure/io.
// A missing file (PSI not built or disabled with psi=0) is ErrNotAvailable.
func ReadHostPressure(path string) (Pressure, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Pressure{}, fmt.Errorf("%s: %w", path, ErrNotAvailable)
		}
		return Pressure{}, pressureErr("", fmt.Errorf("read %s: %w", path, err))
	}
	p, err := ParsePressure(data)
	if err != nil {
		return Pressure{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// HostPressureFile is a host PSI file (/proc/pressure/io) kept open
// (KeptFile), for a reading every tick.
type HostPressureFile struct{ f *KeptFile }

// OpenHostPressure opens path for repeated reads; its errors are
// ReadHostPressure's.
func OpenHostPressure(path string) (*HostPressureFile, error) {
	f, err := OpenKept(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", path, ErrNotAvailable)
		}
		return nil, pressureErr("", err)
	}
	return &HostPressureFile{f}, nil
}

// Read reads and parses the file again.
func (h *HostPressureFile) Read() (Pressure, error) {
	data, err := h.f.Read()
	if err != nil {
		return Pressure{}, pressureErr("", err)
	}
	p, err := ParsePressure(data)
	if err != nil {
		return Pressure{}, fmt.Errorf("%s: %w", h.f.Path(), err)
	}
	return p, nil
}

// Close releases the descriptor.
func (h *HostPressureFile) Close() error { return h.f.Close() }

// pressureErr maps an error from opening or reading a PSI file to
// ErrNotAvailable where it means "PSI is off", not a failure:
//   - ENOTSUP/EOPNOTSUPP (the same number on Linux): the kernel refuses PSI
//     reads when PSI was disabled at boot (psi=0) while the files exist;
//   - ErrCgroupGone while the cgroup directory dir still exists: kernfs
//     answers ENODEV on a kept descriptor of a file it has since hidden
//     (cgroup.pressure set to 0), which is not the cgroup going away.
//
// Other errors are returned unchanged.
func pressureErr(dir string, err error) error {
	if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) {
		return fmt.Errorf("%w (%w)", err, ErrNotAvailable)
	}
	if dir != "" && errors.Is(err, ErrCgroupGone) {
		if st, serr := os.Stat(dir); serr == nil && st.IsDir() {
			return fmt.Errorf("io.pressure of %s: file gone while the cgroup stays: %w", dir, ErrNotAvailable)
		}
	}
	return err
}

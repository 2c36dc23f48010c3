package cgroupfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Cgroup is an open cgroup of the I/O hierarchy. It keeps the descriptors of
// its counter files open and re-reads them with pread, several times cheaper
// than open/read/close (figures: BenchmarkRealV1ReadIO and the README), which is
// what lets one daemon poll 10,000 cgroups.
//
// A Cgroup is not safe for concurrent use. Close it when its cgroup goes
// away: the kept descriptors otherwise pin the kernel's objects.
type Cgroup struct {
	h   Hierarchy
	rel string
	dir string

	// v2: io.stat. v1: bytes and serviced rwstat files.
	stat     *os.File
	statName string
	statFD   int
	// The detail file: v1 the serviced counts, v2 io.pressure. Kept open
	// unless CloseDetail dropped it; then opened for each read of it.
	ios      *os.File
	iosName  string
	pressure *os.File // v2 io.pressure; nil when PSI is off or dropped
	hasPSI   bool     // v2: io.pressure exists
	// Their raw descriptors, taken once: (*os.File).Fd costs an fcntl
	// each call.
	iosFD, pressureFD int

	buf  []byte
	devs []DeviceIO
	// last is the primary file's content at the previous read: when it
	// has not changed, neither have the counters, and ReadIO returns the
	// previous ones without parsing (v1: without reading the serviced
	// file either, see detailEvery).
	last      []byte
	sinceIOs  int // v1 reads since the serviced file was last read
	validDevs bool
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
	// A small buffer, grown on demand: an idle cgroup's counter file is a
	// few dozen bytes, and 10,000 kept 4 KiB buffers would be 40 MiB.
	c := &Cgroup{h: h, rel: filepath.Clean("/" + rel), dir: dir, buf: make([]byte, initialBuf)}
	switch h.Version {
	case 2:
		if c.stat, err = c.openOptional("io.stat"); err != nil {
			return nil, err
		}
		if c.stat == nil {
			return nil, fmt.Errorf("open cgroup %s: io.stat: %w (is the io controller enabled in the parent's cgroup.subtree_control?)", dir, ErrNotAvailable)
		}
		c.statName = "io.stat"
		if c.pressure, err = c.openOptional("io.pressure"); err != nil {
			if !errors.Is(pressureErr(dir, err), ErrNotAvailable) {
				c.Close()
				return nil, err
			}
			c.pressure = nil
		}
		c.hasPSI = c.pressure != nil
	case 1:
		for _, pair := range v1StatFiles {
			if c.stat, err = c.openOptional(pair[0]); err != nil {
				return nil, err
			}
			if c.stat == nil {
				continue
			}
			c.statName = pair[0]
			if c.ios, err = c.openOptional(pair[1]); err != nil {
				c.Close()
				return nil, err
			}
			c.iosName = pair[1]
			break
		}
		if c.stat == nil {
			return nil, fmt.Errorf("open cgroup %s: no blkio counter file: %w", dir, ErrNotAvailable)
		}
	default:
		return nil, fmt.Errorf("open cgroup %s: unknown cgroup version %d", dir, h.Version)
	}
	// Read through the raw descriptors: one pread(2) per file and read, no
	// runtime poller bookkeeping. The *os.File keeps ownership (Close).
	c.statFD = int(c.stat.Fd())
	c.takeFDs()
	return c, nil
}

// KeptFiles is how many descriptors the cgroup holds open.
func (c *Cgroup) KeptFiles() int {
	n := 0
	for _, f := range []*os.File{c.stat, c.ios, c.pressure} {
		if f != nil {
			n++
		}
	}
	return n
}

// CloseDetail closes the descriptor of the detail file (v1 the serviced
// counts, v2 io.pressure), leaving one kept descriptor, the byte counters.
// The detail file is then opened for each read that needs it. The daemon
// does this when the open-file budget is short and for quiet workloads.
func (c *Cgroup) CloseDetail() error {
	var err error
	if c.h.Version == 1 && c.ios != nil {
		err = c.ios.Close()
		c.ios = nil
	}
	if c.pressure != nil {
		err = c.pressure.Close()
		c.pressure = nil
	}
	return err
}

// KeepDetail opens the detail file again and keeps it (undoes
// CloseDetail). A cgroup without one is no error.
func (c *Cgroup) KeepDetail() error {
	var err error
	switch {
	case c.h.Version == 1 && c.ios == nil && c.iosName != "":
		c.ios, err = c.openOptional(c.iosName)
	case c.h.Version == 2 && c.pressure == nil && c.hasPSI:
		c.pressure, err = c.openOptional("io.pressure")
	}
	c.takeFDs()
	return err
}

// takeFDs records the raw descriptors of the kept detail files.
func (c *Cgroup) takeFDs() {
	if c.ios != nil {
		c.iosFD = int(c.ios.Fd())
	}
	if c.pressure != nil {
		c.pressureFD = int(c.pressure.Fd())
	}
}

// BytesOnly makes the cgroup read its byte counters and nothing else: the
// detail files (v1 the serviced counts, v2 io.pressure) are closed and
// never read again, so ReadIO is one pread. The throttle's fast loop reads
// its cgroups hundreds of times a second and needs only their bytes;
// ReadIO's serviced counts then stay zero.
func (c *Cgroup) BytesOnly() error {
	err := c.CloseDetail()
	c.iosName, c.hasPSI = "", false
	return err
}

// DetailKept reports whether the detail file's descriptor is kept.
func (c *Cgroup) DetailKept() bool {
	if c.h.Version == 1 {
		return c.ios != nil || c.iosName == ""
	}
	return c.pressure != nil || !c.hasPSI
}

// HasPressure reports whether the cgroup has an io.pressure file (v2 with
// PSI on); ReadPressure fails with ErrNotAvailable when it does not.
func (c *Cgroup) HasPressure() bool { return c.hasPSI }

// openOptional opens a file of the cgroup; (nil, nil) when it does not exist.
func (c *Cgroup) openOptional(name string) (*os.File, error) {
	f, err := os.Open(filepath.Join(c.dir, name))
	if err == nil {
		return f, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(c.dir); serr != nil && errors.Is(serr, fs.ErrNotExist) {
			return nil, fmt.Errorf("open %s: %w", filepath.Join(c.dir, name), ErrCgroupGone)
		}
		return nil, nil
	}
	return nil, fmt.Errorf("open %s: %w", filepath.Join(c.dir, name), err)
}

// Rel returns the cgroup's path relative to the hierarchy mount.
func (c *Cgroup) Rel() string { return c.rel }

// Dir returns the cgroup's directory.
func (c *Cgroup) Dir() string { return c.dir }

// Hierarchy returns the hierarchy the cgroup belongs to.
func (c *Cgroup) Hierarchy() Hierarchy { return c.h }

// StatFile names the counter file the cgroup is read from.
func (c *Cgroup) StatFile() string { return c.statName }

// Close releases the kept descriptors.
func (c *Cgroup) Close() error {
	var errs []error
	for _, f := range []*os.File{c.stat, c.ios, c.pressure} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	c.stat, c.ios, c.pressure = nil, nil, nil
	return errors.Join(errs...)
}

// pread reads the whole of f from offset 0 into c.buf, growing it as needed.
// cgroupfs files are produced whole at each read from offset 0, so a read
// shorter than the buffer is all of it: one pread(2) per file.
func (c *Cgroup) pread(f *os.File) ([]byte, error) {
	if f == nil {
		return nil, fmt.Errorf("read cgroup %s: closed", c.dir)
	}
	fd := c.statFD
	switch f {
	case c.ios:
		fd = c.iosFD
	case c.pressure:
		fd = c.pressureFD
	}
	return c.preadFD(fd, f.Name())
}

func (c *Cgroup) preadFD(fd int, name string) ([]byte, error) {
	for {
		n, err := syscall.Pread(fd, c.buf, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			if isGone(err) {
				return nil, fmt.Errorf("read %s: %w", name, ErrCgroupGone)
			}
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if n < len(c.buf) {
			return c.buf[:n], nil
		}
		// Full: grow and read the whole file again from 0, so the result
		// is one consistent generation of it.
		c.buf = make([]byte, 2*len(c.buf))
	}
}

// initialBuf is the read buffer a Cgroup starts with.
const initialBuf = 256

// readDetail reads the detail file name through f when kept, else opens,
// reads and closes it. ok is false when the file does not exist.
func (c *Cgroup) readDetail(f *os.File, name string) (data []byte, ok bool, err error) {
	if f != nil {
		data, err = c.pread(f)
		return data, err == nil, err
	}
	p := filepath.Join(c.dir, name)
	fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		if isGone(err) {
			if _, serr := os.Stat(c.dir); serr != nil && errors.Is(serr, fs.ErrNotExist) {
				return nil, false, fmt.Errorf("open %s: %w", p, ErrCgroupGone)
			}
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("open %s: %w", p, err)
	}
	defer syscall.Close(fd)
	data, err = c.preadFD(fd, p)
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
func (c *Cgroup) ReadIO() (IOStat, error) {
	if c.stat == nil {
		return IOStat{}, fmt.Errorf("read cgroup %s: closed", c.dir)
	}
	data, err := c.preadFD(c.statFD, c.stat.Name())
	if err != nil {
		return IOStat{}, err
	}
	same := c.validDevs && bytes.Equal(data, c.last)
	if !same {
		c.last = append(c.last[:0], data...)
	}
	c.validDevs = false // until this read has parsed everything
	switch c.h.Version {
	case 2:
		if !same {
			c.devs, err = ParseIOStat(data, c.devs[:0])
			if err != nil {
				return IOStat{}, fmt.Errorf("%s: %w", c.stat.Name(), err)
			}
		}
	default:
		if same && c.sinceIOs < detailEvery-1 {
			c.sinceIOs++
			break
		}
		c.devs, err = ParseBlkioRWStat(data, c.statName, false, c.devs[:0])
		if err != nil {
			return IOStat{}, fmt.Errorf("%s: %w", c.stat.Name(), err)
		}
		if c.iosName != "" {
			data, ok, err := c.readDetail(c.ios, c.iosName)
			if err != nil {
				return IOStat{}, err
			}
			if ok {
				c.devs, err = ParseBlkioRWStat(data, c.iosName, true, c.devs)
				if err != nil {
					return IOStat{}, fmt.Errorf("%s: %w", filepath.Join(c.dir, c.iosName), err)
				}
			}
		}
		c.sinceIOs = 0
	}
	c.validDevs = true
	return IOStat{Devices: c.devs}, nil
}

// ReadPressure returns the cgroup's I/O pressure (v2 io.pressure). It
// returns ErrNotAvailable on v1, where cgroups have no PSI files, and when
// PSI is disabled.
func (c *Cgroup) ReadPressure() (Pressure, error) {
	if !c.hasPSI {
		return Pressure{}, fmt.Errorf("io.pressure of %s: %w", c.dir, ErrNotAvailable)
	}
	data, ok, err := c.readDetail(c.pressure, "io.pressure")
	if err != nil {
		return Pressure{}, pressureErr(c.dir, err)
	}
	if !ok {
		return Pressure{}, fmt.Errorf("io.pressure of %s: %w", c.dir, ErrNotAvailable)
	}
	// c.buf is shared with ReadIO: the primary's copy is in c.last.
	p, err := ParsePressure(data)
	if err != nil {
		return Pressure{}, fmt.Errorf("%s: %w", filepath.Join(c.dir, "io.pressure"), err)
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

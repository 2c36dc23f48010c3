package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Weight is an I/O weight on the one scale ddiskqos uses everywhere: Docker's
// --blkio-weight scale, 10 (least) to 1000 (most). Each kernel knob has its
// own range; its mechanism (internal/mech) converts.
type Weight uint16

const (
	MinWeight Weight = 10
	MaxWeight Weight = 1000
)

// Valid reports whether w is within 10..1000.
func (w Weight) Valid() bool { return w >= MinWeight && w <= MaxWeight }

// knobPath joins a knob's file name onto a cgroup directory of h.
func (h Hierarchy) knobPath(rel, file string) (string, error) {
	dir, err := h.Path(rel)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, file), nil
}

// ReadKnob reads the whole of the knob file of the cgroup rel: a missing
// cgroup is ErrCgroupGone, a missing file in an existing cgroup
// ErrNotAvailable. The mechanisms (internal/mech) own their files'
// names and formats; this and WriteKnob are their access.
func (h Hierarchy) ReadKnob(rel, file string) ([]byte, error) {
	path, err := h.knobPath(rel, file)
	if err != nil {
		return nil, err
	}
	return readKnob(path)
}

// WriteKnob writes line into the knob file of the cgroup rel, in one
// write(2) (see ReadKnob for the errors).
func (h Hierarchy) WriteKnob(rel, file, line string) error {
	path, err := h.knobPath(rel, file)
	if err != nil {
		return err
	}
	return writeKnob(path, line)
}

// readParsed reads the knob file path (see readKnob) and parses it; a
// parse error names the path. parse must not keep the bytes it is given
// (they are a pooled buffer's).
func readParsed[T any](path string, parse func([]byte) (T, error)) (T, error) {
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	data, err := readKnobInto(path, bp)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := parse(data)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// readKnob reads the whole of the knob file path into a buffer of its own
// (the caller keeps it).
func readKnob(path string) ([]byte, error) {
	buf := make([]byte, 512)
	data, err := readKnobInto(path, &buf)
	if err != nil {
		return nil, err
	}
	return data[:len(data):len(data)], nil
}

// readKnobInto reads the whole of the knob file path into *bp (grown as
// needed) with raw system calls: open, read to the end, close. os.Open
// registers a kernfs file with the runtime's poller and os.ReadAll
// allocates its buffer: two epoll_ctl and an allocation per knob read, and
// the actuator and the throttle read and write knobs in their loops.
func readKnobInto(path string, bp *[]byte) ([]byte, error) {
	fd, err := openRead(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(filepath.Dir(path)); serr != nil {
				return nil, fmt.Errorf("read %s: %w", path, ErrCgroupGone)
			}
			return nil, fmt.Errorf("read %s: %w", path, ErrNotAvailable)
		}
		return nil, fmt.Errorf("read %s: %w", path, &fs.PathError{Op: "open", Path: path, Err: err})
	}
	defer syscall.Close(fd)
	return readOpenKnob(fd, path, bp)
}

// readOpenKnob reads the whole of a knob file open as fd (from its current
// offset to the end) into *bp. A cgroup removed between the open and the
// read answers ENODEV (kernfs): that is ErrCgroupGone, as a removal before
// the open is (it was an actuator error, one "apply levels" WARN each
// under container churn).
func readOpenKnob(fd int, path string, bp *[]byte) ([]byte, error) {
	buf := (*bp)[:0]
	// *bp keeps the whole (maybe grown) buffer for its next user.
	defer func() { *bp = buf[:cap(buf)] }()
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			if isGone(err) {
				return nil, fmt.Errorf("read %s: %w", path, ErrCgroupGone)
			}
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		if n <= 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

func writeKnob(path, line string) error {
	// One write(2) per line: cgroupfs parses each write as one command.
	// Raw system calls, as readKnobInto.
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_WRONLY|syscall.O_TRUNC|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(filepath.Dir(path)); serr != nil {
				return fmt.Errorf("write %q to %s: %w", line, path, ErrCgroupGone)
			}
			return fmt.Errorf("write %q to %s: %w", line, path, ErrNotAvailable)
		}
		return fmt.Errorf("write %q to %s: %w", line, path, &fs.PathError{Op: "open", Path: path, Err: err})
	}
	var werr error
	for {
		_, werr = syscall.Write(fd, []byte(line))
		if werr != syscall.EINTR {
			break
		}
	}
	cerr := syscall.Close(fd)
	if werr != nil {
		if isGone(werr) {
			return fmt.Errorf("write %q to %s: %w", line, path, ErrCgroupGone)
		}
		return fmt.Errorf("write %q to %s: %w", line, path, &fs.PathError{Op: "write", Path: path, Err: werr})
	}
	if cerr != nil {
		return fmt.Errorf("write %q to %s: %w", line, path, cerr)
	}
	return nil
}

// ReadWeights reads the weight file file (blkio.bfq.weight_device,
// io.weight, ...) of the cgroup rel. Which file a mechanism uses, and its
// scale, are the mechanism's (internal/mech).
func (h Hierarchy) ReadWeights(rel, file string) (Weights, error) {
	path, err := h.knobPath(rel, file)
	if err != nil {
		return Weights{}, err
	}
	return readParsed(path, func(b []byte) (Weights, error) { return ParseWeights(b, file) })
}

// SetDeviceWeight writes the weight native, on the file's own scale, for
// device dev into the weight file file of the cgroup rel. Only that device
// is affected.
func (h Hierarchy) SetDeviceWeight(rel, file string, dev Dev, native uint64) error {
	path, err := h.knobPath(rel, file)
	if err != nil {
		return err
	}
	return writeKnob(path, dev.String()+" "+strconv.FormatUint(native, 10))
}

// ResetDeviceWeight removes the per-device weight of cgroup rel on dev in
// the weight file file, so the cgroup's default weight applies again:
// BFQ and iocost take "MAJ:MIN default"; CFQ's blkio.weight_device takes a
// weight of 0.
func (h Hierarchy) ResetDeviceWeight(rel, file string, dev Dev) error {
	path, err := h.knobPath(rel, file)
	if err != nil {
		return err
	}
	body := "default"
	if file == "blkio.weight_device" {
		body = "0"
	}
	return writeKnob(path, dev.String()+" "+body)
}

// v1 throttle files, in Limits field order.
var v1LimitFiles = [4]string{
	"blkio.throttle.read_bps_device",
	"blkio.throttle.write_bps_device",
	"blkio.throttle.read_iops_device",
	"blkio.throttle.write_iops_device",
}

// ReadLimits returns the throttling limits of cgroup rel on dev (zero:
// unlimited).
func (h Hierarchy) ReadLimits(rel string, dev Dev) (Limits, error) {
	var l Limits
	if h.Version == 2 {
		path, err := h.knobPath(rel, "io.max")
		if err != nil {
			return l, err
		}
		m, err := readParsed(path, ParseIOMax)
		if err != nil {
			return l, err
		}
		return m[dev], nil
	}
	fields := [4]*uint64{&l.RBps, &l.WBps, &l.RIOps, &l.WIOps}
	for i, file := range v1LimitFiles {
		path, err := h.knobPath(rel, file)
		if err != nil {
			return l, err
		}
		vals, err := readParsed(path, func(b []byte) ([]DeviceValue, error) { return ParseDeviceValues(b, file) })
		if err != nil {
			return l, err
		}
		for _, dv := range vals {
			if dv.Dev == dev {
				*fields[i] = dv.Value
			}
		}
	}
	return l, nil
}

// SetLimits sets all four throttling limits of cgroup rel on dev; a zero
// field removes that limit. On v2 this is one io.max line; on v1 it writes
// only the files whose value differs from what is there.
func (h Hierarchy) SetLimits(rel string, dev Dev, l Limits) error {
	if h.Version == 2 {
		path, err := h.knobPath(rel, "io.max")
		if err != nil {
			return err
		}
		return writeKnob(path, dev.String()+" "+l.Keys())
	}
	cur, err := h.ReadLimits(rel, dev)
	if err != nil {
		return err
	}
	want := [4]uint64{l.RBps, l.WBps, l.RIOps, l.WIOps}
	have := [4]uint64{cur.RBps, cur.WBps, cur.RIOps, cur.WIOps}
	var errs []string
	for i, file := range v1LimitFiles {
		if want[i] == have[i] {
			continue
		}
		path, err := h.knobPath(rel, file)
		if err != nil {
			return err
		}
		// "MAJ:MIN 0" removes the rule.
		if err := writeKnob(path, dev.String()+" "+strconv.FormatUint(want[i], 10)); err != nil {
			if errors.Is(err, ErrCgroupGone) {
				return err
			}
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// EnableV1Accounting makes the v1 blkio counters count on dev. Since Linux
// 6.9 blk-throttle sets itself up on a disk only when a limit is first
// configured for it, and until then blkio.throttle.io_service_bytes of every
// cgroup reads zero for that disk — the only v1 byte counters that work on
// kernels without BFQ debug statistics. Writing the no-op rule "MAJ:MIN 0"
// (0 = no limit) into the root cgroup's read_bps_device sets it up without
// limiting anything. A root rule already in place is left alone. The setup
// lasts as long as the disk and cannot be undone; it costs a lookup per I/O.
// On v2 (io.stat always counts) it does nothing. A device removed since it
// was listed is ErrDeviceGone.
func (h Hierarchy) EnableV1Accounting(dev Dev) error {
	if h.Version != 1 {
		return nil
	}
	path, err := h.knobPath("/", v1LimitFiles[0])
	if err != nil {
		return err
	}
	vals, err := readParsed(path, func(b []byte) ([]DeviceValue, error) { return ParseDeviceValues(b, v1LimitFiles[0]) })
	if err != nil {
		return err
	}
	for _, dv := range vals {
		if dv.Dev == dev {
			return nil
		}
	}
	line := dev.String() + " 0"
	err = writeKnob(path, line)
	if errors.Is(err, ErrCgroupGone) {
		// The root cgroup never goes: its ENODEV is the kernel's "no such
		// disk" (blkg_conf_prep).
		return fmt.Errorf("write %q to %s: %w", line, path, ErrDeviceGone)
	}
	return err
}

package calibrate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Roots are where a device is looked up; tests point them at a tree.
type Roots struct {
	Sys       string // sysfs, normally /sys
	Dev       string // device nodes, normally /dev
	Mountinfo string // normally /proc/self/mountinfo
}

// DefaultRoots are the host's own.
func DefaultRoots() Roots {
	return Roots{Sys: "/sys", Dev: "/dev", Mountinfo: "/proc/self/mountinfo"}
}

// Device is a whole disk to calibrate.
type Device struct {
	Name       string       // e.g. "vda", "nullb0"
	Path       string       // its node, e.g. /dev/vda
	Dev        cgroupfs.Dev // MAJ:MIN, the key of io.cost.*
	Partitions []string     // names
	partDevs   []cgroupfs.Dev
}

// ErrNoDevice means the argument names no block device.
var ErrNoDevice = errors.New("no such block device")

// ErrPartition means the argument is a partition: iocost works per disk.
var ErrPartition = errors.New("is a partition")

// Resolve finds the whole disk arg names: a name ("vda") or a node
// ("/dev/vda"). A partition or anything that is not a block device is an
// error that names arg.
func Resolve(r Roots, arg string) (Device, error) {
	name := arg
	if strings.Contains(arg, "/") {
		real, err := filepath.EvalSymlinks(arg)
		if err != nil {
			return Device{}, fmt.Errorf("device %q: %w", arg, ErrNoDevice)
		}
		st, err := os.Stat(real)
		if err != nil || st.Mode()&fs.ModeDevice == 0 || st.Mode()&fs.ModeCharDevice != 0 {
			return Device{}, fmt.Errorf("device %q: %w (not a block device node)", arg, ErrNoDevice)
		}
		name = filepath.Base(real)
	}
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, 0) {
		return Device{}, fmt.Errorf("device %q: %w", arg, ErrNoDevice)
	}
	cls := filepath.Join(r.Sys, "class", "block", name)
	if _, err := os.Stat(cls); err != nil {
		return Device{}, fmt.Errorf("device %q: %w (no %s)", arg, ErrNoDevice, cls)
	}
	if _, err := os.Stat(filepath.Join(cls, "partition")); err == nil {
		disk := "its disk"
		if real, err := filepath.EvalSymlinks(cls); err == nil {
			disk = filepath.Join(r.Dev, filepath.Base(filepath.Dir(real)))
		}
		return Device{}, fmt.Errorf("device %q %w: iocost's model is per disk; calibrate %s", arg, ErrPartition, disk)
	}
	dev, err := readDev(filepath.Join(cls, "dev"))
	if err != nil {
		return Device{}, fmt.Errorf("device %q: %w", arg, err)
	}
	d := Device{Name: name, Path: filepath.Join(r.Dev, name), Dev: dev}
	ents, err := os.ReadDir(filepath.Join(r.Sys, "block", name))
	if err != nil {
		return Device{}, fmt.Errorf("device %q: %w", arg, err)
	}
	for _, e := range ents {
		pdir := filepath.Join(r.Sys, "block", name, e.Name())
		if _, err := os.Stat(filepath.Join(pdir, "partition")); err != nil {
			continue
		}
		pdev, err := readDev(filepath.Join(pdir, "dev"))
		if err != nil {
			return Device{}, fmt.Errorf("device %q: partition %s: %w", arg, e.Name(), err)
		}
		d.Partitions = append(d.Partitions, e.Name())
		d.partDevs = append(d.partDevs, pdev)
	}
	return d, nil
}

func readDev(p string) (cgroupfs.Dev, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return cgroupfs.Dev{}, err
	}
	d, err := cgroupfs.ParseDev(strings.TrimSpace(string(b)))
	if err != nil {
		return cgroupfs.Dev{}, fmt.Errorf("%s: %w", p, err)
	}
	return d, nil
}

// InUse lists why d looks in use, empty when it does not: a mount of it
// or of a partition (mountinfo), a holder (device-mapper, md, bcache on
// it: sysfs holders/), partitions at all (a partition table means data),
// and an exclusive opener the kernel knows of (a mount, swap, a holder: an
// O_EXCL open fails with EBUSY). Calibration writes over the whole device.
func InUse(r Roots, d Device) ([]string, error) {
	var why []string
	mounts, err := cgroupfs.ReadMounts(r.Mountinfo)
	if err != nil {
		return nil, err
	}
	all := append([]cgroupfs.Dev{d.Dev}, d.partDevs...)
	for _, m := range mounts {
		for _, dv := range all {
			if m.Dev == dv {
				why = append(why, fmt.Sprintf("%s (%s) is mounted at %s", m.Source, dv, m.Mountpoint))
			}
		}
	}
	for _, n := range append([]string{""}, d.Partitions...) {
		dir := filepath.Join(r.Sys, "block", d.Name, n, "holders")
		hs, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		for _, h := range hs {
			owner := d.Name
			if n != "" {
				owner = n
			}
			why = append(why, fmt.Sprintf("%s is held by %s (%s)", owner, h.Name(), dir))
		}
	}
	if len(d.Partitions) > 0 {
		why = append(why, fmt.Sprintf("%s has partitions (%s): it holds data that calibration would overwrite", d.Name, strings.Join(d.Partitions, ", ")))
	}
	if len(why) == 0 {
		f, err := os.OpenFile(d.Path, os.O_RDONLY|unix.O_EXCL, 0)
		switch {
		case errors.Is(err, unix.EBUSY):
			why = append(why, fmt.Sprintf("%s is opened exclusively by someone (open O_EXCL: device busy)", d.Path))
		case err != nil:
			return nil, fmt.Errorf("open %s: %w", d.Path, err)
		default:
			f.Close()
		}
	}
	return why, nil
}

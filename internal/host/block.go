package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/mech"
)

// Device is one block device (a whole disk: cgroup I/O control works per
// request queue, which partitions share with their disk) and the way its
// I/O can be shaped.
type Device struct {
	Name  string `json:"name"` // e.g. "vda", "loop3", "dm-0"
	Dev   string `json:"dev"`  // "MAJ:MIN", the key of io.stat and *_device files
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
	// Kind is loop, virtio, xen, nvme, scsi, ide, mmc, nbd, cdrom, dm, md,
	// zram, ram or other (from the name).
	Kind       string `json:"kind"`
	Rotational bool   `json:"rotational"`
	SizeBytes  uint64 `json:"size_bytes"`
	// Backing is whether there is anything behind the device: for a loop
	// device an attached file, for any device a size above zero.
	Backing     bool   `json:"backing"`
	BackingFile string `json:"backing_file,omitempty"`
	// Target is whether the daemon should shape I/O on it. Not a target: a
	// device with nothing behind it (unattached loop, empty cdrom) and
	// memory-backed ones (zram, ram), which have no disk time to share.
	Target       bool     `json:"target"`
	TargetReason string   `json:"target_reason,omitempty"`
	Partitions   []string `json:"partitions,omitempty"`
	// Slaves are the disks under a stacked device (dm, md), partitions
	// resolved to their disks.
	Slaves     []string `json:"slaves,omitempty"`
	Scheduler  string   `json:"scheduler"` // "" when the device has no scheduler file
	Schedulers []string `json:"schedulers"`
	// IOCost is whether io.cost.qos has enable=1 for it (cgroup v2 only).
	IOCost bool `json:"iocost"`
	// IOCostCalibrated is whether its io.cost.model was written by someone
	// (ctrl=user) rather than the kernel's defaults for its class.
	IOCostCalibrated bool         `json:"iocost_calibrated,omitempty"`
	Mechanism        Mechanism    `json:"mechanism"`
	WeightsEffective bool         `json:"weights_effective"`
	WeightFile       string       `json:"weight_file,omitempty"`
	WeightDeviceFile string       `json:"weight_device_file,omitempty"`
	Weight           *WeightRange `json:"weight_range,omitempty"`
	Verified         string       `json:"verified,omitempty"`
	Reason           string       `json:"reason"`
	Fix              string       `json:"fix,omitempty"`
	// Also are the mechanisms that run beside Mechanism as configured
	// (the throttle beside a scheduler's weight, level-limit); NotBeside
	// those turned on that cannot run on the device, and why.
	Also      []Mechanism    `json:"also,omitempty"`
	NotBeside []mech.Refusal `json:"not_beside,omitempty"`
}

// Devices lists the block devices of /sys/block sorted by name, each with
// the mechanisms the I/O hierarchy of layout offers on it as p configures
// them. Without any I/O hierarchy the devices are still listed, with
// mechanism "none".
func Devices(r Roots, layout cgroupfs.Layout, p mech.Params) ([]Device, error) {
	h, err := ProbeIOHierarchy(layout)
	if err != nil && !errors.Is(err, cgroupfs.ErrNoIOHierarchy) {
		return nil, err
	}
	return BlockDevices(r, h, p)
}

// BlockDevices is Devices for an already probed hierarchy.
func BlockDevices(r Roots, h IOHierarchy, p mech.Params) ([]Device, error) {
	dir := r.sys("block")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list block devices: %w", err)
	}
	var out []Device
	noBFQ := BuiltWithoutBFQ(r)
	for _, e := range ents { // os.ReadDir sorts by name
		d, ok, err := readDevice(r, e.Name())
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if h.Version == 2 {
			d.IOCost = h.iocostEnabled(d.Major, d.Minor)
			m, ok := cgroupfs.FindCostModel(h.IOCostModel, cgroupfs.Dev{Major: d.Major, Minor: d.Minor})
			d.IOCostCalibrated = ok && m.Ctrl == "user"
		}
		c := mech.Choose(mechEnv(h, d, noBFQ), p)
		d.Mechanism, d.WeightsEffective = c.Mechanism, c.WeightsEffective
		d.WeightFile, d.WeightDeviceFile, d.Weight = c.WeightFile, c.WeightDeviceFile, c.Weight
		d.Verified, d.Reason, d.Fix = c.Verified, c.Reason, c.Fix
		d.Also, d.NotBeside = c.Also, c.NotBeside
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Device) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// readDevice reads /sys/block/<name>. ok is false for a device that vanished
// while being read (a loop device detached) or is hidden (an NVMe
// multipath path: its I/O goes through the visible nvmeXnY).
func readDevice(r Roots, name string) (Device, bool, error) {
	base := r.sys("block", name)
	d := Device{Name: name, Kind: kindOf(name)}
	devText, err := os.ReadFile(filepath.Join(base, "dev"))
	if errors.Is(err, fs.ErrNotExist) {
		return Device{}, false, nil
	}
	if err != nil {
		return Device{}, false, fmt.Errorf("block device %s: %w", name, err)
	}
	d.Dev = strings.TrimSpace(string(devText))
	dev, err := cgroupfs.ParseDev(d.Dev)
	if err != nil {
		return Device{}, false, fmt.Errorf("block device %s: %s/dev: %w", name, base, err)
	}
	d.Major, d.Minor = dev.Major, dev.Minor
	if s, err := readTrim(filepath.Join(base, "hidden")); err == nil && s == "1" {
		return Device{}, false, nil
	}
	if s, err := readTrim(filepath.Join(base, "size")); err == nil {
		sectors, perr := strconv.ParseUint(s, 10, 64)
		if perr != nil {
			return Device{}, false, fmt.Errorf("block device %s: size %q: %w", name, s, perr)
		}
		d.SizeBytes = sectors * 512 // always 512-byte units, whatever the block size
	}
	if s, err := readTrim(filepath.Join(base, "queue", "rotational")); err == nil {
		d.Rotational = s == "1"
	}
	schedPath := filepath.Join(base, "queue", "scheduler")
	if b, err := os.ReadFile(schedPath); err == nil {
		if d.Scheduler, d.Schedulers, err = ParseScheduler(string(b)); err != nil {
			return Device{}, false, fmt.Errorf("block device %s: %s: %w", name, schedPath, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Device{}, false, fmt.Errorf("block device %s: %w", name, err)
	}
	if d.Schedulers == nil {
		d.Schedulers = []string{}
	}
	d.Backing = d.SizeBytes > 0
	if d.Kind == "loop" {
		bf, err := readTrim(filepath.Join(base, "loop", "backing_file"))
		d.BackingFile = bf
		d.Backing = err == nil && bf != "" && d.SizeBytes > 0
	}
	switch {
	case d.Kind == "zram" || d.Kind == "ram":
		d.TargetReason = "memory-backed: no disk time to share"
	case !d.Backing && d.Kind == "loop":
		d.TargetReason = "loop device with no backing file"
	case !d.Backing:
		d.TargetReason = "no medium (size 0)"
	default:
		d.Target = true
	}
	if d.Partitions, err = partitions(base, name); err != nil {
		return Device{}, false, err
	}
	if d.Slaves, err = slaves(base); err != nil {
		return Device{}, false, err
	}
	return d, true, nil
}

func partitions(base, name string) ([]string, error) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return nil, fmt.Errorf("block device %s: %w", name, err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), name) && exists(filepath.Join(base, e.Name(), "partition")) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func slaves(base string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(base, "slaves"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", base, err)
	}
	var out []string
	for _, e := range ents {
		disk := diskOfEntry(filepath.Join(base, "slaves", e.Name()))
		if !slices.Contains(out, disk) {
			out = append(out, disk)
		}
	}
	slices.Sort(out)
	return out, nil
}

// diskOfEntry resolves a sysfs block entry (a symlink to the device's
// directory) to the name of its whole disk: a partition's directory has a
// "partition" file and lives inside its disk's directory.
func diskOfEntry(p string) string {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		real = p
	}
	if exists(filepath.Join(real, "partition")) {
		return filepath.Base(filepath.Dir(real))
	}
	return filepath.Base(real)
}

// ErrNoDevice means a name or MAJ:MIN matches no block device.
var ErrNoDevice = errors.New("no such block device")

// devEntry is sysfs's entry of the block device MAJ:MIN, a link to its
// directory: /sys/dev/block/MAJ:MIN.
func devEntry(r Roots, dev string) string { return r.sys("dev", "block", dev) }

// DevName returns the kernel's name of the block device dev, as in
// /sys/class/block: "sda1" for a partition (ResolveDisk gives its disk),
// "loop3", "dm-0". It is the last element of the link /sys/dev/block/MAJ:MIN;
// ErrNoDevice when sysfs has no such device.
func DevName(r Roots, dev cgroupfs.Dev) (string, error) {
	target, err := os.Readlink(devEntry(r, dev.String()))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("block device %s: %w", dev, ErrNoDevice)
	}
	if err != nil {
		return "", fmt.Errorf("block device %s: %w", dev, err)
	}
	return filepath.Base(target), nil
}

// ResolveDisk returns the whole disk that holds a block device, given as a
// name ("vda1", "nvme0n1p2", "loop3") or as "MAJ:MIN" (as io.stat and
// mountinfo give it): a partition resolves to its disk, a disk to itself.
func ResolveDisk(r Roots, nameOrDev string) (string, error) {
	var p string
	if _, err := cgroupfs.ParseDev(nameOrDev); err == nil {
		p = devEntry(r, nameOrDev)
	} else {
		if nameOrDev == "" || strings.ContainsAny(nameOrDev, "/\x00") || nameOrDev == "." || nameOrDev == ".." {
			return "", fmt.Errorf("block device %q: %w", nameOrDev, ErrNoDevice)
		}
		p = r.sys("class", "block", nameOrDev)
		if !exists(p) {
			p = r.sys("block", nameOrDev)
		}
	}
	if !exists(p) {
		return "", fmt.Errorf("block device %q: %w", nameOrDev, ErrNoDevice)
	}
	return diskOfEntry(p), nil
}

func kindOf(name string) string {
	for _, k := range []struct{ prefix, kind string }{
		{"loop", "loop"}, {"vd", "virtio"}, {"xvd", "xen"}, {"nvme", "nvme"},
		{"sd", "scsi"}, {"hd", "ide"}, {"mmcblk", "mmc"}, {"nbd", "nbd"},
		{"sr", "cdrom"}, {"dm-", "dm"}, {"md", "md"}, {"zram", "zram"}, {"ram", "ram"},
	} {
		if strings.HasPrefix(name, k.prefix) {
			return k.kind
		}
	}
	return "other"
}

func readTrim(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

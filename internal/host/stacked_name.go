package host

import "path/filepath"

// LowerOf returns the disks under the block device name, as named in
// /sys/block: a stacked device's slaves (dm, md) or the disk holding a loop
// device's backing file; none for a disk of its own, or where sysfs does
// not say. Lowers is the same for every device, by number; LowerOf serves
// a consumer that knows one device by name (the health stage: a cap of the
// daemon's that holds a workload back on the device also shapes the
// traffic of the disks under it).
func LowerOf(roots Roots, name string) []string {
	base := roots.sys("block", name)
	if s, err := slaves(base); err == nil && len(s) > 0 {
		return s
	}
	bf, err := readTrim(filepath.Join(base, "loop", "backing_file"))
	if err != nil || bf == "" {
		return nil
	}
	if disk, err := diskOfFile(roots, bf); err == nil && disk != name {
		return []string{disk}
	}
	return nil
}

package host

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Lowers maps each stacked device among devs — a dm or md device over
// disks, a loop device over a file — to the disks below it, as "MAJ:MIN"
// strings. The kernel charges a cgroup's I/O on a stacked device to the
// cgroup again on the disks below, so the daemon uses this map to count
// such bytes once. A loop device's lower disk is the one holding its
// backing file's filesystem; when that cannot be found (a file on tmpfs,
// a file out of this mount namespace) the loop device has no entry.
func Lowers(r Roots, devs []Device) map[string][]string {
	byName := map[string]string{}
	for _, d := range devs {
		byName[d.Name] = d.Dev
	}
	out := map[string][]string{}
	for _, d := range devs {
		var lower []string
		for _, s := range d.Slaves {
			if dev, ok := byName[s]; ok {
				lower = append(lower, dev)
			}
		}
		if d.BackingFile != "" {
			if name, err := diskOfFile(r, d.BackingFile); err == nil {
				if dev, ok := byName[name]; ok && dev != d.Dev {
					lower = append(lower, dev)
				}
			}
		}
		if len(lower) > 0 {
			out[d.Dev] = lower
		}
	}
	return out
}

// diskOfFile returns the name of the disk holding the filesystem of path.
func diskOfFile(r Roots, path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", fmt.Errorf("stat %s: %w", path, err)
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	name, err := ResolveDisk(r, dev)
	if err != nil {
		return "", fmt.Errorf("disk of %s (%s): %w", path, dev, err)
	}
	if _, err := os.Stat(r.sys("block", name)); err != nil {
		return "", err
	}
	return name, nil
}

package daemon

import "github.com/ddiskqos/ddiskqos/internal/cgroupfs"

// devDelta is one device's read and write bytes since the last reading.
type devDelta struct {
	dev  cgroupfs.Dev
	r, w uint64
}

// stackedOverlap returns the read and write bytes that deltas count twice.
// I/O on a stacked device — a loop device over a file, a device-mapper or
// md device over disks — reaches its lower disks too, and the kernel
// charges both to the cgroup that issued it (measured: a 3 MiB read of a
// loop device over a file on vda shows 3 MiB on 7:N and 3 MiB on 254:0).
// For each stacked device, as much of its bytes as its lower disks also
// show is counted once; a lower disk's bytes are used up by one stacked
// device only, so direct I/O to the lower disk beside the stack still counts.
// lowers maps a stacked device to its lower disks; deltas is modified.
func stackedOverlap(lowers map[cgroupfs.Dev][]cgroupfs.Dev, deltas []devDelta) (r, w uint64) {
	if len(lowers) == 0 {
		return 0, 0
	}
	for i := range deltas {
		under, ok := lowers[deltas[i].dev]
		if !ok || deltas[i].r+deltas[i].w == 0 {
			continue
		}
		sr, sw := deltas[i].r, deltas[i].w
		for _, l := range under {
			for j := range deltas {
				if deltas[j].dev != l || j == i {
					continue
				}
				tr, tw := min(sr, deltas[j].r), min(sw, deltas[j].w)
				deltas[j].r -= tr
				deltas[j].w -= tw
				sr -= tr
				sw -= tw
				r += tr
				w += tw
			}
		}
	}
	return r, w
}

package sensor

import (
	"math/bits"
	"slices"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// devDelta is one device's read and write bytes and I/O counts since the
// last reading.
type devDelta struct {
	dev        cgroupfs.Dev
	r, w       uint64 // bytes
	rIOs, wIOs uint64 // requests
}

// overlap is what a reading's devDeltas count twice.
type overlap struct {
	r, w       uint64 // bytes
	rIOs, wIOs uint64 // requests
}

// stackedOverlap returns the bytes and I/Os that deltas count twice.
// I/O on a stacked device — a loop device over a file, a device-mapper or
// md device over disks — reaches its lower disks too, and the kernel
// charges both to the cgroup that issued it (measured: a 3 MiB read of a
// loop device over a file on vda shows 3 MiB on 7:N and 3 MiB on 254:0).
// For each stacked device, as much of its bytes as its lower disks also
// show is counted once; a lower disk's bytes are used up by one stacked
// device only, so direct I/O to the lower disk beside the stack still counts.
//
// The stacked device's own requests are the ones the workload issued; the
// lower disk's requests for the same bytes are a re-split of them (the loop
// driver and the disk's queue split and merge), so they need not be as many.
// The lower's requests are therefore removed in proportion to the share of
// its bytes that the stack used up: all of them when all its bytes came
// through the stack, none when none did.
// lowers maps a stacked device to its lower disks; deltas is modified.
func stackedOverlap(lowers map[cgroupfs.Dev][]cgroupfs.Dev, deltas []devDelta) overlap {
	o, _ := stackedOverlapLag(lowers, deltas, nil)
	return o
}

// stackedOverlapLag is stackedOverlap over consecutive readings of one
// workload: lag holds, per stacked device, its bytes of earlier readings
// that its lower disks had not shown yet (a lower disk's requests are
// submitted after the stacked device's, so a reading can fall between
// the two), and those are matched with the lower disks' bytes of this
// reading too — without it the lower's late bytes would count as I/O of
// their own (measured: 4–8 KiB too many in 4 MiB of 4 KiB reads over a
// loop device). A stacked device's lag is at most its bytes of the last
// reading: what its lower disks never show (a lower disk not accounted, a
// read served from the backing file's page cache) is not carried on. lag
// nil keeps none; deltas gets an empty entry for a stacked device with a
// lag and no bytes of this reading. It returns the overlap and deltas.
func stackedOverlapLag(lowers map[cgroupfs.Dev][]cgroupfs.Dev, deltas []devDelta, lag *[]devDelta) (o overlap, _ []devDelta) {
	if len(lowers) == 0 {
		return o, deltas
	}
	if lag != nil {
		for _, l := range *lag {
			if !slices.ContainsFunc(deltas, func(d devDelta) bool { return d.dev == l.dev }) {
				deltas = append(deltas, devDelta{dev: l.dev})
			}
		}
	}
	for i := range deltas {
		under, ok := lowers[deltas[i].dev]
		if !ok {
			continue
		}
		var lr, lw uint64 // this device's lag from earlier readings
		li := -1
		if lag != nil {
			li = slices.IndexFunc(*lag, func(l devDelta) bool { return l.dev == deltas[i].dev })
		}
		if li >= 0 {
			lr, lw = (*lag)[li].r, (*lag)[li].w
		}
		if deltas[i].r+deltas[i].w+lr+lw == 0 {
			continue
		}
		sr, sw := deltas[i].r+lr, deltas[i].w+lw
		for _, l := range under {
			for j := range deltas {
				d := &deltas[j]
				if d.dev != l || j == i {
					continue
				}
				tr, tw := min(sr, d.r), min(sw, d.w)
				ir, iw := share(d.rIOs, tr, d.r), share(d.wIOs, tw, d.w)
				d.r -= tr
				d.w -= tw
				d.rIOs -= ir
				d.wIOs -= iw
				sr -= tr
				sw -= tw
				o.r += tr
				o.w += tw
				o.rIOs += ir
				o.wIOs += iw
			}
		}
		if lag == nil {
			continue
		}
		nl := devDelta{dev: deltas[i].dev, r: min(sr, deltas[i].r), w: min(sw, deltas[i].w)}
		if li >= 0 {
			(*lag)[li] = nl
		} else if nl.r+nl.w > 0 {
			*lag = append(*lag, nl)
		}
	}
	if lag != nil {
		*lag = slices.DeleteFunc(*lag, func(l devDelta) bool { return l.r+l.w == 0 })
	}
	return o, deltas
}

// share returns ios*part/whole rounded to nearest, for part <= whole; all
// of ios when part == whole, none when part is 0.
func share(ios, part, whole uint64) uint64 {
	if part == 0 || whole == 0 {
		return 0
	}
	if part >= whole {
		return ios
	}
	hi, lo := bits.Mul64(ios, part)
	q, rem := bits.Div64(hi, lo, whole) // hi < whole since part < whole
	if rem >= whole-rem {
		q++
	}
	return min(q, ios)
}

package stats

import (
	"path/filepath"
	"slices"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/mech"
)

func (r *Reader) readIO(s *Stats, rel string) {
	h, err := r.Layout.IOHierarchy()
	if err != nil {
		s.missing("io: %v", err)
		return
	}
	if _, where, ok := r.dir("blkio", rel); !ok {
		s.missing("io: cgroup not in %s", where)
		return
	}
	c, err := h.Open(rel)
	if err != nil {
		s.missing("io: %v", err)
		return
	}
	defer c.Close()
	st, err := c.ReadIO()
	if err != nil {
		s.missing("io: %v", err)
		return
	}
	io := &IO{File: c.StatFile(), Devices: make([]Device, 0, len(st.Devices))}
	for _, d := range st.Devices {
		io.Devices = append(io.Devices, Device{Dev: d.Dev.String(), Name: r.devName(d.Dev),
			ReadBytes: d.RBytes, WriteBytes: d.WBytes, ReadOps: d.RIOs, WriteOps: d.WIOs})
	}
	if len(io.Devices) > 0 {
		lowers := r.stacked()
		for i := range io.Devices {
			io.Devices[i].Lowers = lowers[io.Devices[i].Dev]
			if len(io.Devices[i].Lowers) > 0 {
				s.noteOnce("I/O on a stacked device (loop, dm, md) is counted again on the disks below it; totals and rates count it once")
			}
		}
	}
	if h.Version == 2 {
		if p, err := c.ReadPressure(); err == nil {
			io.Pressure = pressureOf(p)
		} else {
			s.missing("io.pressure: %v", err)
		}
	} else if st.Total().Bytes() == 0 {
		s.Notes = append(s.Notes, "v1 counts a disk's bytes only once blk-throttle is set up on it (Linux 6.9 and later); "+
			"\"ddiskqos run\" sets it up on the disks it shapes; by hand: echo MAJ:MIN 0 > "+
			filepath.Join(h.Mount, "blkio.throttle.read_bps_device"))
	}
	if h.Version == 1 {
		s.Notes = append(s.Notes, "v1 charges buffered writes to the kernel's flusher, not to the writer: only direct and synchronous writes count here")
	}
	s.IO = io
}

// stacked maps stacked devices to the disks below them (host.Lowers),
// found once per Reader.
func (r *Reader) stacked() map[string][]string {
	if r.lowers == nil {
		roots := host.Roots{Sys: r.sysfs(), Proc: r.procfs()}
		r.lowers = map[string][]string{}
		if devs, err := host.Devices(roots, r.Layout, mech.Params{}); err == nil {
			r.lowers = host.Lowers(roots, devs)
		}
	}
	return r.lowers
}

func (s *Stats) noteOnce(n string) {
	if !slices.Contains(s.Notes, n) {
		s.Notes = append(s.Notes, n)
	}
}

// devName is the kernel's name of a block device, from sysfs.
func (r *Reader) devName(d cgroupfs.Dev) string {
	if n, ok := r.devNames[d]; ok {
		return n
	}
	name, _ := host.DevName(host.Roots{Sys: r.sysfs()}, d) // "" when unknown
	if r.devNames == nil {
		r.devNames = map[cgroupfs.Dev]string{}
	}
	r.devNames[d] = name
	return name
}

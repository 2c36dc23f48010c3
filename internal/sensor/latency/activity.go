package latency

import (
	"encoding/binary"
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/iolat"
	"github.com/ddiskqos/ddiskqos/internal/sensor"
)

// kernelActivity is the I/O latency sensor's per-tick read as the sensing
// stage's activity source (sensor.Activity): the cgroups
// whose requests moved in the kernel's tables since the last tick did
// I/O. It costs no read of its own: Step hands it the deltas it
// read anyway, before the tick's sensing decides who is due.
//
// What the kernel sees is the cgroup a request is charged to; a workload's
// counter files (v2 io.stat, v1 blkio.throttle.*_recursive) add up its
// descendants too. So a cgroup that did I/O and is no workload's own is
// placed and remembered: the workload above it is active, or none is (the
// root, the host's services). It is placed by its directory, which the
// kernel finds from the ID (open_by_handle_at on the cgroup mount: needs
// CAP_DAC_READ_SEARCH); where that cannot be done, by a walk below the
// workloads' directories (one stat per workload, a listing only where
// there are subdirectories), at least walkEvery ticks apart. Until it is
// placed, the tick's record is incomplete: the short polling backstop
// (the daemon's Options.QuietMax) applies to every workload it did not
// see. A cgroup removed before it was placed is taken for no workload's.
// Workloads are not nested in one another (no source makes them so).
//
// A record is also incomplete when the read failed or the kernel could not
// count some requests (a full table: Drops.Uncounted grew). Requests the
// kernel did not run the programs for (Drops.Missed, a few per thousand
// under load) are not: a workload whose only requests in a minute were all
// missed is charged at the long backstop (Options.ActiveQuietMax).
type kernelActivity struct {
	seen      *sensor.Seen
	mount     string                              // the cgroup hierarchy's mount
	path      func(cgroup string) (string, error) // a workload's cgroup directory
	uncounted uint64                              // Drops.Uncounted at the last read
	owner     map[uint64]uint64                   // a cgroup that is no workload: the workload it is below, 0 none
	pending   []uint64                            // cgroups that did I/O, not attributed yet
	nextWalk  uint64                              // the first tick a walk may run
	walks     uint64
	// byPath: the tracked workloads by cgroup directory (relative to the
	// mount, cleaned), rebuilt when pathsStale; noHandles: placing by file
	// handle does not work here (not a cgroup mount, no privilege).
	byPath     map[string]uint64
	pathsStale bool
	noHandles  bool
	handles    uint64 // cgroups placed by file handle
}

// KernelReadings hands each workload what the kernel's maps saw its
// cgroups (its own and those below it) complete at the last Step: add is
// called with the workload's index in Step's workloads, once per delta.
// It reports whether the sensing of this tick may take workloads' readings
// from them instead of their counter files (sensor.Sensor.FromKernel
// decides whose): only when the tick's record is complete — the read
// worked, the kernel counted every request it saw, and every cgroup that
// completed one is placed. Call it after the sensor's BeginTick.
//
// Why: at 10,000 workloads, 1,000 of them busy (the scale benchmark), the
// busy ones' counter files were most of a tick's reads; the maps are read
// anyway. The files stay the truth, read at every ReconcileEvery-th tick
// of each workload.
func (l *Stage) KernelReadings(add func(w int, dl *iolat.Delta)) bool {
	k := &l.kin
	if k.seen == nil || !k.seen.Complete() || l.sen == nil || l.failing {
		return false
	}
	for i := range l.buf {
		dl := &l.buf[i]
		if dl.Count == 0 {
			continue // issued only: counted at its completion
		}
		t, ok := l.byIno[dl.Cgroup]
		if !ok {
			w, placed := k.owner[dl.Cgroup]
			if !placed {
				return false // not placed: the record would miss its bytes
			}
			if t, ok = l.byIno[w]; !ok {
				continue // no workload's (the root, the host's services)
			}
		}
		add(t, dl)
	}
	return true
}

// AddKernelIO adds the delta dl to its device's entry of kio.
func AddKernelIO(kio []sensor.KernelIO, dl *iolat.Delta) []sensor.KernelIO {
	i := slices.IndexFunc(kio, func(k sensor.KernelIO) bool { return k.Dev == dl.Dev })
	if i < 0 {
		kio = append(kio, sensor.KernelIO{Dev: dl.Dev})
		i = len(kio) - 1
	}
	if dl.Op == iolat.Write {
		kio[i].WBytes += dl.Bytes
		kio[i].WIOs += dl.Count
	} else {
		kio[i].RBytes += dl.Bytes
		kio[i].RIOs += dl.Count
	}
	return kio
}

// walkEvery is the fewest ticks between two walks below the workloads.
const walkEvery = 8

// Activity makes the sensor's reads an activity source, nil when no
// sensor is attached: mount is the cgroup hierarchy's mount, path finds a
// workload's cgroup directory (cgroupfs.Hierarchy.Path).
func (l *Stage) Activity(mount string, path func(cgroup string) (string, error)) *sensor.Seen {
	if l.sen == nil {
		return nil
	}
	l.kin = kernelActivity{seen: &sensor.Seen{}, mount: mount, path: path, owner: map[uint64]uint64{},
		byPath: map[string]uint64{}, pathsStale: true, noHandles: !cgroupMount(mount)}
	return l.kin.seen
}

// Walks and Handles are how many walks below the workloads ran, and how
// many cgroups were placed by their file handles.
func (l *Stage) Walks() uint64   { return l.kin.walks }
func (l *Stage) Handles() uint64 { return l.kin.handles }

// OwnerOf is the workload a cgroup that is no workload was placed below
// (0: none); ok false when it was not placed.
func (l *Stage) OwnerOf(ino uint64) (w uint64, ok bool) {
	w, ok = l.kin.owner[ino]
	return w, ok
}

// NoWalkBefore holds the next walk back until the daemon's tick.
func (l *Stage) NoWalkBefore(tick uint64) { l.kin.nextWalk = tick }

// recordActivity records the tick's deltas (read with err, the kernel's
// drops so far) as the activity the sensing of this tick answers from.
// Step calls it after its read, with byIno up to date.
func (l *Stage) recordActivity(deltas []iolat.Delta, drops iolat.Drops, err error, in Tick) {
	k := &l.kin
	if k.seen == nil {
		return
	}
	k.seen.Reset()
	if err != nil {
		k.seen.Incomplete()
		return
	}
	if drops.Uncounted != k.uncounted {
		k.uncounted = drops.Uncounted
		k.seen.Incomplete()
	}
	for i := range deltas {
		ino := deltas[i].Cgroup
		if _, ok := l.byIno[ino]; ok {
			k.seen.Saw(ino)
			continue
		}
		if w, ok := k.owner[ino]; ok {
			if w != 0 {
				k.seen.Saw(w)
			}
			continue
		}
		if !slices.Contains(k.pending, ino) {
			k.pending = append(k.pending, ino)
		}
	}
	if len(k.pending) > 0 && !k.noHandles {
		l.placeByHandle(in.Workloads)
	}
	if len(k.pending) == 0 {
		return
	}
	if in.Tick < k.nextWalk {
		k.seen.Incomplete()
		return
	}
	k.nextWalk = in.Tick + walkEvery
	k.walks++
	if len(k.owner) > 2*in.Workloads+4096 {
		clear(k.owner) // cgroups long gone: learnt again when seen
	}
	for _, w := range l.ws {
		if p, err := k.path(w.Cgroup); err == nil {
			below(p, w.Ino, k.owner)
		}
	}
	for _, ino := range k.pending {
		w, ok := k.owner[ino]
		if !ok {
			k.owner[ino] = 0
		}
		if w != 0 {
			k.seen.Saw(w)
		}
	}
	k.pending = k.pending[:0]
}

// below records in owner every cgroup below the directory dir as owned by
// the workload of inode ino. A kernfs directory's link count is 2 plus its
// subdirectories: a leaf costs one stat.
func below(dir string, ino uint64, owner map[uint64]uint64) {
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil || st.Nlink <= 2 {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		var ss unix.Stat_t
		if unix.Stat(sub, &ss) != nil {
			continue
		}
		owner[ss.Ino] = ino
		if ss.Nlink > 2 {
			below(sub, ino, owner)
		}
	}
}

// placeByHandle places the pending cgroups by their directories, found
// from their IDs; those it cannot place stay pending (for a walk).
// workloads is how many the daemon tracks.
func (l *Stage) placeByHandle(workloads int) {
	k := &l.kin
	if len(k.owner) > 2*workloads+4096 {
		clear(k.owner)
	}
	if k.pathsStale {
		clear(k.byPath)
		for _, w := range l.ws {
			k.byPath[path.Clean("/"+w.Cgroup)] = w.Ino
		}
		k.pathsStale = false
	}
	mount := filepath.Clean(k.mount)
	mfd, err := unix.Open(mount, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		k.noHandles = true
		return
	}
	defer unix.Close(mfd)
	left := k.pending[:0]
	for _, ino := range k.pending {
		dir, err := dirOf(mfd, ino)
		switch {
		case err == nil:
		case errors.Is(err, unix.ESTALE) || errors.Is(err, unix.ENOENT):
			k.owner[ino] = 0 // removed since
			continue
		default:
			l.log.Debug("cgroups are placed by a walk: open by file handle failed", "err", err)
			k.noHandles = true
			left = append(left, ino)
			continue
		}
		rel, ok := strings.CutPrefix(dir, mount)
		if !ok {
			k.owner[ino] = 0
			continue
		}
		w := uint64(0)
		for p := path.Clean("/" + rel); p != "/"; p = path.Dir(p) {
			if wi, ok := k.byPath[p]; ok {
				w = wi
				break
			}
		}
		k.owner[ino] = w
		k.handles++
		if w != 0 {
			k.seen.Saw(w)
		}
	}
	k.pending = left
}

// dirOf is the directory of the cgroup with ID ino on the cgroup mount
// mfd: a kernfs file handle is the node's 64-bit ID.
func dirOf(mfd int, ino uint64) (string, error) {
	var id [8]byte
	binary.NativeEndian.PutUint64(id[:], ino)
	fd, err := unix.OpenByHandleAt(mfd, unix.NewFileHandle(fileIDKernfs, id[:]), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	return os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
}

// fileIDKernfs is FILEID_KERNFS, the kernel's file-handle type of a
// kernfs node (cgroup directories, v1 and v2).
const fileIDKernfs = 0xfe

// cgroupMount reports whether dir is a cgroup file system (v1 or v2).
func cgroupMount(dir string) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return false
	}
	return st.Type == unix.CGROUP_SUPER_MAGIC || st.Type == unix.CGROUP2_SUPER_MAGIC
}

package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/iolat"
	"github.com/ddiskqos/ddiskqos/internal/sensor"
)

// kernelActivity is the I/O latency sensor's per-tick read as the sensing
// stage's activity source (sensor.Activity, issue 19 item 4): the cgroups
// whose requests moved in the kernel's tables since the last tick did
// I/O. It costs no read of its own: latencyTick hands it the deltas it
// read anyway, before the tick's sensing decides who is due.
//
// What the kernel sees is the cgroup a request is charged to; a workload's
// counter files (v2 io.stat, v1 blkio.throttle.*_recursive) add up its
// descendants too. So a cgroup that did I/O and is no workload's own is
// looked up below the workloads' directories (a walk: one stat per
// workload, a directory listing only where there are subdirectories) and
// remembered: the workload above it is active, or none is (the root, the
// host's services). Until a walk has attributed it, the tick's record is
// incomplete: the short polling backstop (Options.QuietMax) applies to
// every workload it did not see; walks are at least walkEvery ticks apart. Workloads are not
// nested in one another (no source makes them so).
//
// A record is also incomplete when the read failed or the kernel could not
// count some requests (a full table: Drops.Uncounted grew). Requests the
// kernel did not run the programs for (Drops.Missed, a few per thousand
// under load) are not: a workload whose only requests in a minute were all
// missed is charged at the long backstop (Options.ActiveQuietMax).
type kernelActivity struct {
	seen      *sensor.Seen
	uncounted uint64            // Drops.Uncounted at the last read
	owner     map[uint64]uint64 // a cgroup that is no workload: the workload it is below, 0 none
	pending   []uint64          // cgroups that did I/O, not attributed yet
	nextWalk  uint64            // the first tick a walk may run
	walks     uint64
}

// walkEvery is the fewest ticks between two walks below the workloads.
const walkEvery = 8

// initActivity makes the latency sensor the activity source when it is
// attached and no other was given.
func (d *Daemon) initActivity() {
	if d.opts.Activity != nil || d.lat.sen == nil {
		return
	}
	d.kin = kernelActivity{seen: &sensor.Seen{}, owner: map[uint64]uint64{}}
	d.sen.Activity = d.kin.seen
	d.log.Info("quiet workloads are read when the I/O latency sensor sees them do I/O",
		"backstop", d.opts.Interval*time.Duration(d.sen.ActiveMaxPeriod), "backstop_unsure", d.opts.Interval*time.Duration(d.sen.MaxPeriod))
}

// recordActivity records the tick's deltas (read with err, the kernel's
// drops so far) as the activity the sensing of this tick answers from.
// latencyTick calls it after its read, with byIno up to date.
func (d *Daemon) recordActivity(deltas []iolat.Delta, drops iolat.Drops, err error) {
	k := &d.kin
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
		if _, ok := d.lat.byIno[ino]; ok {
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
	if len(k.pending) == 0 {
		return
	}
	if d.tick < k.nextWalk {
		k.seen.Incomplete()
		return
	}
	k.nextWalk = d.tick + walkEvery
	k.walks++
	if len(k.owner) > 2*len(d.work)+4096 {
		clear(k.owner) // cgroups long gone: learnt again when seen
	}
	for _, t := range d.order {
		if t.gone || t.ino == 0 {
			continue
		}
		if p, err := d.opts.Hierarchy.Path(t.w.Cgroup); err == nil {
			below(p, t.ino, k.owner)
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

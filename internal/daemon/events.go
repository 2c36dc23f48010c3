package daemon

import (
	"errors"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

// drainEvents applies every pending source event.
func (d *Daemon) drainEvents() {
	for {
		select {
		case ev := <-d.events:
			d.handle(ev)
		default:
			return
		}
	}
}

// handle applies one source event: an added workload is tracked (when the
// open-file budget has room), an updated one takes its new labels (or is
// tracked again when its cgroup changed), a removed one is released, and
// Synced ends the source's initial listing.
func (d *Daemon) handle(ev source.Event) {
	w := ev.Workload
	switch ev.Kind {
	case source.Synced:
		// Only the first counts: see source.Synced.
		if !d.synced {
			d.synced = true
			d.log.Info("initial listing of the workload source complete", "source", d.opts.Source.Name(),
				"workloads", len(d.work)+len(d.refused), "after", d.now().Sub(d.started).Round(time.Millisecond))
		}
	case source.Added, source.Updated:
		ino, _ := d.opts.Hierarchy.DirIno(w.Cgroup) // 0 when gone: Open below says so
		if t, ok := d.work[w.ID]; ok {
			if t.w.Cgroup == w.Cgroup && (ino == 0 || t.ino == 0 || ino == t.ino) {
				t.w = w // labels may have changed; the policy sees them next tick
				t.labelsNew = true
				t.c.Wake()
				d.orderOK = false
				return
			}
			why := "cgroup changed"
			if t.w.Cgroup == w.Cgroup {
				why = "cgroup created again under the same name"
			}
			d.release(w.ID, why)
		}
		// A workload that appears once the source's initial listing is
		// complete (it sent Synced) is new: all its I/O counts. One of that
		// listing was found running; what it did before we looked says
		// nothing about what it does now. How long the listing took does
		// not matter (a slow engine or VM delays it by seconds). One
		// refused for want of descriptors keeps what it was when first
		// seen.
		charge := d.synced
		if r, ok := d.refused[w.ID]; ok {
			charge = r.charge
		}
		delete(d.refused, w.ID)
		if !d.admit(w, charge) {
			return
		}
		h := d.opts.Hierarchy
		cg, err := h.Open(w.Cgroup)
		if err != nil {
			if errors.Is(err, cgroupfs.ErrCgroupGone) {
				d.log.Debug("workload gone before it was tracked", "workload", w.Name, "cgroup", w.Cgroup)
				return
			}
			d.countErr(snapshot.CauseSense)
			d.log.Warn("cannot track workload", "workload", w.Name, "cgroup", w.Cgroup, "err", err)
			return
		}
		if ino != 0 {
			d.store.SetIno(w.Cgroup, ino)
		}
		t := &tracked{w: w, cg: cg, ino: ino, c: d.sen.NewCounters(d.nextSlot, charge)}
		d.nextSlot++
		d.work[w.ID] = t
		d.fds += cg.KeptFiles()
		if !cg.DetailKept() {
			// nothing to count
		} else if d.details >= d.maxDetails() {
			d.fds -= cg.KeptFiles()
			cg.CloseDetail()
			d.fds += cg.KeptFiles()
		} else if cg.KeptFiles() > 1 {
			d.details++
		}
		d.orderOK = false
		d.store.Dirty()
		d.log.Info("tracking workload", "workload", w.Name, "id", w.ID, "cgroup", w.Cgroup)
	case source.Removed:
		delete(d.refused, w.ID)
		d.release(w.ID, "removed")
	}
}

// release stops managing a workload and puts its originals back — unless
// its cgroup directory is another one now (removed and created again under
// the same name before the event was handled): the originals were the old
// cgroup's and are dropped, not written into the new one.
func (d *Daemon) release(id, why string) {
	t, ok := d.work[id]
	if !ok {
		return
	}
	if d.opts.Hierarchy.Recreated(t.w.Cgroup, t.ino) {
		d.act.Forget(id)
		why += "; its cgroup was created again under the same name: originals dropped, not restored"
	} else if err := d.act.Release(id); err != nil {
		d.countErr(snapshot.CauseActuate)
		d.log.Warn("restore released workload", "workload", t.w.Name, "err", err)
	}
	d.closeCgroup(t)
	d.pol.Forget(id)
	delete(d.work, id)
	d.store.DropIno(t.w.Cgroup, t.ino)
	t.gone = true
	d.orderOK = false
	d.store.Dirty()
	d.log.Info("released workload", "workload", t.w.Name, "id", id, "reason", why)
}

// recreated handles a tracked cgroup removed and created again under the
// same name between two looks (the source saw no change): the old one is
// released (its originals dropped, see release) and the new one is
// tracked as a new workload.
func (d *Daemon) recreated(id string, t *tracked) {
	d.release(id, "cgroup gone")
	d.handle(source.Event{Kind: source.Added, Workload: t.w})
}

package actuate

import (
	"errors"
	"fmt"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Putting originals back: when a workload is released, when the daemon
// exits, and for cgroups a previous run left that nobody claims; and
// dropping them unrestored when the cgroup they belong to has gone.

// restore puts one original back through its knob.
func (a *Actuator) restore(o Original) error {
	k, err := a.knobOf(o)
	if err != nil {
		return fmt.Errorf("restore %s on %s: %w", o.Cgroup, o.DevStr, err)
	}
	return k.Write(o.Cgroup, o.Value)
}

// forgetThrottled stops every throttle managing cgroup.
func (a *Actuator) forgetThrottled(cgroup string) {
	for i := range a.devs {
		if t := a.devs[i].thr; t != nil {
			t.Forget(cgroup)
		}
	}
}

// Release restores the originals of workload id and forgets it. A cgroup
// that has gone needs no restoring and is not an error.
func (a *Actuator) Release(id string) error {
	w, ok := a.work[id]
	if !ok {
		return nil
	}
	var errs []error
	a.forgetThrottled(w.cgroup)
	for _, k := range w.keys {
		o, ok := a.orig.orig[k]
		if !ok {
			continue
		}
		if err := a.restore(o); err != nil && !errors.Is(err, cgroupfs.ErrCgroupGone) {
			errs = append(errs, fmt.Errorf("restore %s %s on %s: %w", o.Cgroup, o.Knob, o.DevStr, err))
			continue
		}
		a.orig.drop(k)
	}
	a.dropFailing(w.cgroup)
	w.dropped = true
	delete(a.work, id)
	return errors.Join(errs...)
}

func (a *Actuator) dropFailing(cgroup string) {
	for k := range a.failing {
		if k.cgroup == cgroup {
			delete(a.failing, k)
		}
	}
}

// Forget drops workload id and its originals without restoring them: its
// cgroup has gone, and a directory of the same name now is another cgroup
// whose values are its own.
func (a *Actuator) Forget(id string) { a.forget(id) }

// forget drops a workload whose cgroup has gone, and its originals.
func (a *Actuator) forget(id string) {
	if w, ok := a.work[id]; ok {
		a.forgetW(w)
		delete(a.work, id)
	}
}

func (a *Actuator) forgetW(w *wstate) {
	a.forgetThrottled(w.cgroup)
	for _, k := range w.keys {
		a.orig.drop(k)
	}
	a.orig.dirty = true
	a.dropFailing(w.cgroup)
	w.dropped = true
	for id, x := range a.work {
		if x == w {
			delete(a.work, id)
		}
	}
}

// RestoreAll stops the fast loops, restores every original the actuator
// knows — including those adopted from a previous run for cgroups no
// workload claimed — and forgets all workloads. The daemon calls it on
// SIGTERM/SIGINT.
func (a *Actuator) RestoreAll() error {
	for i := range a.devs {
		if t := a.devs[i].thr; t != nil {
			t.Stop()
		}
	}
	var errs []error
	for _, k := range a.orig.sorted() {
		o := a.orig.orig[k]
		if err := a.restore(o); err != nil && !errors.Is(err, cgroupfs.ErrCgroupGone) {
			errs = append(errs, fmt.Errorf("restore %s %s on %s: %w", o.Cgroup, o.Knob, o.DevStr, err))
			continue
		}
		a.orig.drop(k)
	}
	a.orig.dirty = true
	for _, w := range a.work {
		w.dropped = true // Handles to it are stale
	}
	clear(a.work)
	return errors.Join(errs...)
}

// RestoreOrphans restores adopted originals of cgroups that no current
// workload uses (their container was replaced while the daemon was down),
// so only live workloads keep ddiskqos values. live holds current cgroups.
func (a *Actuator) RestoreOrphans(live map[string]bool) error {
	var errs []error
	for _, k := range a.orig.sorted() {
		if live[k.cgroup] {
			continue
		}
		if err := a.restore(a.orig.orig[k]); err != nil && !errors.Is(err, cgroupfs.ErrCgroupGone) {
			errs = append(errs, err)
			continue
		}
		a.orig.drop(k)
	}
	return errors.Join(errs...)
}

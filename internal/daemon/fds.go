package daemon

import (
	"slices"

	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

// The daemon's use of the budget. The actuator's descriptors come first
// (the throttle keeps one per demoted workload on each of its devices:
// Actuator.OpenFiles, taken at every tick). Every tracked workload keeps one
// descriptor, its byte counters; its detail file (v1 serviced counts, v2
// io.pressure) stays open too while the workload is active and the budget
// has room — at most half of what the primaries leave free, so new
// workloads always find room — and is otherwise opened for the reads that
// need it (cgroupfs.Cgroup.CloseDetail). A quiet host thus holds about one
// descriptor per workload, not two.

// maxDetails is how many detail descriptors may be kept now.
func (d *Daemon) maxDetails() int {
	spare := int(d.noFile) - host.FDReserve - len(d.work) - d.actFDs
	if d.noFile == 0 || spare <= 0 {
		if d.noFile == 0 {
			return len(d.work) + 1 // budget unknown (Run not started): keep all
		}
		return 0
	}
	return spare / 2
}

// admit reports whether one more workload fits the budget, shedding kept
// detail descriptors if that makes room. When it does not fit, the
// workload is remembered with charge (retried when workloads go) and the
// error names the numbers.
func (d *Daemon) admit(w source.Workload, charge bool) bool {
	if d.noFile == 0 {
		return true
	}
	fits := func() bool { return uint64(d.fds+d.actFDs+1+host.FDReserve) <= d.noFile }
	if !fits() && d.details > 0 {
		for _, t := range d.work {
			if fits() {
				break
			}
			d.dropDetail(t)
		}
	}
	if fits() {
		return true
	}
	first := len(d.refused) == 0
	d.refused[w.ID] = refusal{w: w, charge: charge}
	d.countErr(snapshot.CauseFDLimit)
	err := host.NewFDLimitError(len(d.work)+len(d.refused), d.noFile)
	if first || len(d.refused)%100 == 0 {
		d.log.Error("workload not tracked", "workload", w.Name, "untracked", len(d.refused), "err", err)
	}
	return false
}

// retryRefused tracks workloads refused for want of descriptors once
// there is room again.
func (d *Daemon) retryRefused() {
	if len(d.refused) == 0 || uint64(d.fds+d.actFDs+1+host.FDReserve) > d.noFile {
		return
	}
	ids := make([]string, 0, len(d.refused))
	for id := range d.refused {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		d.handle(source.Event{Kind: source.Added, Workload: d.refused[id].w})
		if _, still := d.refused[id]; still {
			return
		}
	}
}

// keepDetail keeps t's detail descriptor open when the budget allows.
func (d *Daemon) keepDetail(t *tracked) {
	if t.cg.DetailKept() || d.details >= d.maxDetails() {
		return
	}
	before := t.cg.KeptFiles()
	if err := t.cg.KeepDetail(); err != nil {
		return // read on demand, as before
	}
	if t.cg.KeptFiles() > before {
		d.fds++
		d.details++
	}
}

// dropDetail closes t's detail descriptor if it is kept.
func (d *Daemon) dropDetail(t *tracked) {
	before := t.cg.KeptFiles()
	if before < 2 {
		return
	}
	t.cg.CloseDetail()
	if t.cg.KeptFiles() < before {
		d.fds--
		d.details--
	}
}

// closeCgroup closes every descriptor t keeps.
func (d *Daemon) closeCgroup(t *tracked) {
	n := t.cg.KeptFiles()
	if n > 1 {
		d.details--
	}
	d.fds -= n
	t.cg.Close()
}

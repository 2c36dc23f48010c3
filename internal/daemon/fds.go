package daemon

import (
	"fmt"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

// FDsPerWorkload is how many descriptors the daemon needs to keep open for
// each workload: its byte counters (v1 blkio.throttle.io_service_bytes*,
// v2 io.stat), re-read with pread. The detail file (v1 serviced counts, v2
// io.pressure) is kept open as well only while there is room; see admit.
const FDsPerWorkload = 1

// FDReserve is what the daemon needs besides: the Go runtime, the API's
// listener and connections, the source (inotify, the Engine API), the state
// file and the short-lived descriptors of actuator writes.
const FDReserve = 256

// FDBudget is the number of open files n workloads need.
func FDBudget(n int) uint64 { return uint64(n)*FDsPerWorkload + FDReserve }

// FDLimit is RLIMIT_NOFILE after RaiseNoFile.
type FDLimit struct {
	Soft, Hard uint64
	// RaisedSoft / RaisedHard: what RaiseNoFile changed.
	RaisedSoft, RaisedHard bool
}

// Room is how many workloads fit in the soft limit.
func (l FDLimit) Room() int {
	if l.Soft <= FDReserve {
		return 0
	}
	return int((l.Soft - FDReserve) / FDsPerWorkload)
}

// RaiseNoFile raises the soft RLIMIT_NOFILE to the hard one (Go does that
// at start too; this makes it explicit and reports it). When want is above
// the hard limit it tries to raise the hard limit to want as well, which
// only a process with CAP_SYS_RESOURCE may do and which is capped by
// fs.nr_open; failing that is no error: the caller compares the result
// with what it needs (see FDLimitError). want 0 raises only the soft limit.
func RaiseNoFile(want uint64) (FDLimit, error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return FDLimit{}, fmt.Errorf("getrlimit(RLIMIT_NOFILE): %w", err)
	}
	l := FDLimit{Soft: rl.Cur, Hard: rl.Max}
	if want > rl.Max {
		up := unix.Rlimit{Cur: want, Max: want}
		if unix.Setrlimit(unix.RLIMIT_NOFILE, &up) == nil {
			return FDLimit{Soft: want, Hard: want, RaisedSoft: true, RaisedHard: true}, nil
		}
	}
	if rl.Cur < rl.Max {
		up := unix.Rlimit{Cur: rl.Max, Max: rl.Max}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &up); err != nil {
			return l, fmt.Errorf("raise RLIMIT_NOFILE soft limit %d to the hard limit %d: %w", rl.Cur, rl.Max, err)
		}
		l.Soft, l.RaisedSoft = rl.Max, true
	}
	return l, nil
}

// FDLimitError is the descriptor budget falling short of the workloads.
type FDLimitError struct {
	Workloads  int    // workloads seen
	Need       uint64 // FDBudget(Workloads)
	Soft, Hard uint64 // RLIMIT_NOFILE
}

func (e *FDLimitError) Error() string {
	return fmt.Sprintf("open-file limit too low: %d workloads need %d descriptors (%d each + %d), "+
		"RLIMIT_NOFILE is soft %d, hard %d (room for %d workloads): set LimitNOFILE=%d in the service, or ulimit -n %d before starting",
		e.Workloads, e.Need, FDsPerWorkload, FDReserve, e.Soft, e.Hard,
		FDLimit{Soft: e.Soft}.Room(), roundUp(e.Need), roundUp(e.Need))
}

// roundUp rounds n up to a power of two at least 65536, the figure an
// operator would set.
func roundUp(n uint64) uint64 {
	v := uint64(65536)
	for v < n {
		v *= 2
	}
	return v
}

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
	spare := int(d.noFile) - FDReserve - len(d.work) - d.actFDs
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
	fits := func() bool { return uint64(d.fds+d.actFDs+1+FDReserve) <= d.noFile }
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
	n := len(d.work) + len(d.refused)
	err := &FDLimitError{Workloads: n, Need: FDBudget(n), Soft: d.noFile, Hard: d.noFile}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		err.Hard = rl.Max
	}
	if first || len(d.refused)%100 == 0 {
		d.log.Error("workload not tracked", "workload", w.Name, "untracked", len(d.refused), "err", err)
	}
	return false
}

// retryRefused tracks workloads refused for want of descriptors once
// there is room again.
func (d *Daemon) retryRefused() {
	if len(d.refused) == 0 || uint64(d.fds+d.actFDs+1+FDReserve) > d.noFile {
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

package host

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// The daemon's open-file budget against the host's RLIMIT_NOFILE: what a
// workload costs, the limit raised and read, and the error when it falls
// short. The daemon admits workloads by it; the scale benchmark sizes its
// run by it.

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

// NewFDLimitError is the error of workloads falling short of the soft
// limit soft, with the hard limit read now (soft when it cannot be).
func NewFDLimitError(workloads int, soft uint64) *FDLimitError {
	err := &FDLimitError{Workloads: workloads, Need: FDBudget(workloads), Soft: soft, Hard: soft}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		err.Hard = rl.Max
	}
	return err
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

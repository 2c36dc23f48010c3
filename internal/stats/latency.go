package stats

import (
	"errors"
	"net/url"
	"path"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// Latency is the I/O latency of a cgroup's requests as the running daemon
// measures it (its eBPF sensor; `ddiskqos run`): the kernel's counters have
// no per-request times, so without the daemon there are none.
type Latency struct {
	// Daemon is the API asked (stats --addr).
	Daemon string `json:"daemon"`
	// Devices are the daemon's record of the cgroup's requests per disk,
	// as in its /v1/workloads: read and write p50/p99 of its last tick,
	// requests in flight, totals since it began tracking the workload.
	Devices []snapshot.WorkloadLatency `json:"devices,omitempty"`
	// Missing says why there are no figures ("" when Devices holds them).
	Missing string `json:"missing,omitempty"`
}

// LatencyOf finds t's latency in the daemon's snapshot s (asked at addr;
// err is why it did not answer): t is the daemon's workload with t's
// container id, else with t's cgroup path.
func LatencyOf(t Target, s *snapshot.Snapshot, err error, addr string) *Latency {
	l := &Latency{Daemon: addr}
	switch {
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // not the URL again
		}
		l.Missing = "latency needs the daemon (ddiskqos run), which measures it; its API at " + addr + " did not answer: " + err.Error()
		return l
	case s.Latency == nil:
		l.Missing = "the daemon at " + addr + " measures no latency"
		return l
	case s.Latency.Off:
		l.Missing = "the daemon's latency sensor is " + s.Latency.Reason
		return l
	case !s.Latency.Available:
		l.Missing = "the daemon's latency sensor is unavailable: " + s.Latency.Reason + " (ddiskqos check: latency.ebpf)"
		return l
	}
	w := workloadOf(s.Workloads, t)
	switch {
	case w == nil:
		l.Missing = "not a workload of the daemon at " + addr + ": it shows the latency of its workloads only"
	case len(w.Latency) == 0:
		l.Missing = "no request timed since the daemon began tracking it (as " + w.Name + ")"
	default:
		l.Devices = w.Latency
	}
	return l
}

// workloadOf is the workload of ws that is t: the same container, else the
// same cgroup (both paths relative to the I/O hierarchy's mount).
func workloadOf(ws []*snapshot.Workload, t Target) *snapshot.Workload {
	if t.ID != "" {
		for _, w := range ws {
			if w.ID == t.ID {
				return w
			}
		}
	}
	cg := path.Clean("/" + t.Cgroup)
	for _, w := range ws {
		if path.Clean("/"+w.Cgroup) == cg {
			return w
		}
	}
	return nil
}

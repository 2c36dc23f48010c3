package daemon

import "github.com/ddiskqos/ddiskqos/internal/snapshot"

// The published snapshot, its readers and the reuse of the records a tick
// replaced are internal/snapshot/reuse's: d.rd and d.rt.

// Acquire returns the state after the last tick (nil before the first, and
// on a nil Daemon) and the func to call once the caller no longer reads
// it, nor anything in it but strings; see snapshot.Acquirer.
func (d *Daemon) Acquire() (*snapshot.Snapshot, func()) {
	if d == nil {
		return nil, func() {}
	}
	return d.rd.Acquire()
}

// Snapshot returns the state after the last tick: nil before the first,
// and on a nil Daemon (the metrics are registered before it is built). It
// has no release: records of its generation and later are never reused
// once it has been called. The daemon's own readers use Acquire.
func (d *Daemon) Snapshot() *snapshot.Snapshot {
	if d == nil {
		return nil
	}
	return d.rd.Snapshot()
}

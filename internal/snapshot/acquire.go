package snapshot

// Acquirer returns the newest snapshot (nil before the first) and a
// release func the reader calls once it no longer reads it, nor any
// Workload or latency list in it. Until then the publisher does not reuse
// the records of that snapshot (daemon/reuse.go: a record a tick replaced is
// reused once no reader holds a snapshot that had it, so a busy host's
// ticks do not allocate a record per busy workload). Release may be called
// more than once; release must be called, or the publisher only allocates
// as it did before reuse. A reader must not keep any part of the snapshot
// after release (strings are immutable and may be kept).
type Acquirer func() (s *Snapshot, release func())

// Fixed is an Acquirer of what get returns, with nothing to release: for
// snapshots that are never reused (tests, a snapshot decoded from the
// API).
func Fixed(get func() *Snapshot) Acquirer {
	return func() (*Snapshot, func()) { return get(), func() {} }
}

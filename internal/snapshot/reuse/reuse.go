// Package reuse is the published snapshot, who reads which generation of
// it, and the reuse of the records a tick replaced once no reader can see
// them: the daemon publishes through Readers and builds its records from
// Retired, and shares the Applied lists most records have alike
// (AppliedLists).
package reuse

import (
	"sync"
	"unsafe"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// Reuse of published records.
//
// A tick publishes a new snapshot.Workload for every workload whose
// figures moved (a busy host: every reader, every tick) and a new latency
// list for each that completed requests: at 10,000 workloads with 1,000
// reading, most of what a tick allocated, and what made the collector run
// every ~15 ticks. Published records are never modified while a reader
// can see them, so a record is reused only when no one can: a record
// replaced while generation g is built appears in snapshots before g
// only; it is reused once the stored snapshot is g or later and no reader
// holds one older than g. Readers say what they hold: Readers.Acquire
// returns a release func; Readers.Snapshot, which has none, pins its
// generation for good (nothing retired after it is reused again). A
// reader that holds a snapshot for long does not slow the loop: retired
// records wait for it, up to maxRetired of each kind, and the rest are
// left to the garbage collector, as before.

// Readers is the published snapshot and who holds which generation. The
// zero Readers has published nothing.
type Readers struct {
	mu     sync.Mutex
	cur    *snapshot.Snapshot
	gen    uint64         // cur's generation: 1 for the first published
	held   map[uint64]int // generation → readers holding it
	pinned uint64         // the oldest generation Snapshot handed out; 0: none
}

// Acquire returns the last snapshot stored (nil before the first) and the
// func to call once the caller no longer reads it, nor anything in it but
// strings; see snapshot.Acquirer.
func (r *Readers) Acquire() (*snapshot.Snapshot, func()) {
	r.mu.Lock()
	if r.held == nil {
		r.held = map[uint64]int{}
	}
	s, g := r.cur, r.gen
	if s != nil {
		r.held[g]++
	}
	r.mu.Unlock()
	if s == nil {
		return nil, func() {}
	}
	var once sync.Once
	return s, func() {
		once.Do(func() {
			r.mu.Lock()
			if r.held[g]--; r.held[g] <= 0 {
				delete(r.held, g)
			}
			r.mu.Unlock()
		})
	}
}

// Snapshot returns the last snapshot stored: nil before the first. It has
// no release: records of its generation and later are never reused once it
// has been called.
func (r *Readers) Snapshot() *snapshot.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil && (r.pinned == 0 || r.gen < r.pinned) {
		r.pinned = r.gen
	}
	return r.cur
}

// Store publishes s as the next generation; it returns the snapshot it
// replaced and that generation.
func (r *Readers) Store(s *snapshot.Snapshot) (old *snapshot.Snapshot, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old = r.cur
	r.cur = s
	r.gen++
	return old, r.gen
}

// Begin is, at the start of a tick, the newest generation whose retired
// records may be reused during it (none of the stored snapshot's or any
// held one's; readers only ever release, so it stays true all tick) and
// the generation the tick will publish.
func (r *Readers) Begin() (bound, building uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	bound = r.gen
	for g := range r.held {
		bound = min(bound, g)
	}
	if r.pinned != 0 {
		bound = min(bound, r.pinned)
	}
	return bound, r.gen + 1
}

// maxLatDevs: latency lists of up to this many devices are reused (a
// loop device's reader has two: the loop device and its backing disk).
const maxLatDevs = 4

// maxRetired bounds each kind of retired record kept for reuse: a tick
// retires one per busy workload, and they wait one tick, longer only while
// a reader holds an older snapshot.
const maxRetired = 8192

// Retired is what the loop replaced, waiting to be reused; the loop alone
// uses it.
type Retired struct {
	recs  fifo[*snapshot.Workload]
	lats  [maxLatDevs]fifo[[]snapshot.WorkloadLatency] // lists of 1..maxLatDevs devices
	lists fifo[[]*snapshot.Workload]                   // snapshots' Workloads
	bound uint64                                       // of this tick (Readers.Begin)
	gen   uint64                                       // the generation being built
}

// Tick starts a tick: bound and gen are Readers.Begin's.
func (rt *Retired) Tick(bound, gen uint64) { rt.bound, rt.gen = bound, gen }

// RetireList retires a published snapshot's Workloads slice, replaced
// while this tick's generation is built.
func (rt *Retired) RetireList(l []*snapshot.Workload) { rt.lists.put(l, rt.gen) }

// RetireRecord retires old, replaced by nw while gen is built, and its
// latency list unless nw shares it.
func (rt *Retired) RetireRecord(old, nw *snapshot.Workload) {
	if n := len(old.Latency); n > 0 && n <= maxLatDevs && (len(nw.Latency) == 0 || unsafe.SliceData(old.Latency) != unsafe.SliceData(nw.Latency)) {
		rt.lats[n-1].put(old.Latency, rt.gen)
	}
	rt.recs.put(old, rt.gen)
}

// Record is a record to fill: a retired one that no reader can see, or a
// new one.
func (rt *Retired) Record() *snapshot.Workload {
	if w, ok := rt.recs.get(rt.bound); ok {
		return w
	}
	return new(snapshot.Workload)
}

// LatencyList is a latency list of n devices to fill.
func (rt *Retired) LatencyList(n int) []snapshot.WorkloadLatency {
	if n > 0 && n <= maxLatDevs {
		if l, ok := rt.lats[n-1].get(rt.bound); ok {
			return l
		}
	}
	return make([]snapshot.WorkloadLatency, n)
}

// Workloads is an empty Workloads slice with room for n.
func (rt *Retired) Workloads(n int) []*snapshot.Workload {
	if l, ok := rt.lists.get(rt.bound); ok && cap(l) >= n {
		return l[:0]
	}
	return make([]*snapshot.Workload, 0, n)
}

type fifo[T any] struct {
	q    []aged[T]
	head int
}

type aged[T any] struct {
	v   T
	gen uint64
}

// put queues v, retired while gen was built; generations only grow.
func (f *fifo[T]) put(v T, gen uint64) {
	if len(f.q)-f.head >= maxRetired {
		return // the collector's
	}
	if f.head > 0 && len(f.q) == cap(f.q) {
		n := copy(f.q, f.q[f.head:])
		clear(f.q[n:])
		f.q, f.head = f.q[:n], 0
	}
	f.q = append(f.q, aged[T]{v, gen})
}

// get takes the oldest, when it was retired at bound or before.
func (f *fifo[T]) get(bound uint64) (T, bool) {
	var zero T
	if f.head == len(f.q) || f.q[f.head].gen > bound {
		return zero, false
	}
	v := f.q[f.head].v
	f.q[f.head] = aged[T]{}
	f.head++
	if f.head == len(f.q) {
		f.q, f.head = f.q[:0], 0
	}
	return v, true
}

// maxShared bounds the lists AppliedLists keeps.
const maxShared = 64

// AppliedLists are published (never modified) Applied lists of one entry,
// each the same for every workload that has it: most workloads have one
// device, nothing capped there and no error, and so one of a few lists
// (one per weight and whether they used the device). At 10,000 workloads
// a list each was 1 MB of the live heap. Caps and errors vary too much to
// be worth keeping: those lists are the workload's own, the caller's to
// tell apart. The zero AppliedLists is ready; the loop alone uses it.
type AppliedLists struct {
	m map[snapshot.Applied][]snapshot.Applied
}

// Of is the shared list of a alone.
func (s *AppliedLists) Of(a snapshot.Applied) []snapshot.Applied {
	if l, ok := s.m[a]; ok {
		return l
	}
	if s.m == nil || len(s.m) >= maxShared {
		s.m = map[snapshot.Applied][]snapshot.Applied{} // bounded: most ticks find theirs
	}
	l := []snapshot.Applied{a}
	s.m[a] = l
	return l
}

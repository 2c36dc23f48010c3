package iolat

import (
	"errors"
	"fmt"
	"time"
)

// Delta is what one aggregate did since the previous read.
type Delta struct {
	Key
	// Count and Bytes are the requests completed and their bytes.
	Count, Bytes uint64
	// Total and Queue are the sums of the completed requests' total
	// times (from allocation, or issue, to completion) and of the part
	// of them before the issue.
	Total, Queue time.Duration
	// InFlight is how many requests are issued and not completed now.
	InFlight uint64
	// Hist is the histogram of the completed requests' total times.
	Hist TickHist
	// Alone is the histogram of those of them the disk served alone:
	// issued with no other request in flight on it and completed before
	// another was issued (iolat.c), the disk's unloaded latency whatever
	// its neighbours do. Its buckets are Hist's up to the last
	// (AloneBuckets), which holds every time from its lower bound on.
	Alone AloneHist
}

// table is the kernel's side as the reader sees it (*Sensor; a fake in the
// tests).
type table interface {
	// dump calls fn with every aggregate of the table, v valid during
	// the call only; on an error, fn has seen some of them.
	dump(fn func(k rawKey, v *rawValue)) error
	remove(k rawKey) error
	drops() (Drops, error)
	// events counts the changes made to the table so far; ok false: not
	// known (every read then reads the table).
	events() (n uint64, ok bool)
}

// DefaultIdleReads is how many reads an aggregate may stay unchanged, with
// nothing in flight, before the reader deletes it from the kernel's table.
const DefaultIdleReads = 60

// Reader takes from the kernel's tables what changed since its last read.
// It keeps the last value of each aggregate (to tell what changed) and
// deletes aggregates that stayed idle for IdleReads reads, so that the keys
// of cgroups that are gone give their room back. A request completed on an
// aggregate between the read that found it idle and its deletion is lost;
// one completed after the deletion starts a new aggregate (counted from
// zero again) and its in-flight count is then off by one until the key is
// idle again.
type Reader struct {
	t         table
	closer    func() error
	idleReads uint64
	reads     uint64
	prev      map[rawKey]*last
	idle      []rawKey // Read's scratch: the aggregates to delete
	// The table's change count at the last read of the table (evOK: known),
	// that read's number, and the drops it returned.
	ev        uint64
	evOK      bool
	dumped    uint64
	lastDrops Drops
}

type last struct {
	v       rawValue
	changed uint64 // the read that last saw it change
	seen    uint64 // the read that last saw it at all
}

// OpenReader opens the sensor (Open) and a reader of it; closing the reader
// closes the sensor.
func OpenReader(o Options) (*Reader, error) {
	s, err := Open(o)
	if err != nil {
		return nil, err
	}
	return newReader(s, s.Close), nil
}

func newReader(t table, closer func() error) *Reader {
	return &Reader{t: t, closer: closer, idleReads: DefaultIdleReads, prev: map[rawKey]*last{}}
}

// SetIdleReads sets how many unchanged reads make an aggregate idle (at
// least 1).
func (r *Reader) SetIdleReads(n int) { r.idleReads = uint64(max(n, 1)) }

// Keys is how many aggregates the reader knows (the kernel's table as of
// the last read).
func (r *Reader) Keys() int { return len(r.prev) }

// Close closes the sensor.
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	c := r.closer
	r.closer = nil
	return c()
}

// Read appends to dst a Delta for every aggregate whose counters moved
// since the last read (a new one counts from zero), and returns the
// kernel half's drops so far. When reading the table fails part way, the
// Deltas of the aggregates read before are returned with the error (the
// others are taken at the next read).
//
// When the kernel half made no change since the last read of its table,
// the table is not read again (nothing moved; on an idle host that read
// was a quarter of the daemon's CPU), nor its drops (the last
// ones are returned: the recursion misses, which are not changes, show at
// the next read of the table) — except every IdleReads reads, so that
// idle aggregates are still deleted.
//
// The table is taken batch by batch, not copied whole first: at 2,000
// aggregates a copy was 1.1 MB kept between reads.
func (r *Reader) Read(dst []Delta) ([]Delta, Drops, error) {
	r.reads++
	ev, evOK := r.t.events()
	if evOK && r.evOK && ev == r.ev && r.reads-r.dumped < r.idleReads {
		return dst, r.lastDrops, nil
	}
	n := 0
	r.idle = r.idle[:0]
	err := r.t.dump(func(k rawKey, v *rawValue) {
		n++
		p := r.prev[k]
		if p == nil {
			p = &last{changed: r.reads}
			r.prev[k] = p
		}
		p.seen = r.reads
		inFlight := v.Issued - v.Count - v.Retired
		if int64(inFlight) < 0 {
			inFlight = 0 // a completion after a deletion (see Reader)
		}
		if v.Count == p.v.Count && v.Issued == p.v.Issued && v.Retired == p.v.Retired {
			if inFlight == 0 && r.reads-p.changed >= r.idleReads {
				r.idle = append(r.idle, k)
			}
			return
		}
		dst = append(dst, Delta{Key: k.key(), Count: v.Count - p.v.Count, Bytes: v.Bytes - p.v.Bytes,
			Total: time.Duration(v.TotalNs - p.v.TotalNs), Queue: time.Duration(v.QueueNs - p.v.QueueNs),
			InFlight: inFlight})
		d := &dst[len(dst)-1]
		for b := range NumBuckets {
			d.Hist[b] = v.Hist[b] - p.v.Hist[b] // 32-bit counters wrap; a tick adds less
		}
		for b := range AloneBuckets {
			d.Alone[b] = v.Alone[b] - p.v.Alone[b]
		}
		p.v = *v
		p.changed = r.reads
	})
	if err != nil {
		r.evOK = false
		return dst, Drops{}, err
	}
	var errs []error
	for _, k := range r.idle {
		if err := r.t.remove(k); err != nil {
			errs = append(errs, fmt.Errorf("iolat: delete idle aggregate %+v: %w", k.key(), err))
			continue
		}
		delete(r.prev, k)
	}
	if len(r.prev) > n-len(r.idle)+len(errs) {
		// Deleted from the kernel's table since: forgotten.
		for k, p := range r.prev {
			if p.seen != r.reads {
				delete(r.prev, k)
			}
		}
	}
	drops, err := r.t.drops()
	if err == nil && len(errs) == 0 {
		r.ev, r.evOK, r.dumped, r.lastDrops = ev, evOK, r.reads, drops
	} else {
		r.evOK = false // read the table again next time
	}
	return dst, drops, errors.Join(append(errs, err)...)
}

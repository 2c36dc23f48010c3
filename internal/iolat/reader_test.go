package iolat

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// fakeTable is the kernel's table of aggregates as a Go map.
type fakeTable struct {
	m       map[rawKey]rawValue
	removed []rawKey
	d       Drops
	err     error
	// ev counts the changes complete made (noEvents: the count is not
	// known); dumps counts the reads of the table.
	ev       uint64
	noEvents bool
	dumps    int
}

func (f *fakeTable) dump(fn func(k rawKey, v *rawValue)) error {
	f.dumps++
	if f.err != nil {
		return f.err
	}
	ks := slices.SortedFunc(maps.Keys(f.m), func(a, b rawKey) int { return int(a.Cgroup) - int(b.Cgroup) })
	for _, k := range ks {
		v := f.m[k]
		fn(k, &v)
	}
	return nil
}

func (f *fakeTable) remove(k rawKey) error {
	delete(f.m, k)
	f.removed = append(f.removed, k)
	return nil
}

func (f *fakeTable) drops() (Drops, error) { return f.d, nil }

func (f *fakeTable) events() (uint64, bool) { return f.ev, !f.noEvents }

// complete adds n requests of ns each and bytes each to k, as iolat.c's
// issue and completion would.
func (f *fakeTable) complete(k rawKey, n int, ns uint64, bytes uint64) {
	v := f.m[k]
	for range n {
		v.Issued++
		v.Count++
		v.Bytes += bytes
		v.TotalNs += ns
		v.Hist[Bucket(ns)]++
		f.ev += 2 // its issue and its completion
	}
	f.m[k] = v
}

// TestReaderDeltas: each read returns what moved since the last, counted
// from zero for a new aggregate, in-flight as issued minus completed and
// retired, histogram counters that wrapped at 32 bits as what was added;
// an unchanged aggregate is not returned, and one idle for IdleReads reads
// with nothing in flight is deleted from the kernel's table.
func TestReaderDeltas(t *testing.T) {
	t.Parallel()
	a := rawKey{Cgroup: 100, Dev: 7<<20 | 64, Op: 0}
	b := rawKey{Cgroup: 200, Dev: 254 << 20, Op: 1}
	f := &fakeTable{m: map[rawKey]rawValue{}}
	r := newReader(f, nil)
	r.SetIdleReads(3)

	f.complete(a, 10, 50_000, 4096)
	ds, _, err := r.Read(nil)
	if err != nil || len(ds) != 1 {
		t.Fatalf("first read: %+v, %v; want one delta", ds, err)
	}
	d := ds[0]
	want := Key{Cgroup: 100, Dev: cgroupfs.Dev{Major: 7, Minor: 64}, Op: Read}
	if d.Key != want || d.Count != 10 || d.Bytes != 40960 || d.Total != 500*time.Microsecond || d.InFlight != 0 ||
		d.Hist[Bucket(50_000)] != 10 || d.Hist.Count() != 10 {
		t.Fatalf("first read: %+v", d)
	}

	// b: 3 issued, 1 completed, 1 requeued; a: its histogram bucket wraps.
	f.complete(b, 1, 2_000_000, 8192)
	vb := f.m[b]
	vb.Issued += 2
	vb.Retired++
	f.m[b] = vb
	va := f.m[a]
	va.Hist[Bucket(50_000)] = 3 // from 2^32-1 (set below as the last read): 4 added
	va.Count += 2
	va.Issued += 2
	f.m[a] = va
	prevA := r.prev[a].v
	prevA.Hist[Bucket(50_000)] = 1<<32 - 1
	r.prev[a].v = prevA
	ds, _, err = r.Read(ds[:0])
	if err != nil || len(ds) != 2 {
		t.Fatalf("second read: %+v, %v; want two deltas", ds, err)
	}
	if ds[0].Count != 2 || ds[0].Hist[Bucket(50_000)] != 4 {
		t.Errorf("a after a wrap: count %d, bucket %d; want 2 and 4 (2^32-1 -> 3)", ds[0].Count, ds[0].Hist[Bucket(50_000)])
	}
	if ds[1].Count != 1 || ds[1].InFlight != 1 || ds[1].Op != Write || ds[1].Dev != (cgroupfs.Dev{Major: 254}) {
		t.Errorf("b: %+v; want 1 completed, 1 in flight, write on 254:0", ds[1])
	}

	// Nothing moves: no delta; b keeps one in flight and is never idle.
	for i := range 3 {
		ds, _, err = r.Read(ds[:0])
		if err != nil || len(ds) != 0 {
			t.Fatalf("idle read %d: %+v, %v; want none", i, ds, err)
		}
	}
	if _, ok := f.m[a]; ok {
		t.Errorf("a idle for 3 reads with nothing in flight: still in the kernel's table")
	}
	if _, ok := f.m[b]; !ok {
		t.Errorf("b has a request in flight: deleted")
	}
	if r.Keys() != 1 {
		t.Errorf("reader knows %d keys, want 1 (b)", r.Keys())
	}
	// a comes back: counted from zero.
	f.complete(a, 1, 1000, 512)
	ds, _, _ = r.Read(ds[:0])
	if len(ds) != 1 || ds[0].Count != 1 || ds[0].Bytes != 512 {
		t.Errorf("a again: %+v; want one request of 512 B", ds)
	}
	// A key deleted by someone else is forgotten.
	delete(f.m, b)
	f.ev++ // a change the reader did not make
	r.Read(ds[:0])
	if _, ok := r.prev[b]; ok {
		t.Errorf("b gone from the kernel's table: still remembered")
	}
	f.err = errors.New("boom")
	f.ev++
	if _, _, err := r.Read(nil); err == nil {
		t.Errorf("a failing dump: no error")
	}
}

// TestReaderSkipsUnchangedTable: a read finds the kernel half's change
// count where the last read of the table left it and does not read the
// table (nothing moved), except every IdleReads reads, which still
// deletes the idle aggregates; a change, or a count the kernel cannot
// give, reads it every time.
func TestReaderSkipsUnchangedTable(t *testing.T) {
	k := rawKey{Cgroup: 7, Dev: 7 << 20}
	for _, known := range []bool{true, false} {
		f := &fakeTable{m: map[rawKey]rawValue{}, noEvents: !known}
		r := newReader(f, nil)
		r.SetIdleReads(5)
		f.complete(k, 3, 1000, 4096)
		got, _, err := r.Read(nil)
		if err != nil || len(got) != 1 || got[0].Count != 3 {
			t.Fatalf("known %v: first read %+v, %v: want 3 requests", known, got, err)
		}
		for i := 2; i <= 4; i++ {
			if got, _, _ := r.Read(nil); len(got) != 0 {
				t.Fatalf("known %v: read %d of an unchanged table returned %+v", known, i, got)
			}
		}
		if want := map[bool]int{true: 1, false: 4}[known]; f.dumps != want {
			t.Fatalf("known %v: %d reads of the table in 4 reads, want %d", known, f.dumps, want)
		}
		f.complete(k, 1, 1000, 4096)
		if got, _, _ := r.Read(nil); len(got) != 1 || got[0].Count != 1 {
			t.Fatalf("known %v: read after a change returned %+v, want 1 request", known, got)
		}
		// Idle from read 5 on: the table is read again at read 10 and the
		// aggregate, unchanged for 5 reads, is deleted.
		for range 5 {
			r.Read(nil)
		}
		if len(f.removed) != 1 || len(f.m) != 0 {
			t.Fatalf("known %v: after 5 idle reads: removed %v, table %v: want the idle aggregate deleted", known, f.removed, f.m)
		}
		if known && f.dumps != 3 {
			t.Fatalf("known %v: %d reads of the table in 10 reads, want 3 (the first, after the change, the idle check)", known, f.dumps)
		}
	}
}

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
}

func (f *fakeTable) dump(keys []rawKey, vals []rawValue) ([]rawKey, []rawValue, error) {
	if f.err != nil {
		return keys, vals, f.err
	}
	ks := slices.SortedFunc(maps.Keys(f.m), func(a, b rawKey) int { return int(a.Cgroup) - int(b.Cgroup) })
	for _, k := range ks {
		keys = append(keys, k)
		vals = append(vals, f.m[k])
	}
	return keys, vals, nil
}

func (f *fakeTable) remove(k rawKey) error {
	delete(f.m, k)
	f.removed = append(f.removed, k)
	return nil
}

func (f *fakeTable) drops() (Drops, error) { return f.d, nil }

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
	r.Read(ds[:0])
	if _, ok := r.prev[b]; ok {
		t.Errorf("b gone from the kernel's table: still remembered")
	}
	f.err = errors.New("boom")
	if _, _, err := r.Read(nil); err == nil {
		t.Errorf("a failing dump: no error")
	}
}

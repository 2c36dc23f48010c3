package reuse

import (
	"testing"
	"unsafe"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// TestFIFOBound: retired records wait in order, are taken only once their
// generation is within the bound, and no more than maxRetired wait.
func TestFIFOBound(t *testing.T) {
	t.Parallel()
	var f fifo[int]
	for i := range maxRetired + 10 {
		f.put(i, uint64(1+i/1000))
	}
	if n := len(f.q) - f.head; n != maxRetired {
		t.Fatalf("%d waiting, want at most %d", n, maxRetired)
	}
	if _, ok := f.get(0); ok {
		t.Fatal("got one retired at generation 1 with the bound at 0")
	}
	for i := range 1000 {
		v, ok := f.get(1)
		if !ok || v != i {
			t.Fatalf("get %d at bound 1: %d, %v", i, v, ok)
		}
	}
	if v, ok := f.get(1); ok {
		t.Fatalf("got %d, retired at generation 2, with the bound at 1", v)
	}
	// Room again, and the order kept.
	f.put(-1, 99)
	for i := 1000; i < maxRetired; i++ {
		if v, ok := f.get(99); !ok || v != i {
			t.Fatalf("after compaction, get: %d, %v; want %d", v, ok, i)
		}
	}
	if v, ok := f.get(99); !ok || v != -1 {
		t.Fatalf("last: %d, %v; want -1", v, ok)
	}
	if _, ok := f.get(99); ok {
		t.Fatal("an empty queue gave a value")
	}
}

// TestAppliedLists: the list of one Applied is the same slice for every
// caller that has it, another for another; no more than maxShared are
// kept, and a list handed out stays as it was.
func TestAppliedLists(t *testing.T) {
	t.Parallel()
	var s AppliedLists
	a := snapshot.Applied{Device: "sda", Dev: "8:0", Weight: 100}
	l1, l2 := s.Of(a), s.Of(a)
	if len(l1) != 1 || l1[0] != a || unsafe.SliceData(l1) != unsafe.SliceData(l2) {
		t.Fatalf("lists %v, %v: want one shared list of a", l1, l2)
	}
	b := a
	b.Weight = 50
	if lb := s.Of(b); len(lb) != 1 || lb[0] != b || unsafe.SliceData(lb) == unsafe.SliceData(l1) {
		t.Fatalf("list of b %v, want its own", lb)
	}
	for i := range maxShared + 1 {
		s.Of(snapshot.Applied{Device: "sda", Weight: i + 1000})
	}
	if len(s.m) > maxShared {
		t.Errorf("%d lists kept, want at most %d", len(s.m), maxShared)
	}
	if l1[0] != a {
		t.Errorf("a list handed out changed: %v", l1)
	}
}

package iolat

import (
	"slices"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestFreeSlot: bio_counts' slots are handed out in turn, a freed one last
// (a bio program that found its old key just before the key was deleted
// must not count into the slot's next key), and none when all are held.
func TestFreeSlot(t *testing.T) {
	t.Parallel()
	b := &Bios{used: make([]bool, 4)}
	var got []uint32
	take := func() {
		s, ok := b.freeSlot()
		if !ok {
			t.Fatalf("no free slot after %v", got)
		}
		b.used[s] = true
		got = append(got, s)
	}
	take()
	take()
	b.used[0] = false // freed: handed out after 2 and 3
	take()
	take()
	take()
	if want := []uint32{0, 1, 2, 3, 0}; !slices.Equal(got, want) {
		t.Errorf("slots handed out %v, want %v", got, want)
	}
	if s, ok := b.freeSlot(); ok {
		t.Errorf("all four held, freeSlot gave %d", s)
	}
}

// TestRealBiosShared: on this kernel the bio counters are read from the
// memory it shares (no system call a key), and one sensor hands out one
// Bios (its slots are the sensor's).
func TestRealBiosShared(t *testing.T) {
	testkit.NeedRoot(t)
	s, err := Open(Options{})
	testkit.Need(t, err == nil, "the I/O latency sensor cannot run here: %v", err)
	defer s.Close()
	b := s.Bios()
	if b.mem == nil {
		t.Error("bio_counts is not mapped: every read is a system call")
	}
	if s.Bios() != b {
		t.Error("a second Bios of the same sensor: two allocators of one table's slots")
	}
}

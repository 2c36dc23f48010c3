package sensor

import (
	"testing"
	"time"
)

// TestSeen: Active answers from the record made before the tick's
// BeginTick; a tick without a record knows no cgroup, one with an
// incomplete record only those it saw.
func TestSeen(t *testing.T) {
	t.Parallel()
	var s Seen
	s.BeginTick()
	if _, known := s.Active(7); known {
		t.Fatal("known before any record")
	}
	s.Reset()
	s.Saw(7)
	s.BeginTick()
	if a, k := s.Active(7); !a || !k {
		t.Fatalf("7 after a record that saw it: active %v known %v, want both", a, k)
	}
	if a, k := s.Active(8); a || !k {
		t.Fatalf("8 after a complete record without it: active %v known %v, want known idle", a, k)
	}
	// The next tick's record starts empty.
	s.Reset()
	s.BeginTick()
	if a, k := s.Active(7); a || !k {
		t.Fatalf("7 a tick later: active %v known %v, want known idle", a, k)
	}
	s.Reset()
	s.Saw(7)
	s.Incomplete()
	s.BeginTick()
	if a, k := s.Active(7); !a || !k {
		t.Fatalf("7 seen in an incomplete record: active %v known %v, want both", a, k)
	}
	if _, k := s.Active(8); k {
		t.Fatal("8 not seen in an incomplete record: known")
	}
	s.Reset()
	s.BeginTick()
	s.BeginTick() // no record for this tick (the read was skipped)
	if _, k := s.Active(8); k {
		t.Fatal("known on a tick without a record")
	}
}

// fixedActivity knows the cgroups in m (active or not), no other.
type fixedActivity map[uint64]bool

func (fixedActivity) BeginTick() {}
func (f fixedActivity) Active(ino uint64) (bool, bool) {
	a, ok := f[ino]
	return a, ok
}

// TestDueBackstops: a quiet workload's period grows to ActiveMaxPeriod;
// while the activity source knows its cgroup it is read at that period
// (or at once when active), and while it does not, at MaxPeriod again.
func TestDueBackstops(t *testing.T) {
	t.Parallel()
	act := fixedActivity{}
	s := &Sensor{MaxPeriod: 4, ActiveMaxPeriod: 32, Activity: act}
	s.BeginTick()
	c := s.NewCounters(0, false)
	now := time.Unix(100, 0)
	// Periods 1 (the first reading), 2, 4 (MaxPeriod: settled), then
	// straight to 32.
	for i, want := range []uint32{1, 2, 4, 32, 32} {
		now = now.Add(time.Second)
		rd := s.Take(c, now, 1, stat(0, 0))
		if c.period != want || rd.Settled != (want == 4) {
			t.Fatalf("reading %d: period %d settled %v, want %d", i, c.period, rd.Settled, want)
		}
	}
	count := func(ino uint64) int {
		n := 0
		for tick := uint64(0); tick < 64; tick++ {
			if s.Due(c, ino, tick) {
				n++
			}
		}
		return n
	}
	act[5] = false
	if n := count(5); n != 2 {
		t.Errorf("known, idle: due %d of 64 ticks, want 2 (period 32)", n)
	}
	if n := count(6); n != 16 {
		t.Errorf("unknown to the source: due %d of 64 ticks, want 16 (MaxPeriod 4)", n)
	}
	if n := count(0); n != 16 {
		t.Errorf("no inode: due %d of 64 ticks, want 16 (MaxPeriod 4)", n)
	}
	act[5] = true
	if n := count(5); n != 64 {
		t.Errorf("known, active: due %d of 64 ticks, want every one", n)
	}
	s.Activity = nil
	if n := count(5); n != 16 {
		t.Errorf("no source: due %d of 64 ticks, want 16 (MaxPeriod 4)", n)
	}
	// Without ActiveMaxPeriod the period stops at MaxPeriod.
	s2 := &Sensor{MaxPeriod: 4}
	c2 := s2.NewCounters(0, false)
	for i := 0; i < 10; i++ {
		s2.Take(c2, time.Unix(int64(200+i), 0), 1, stat(0, 0))
	}
	if c2.period != 4 {
		t.Errorf("period without ActiveMaxPeriod %d, want 4", c2.period)
	}
}

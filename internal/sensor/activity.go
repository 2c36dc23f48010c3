package sensor

// Activity says which cgroups did I/O, from a source cheaper than their
// counter files: an eBPF sensor's per-cgroup maps (internal/iolat), fed by the
// kernel at each request. It is the seam between the file path, which
// polls a quiet workload's counters every MaxPeriod ticks at most (and
// stays where BPF is not available), and such a source: a quiet workload
// that the source saw do I/O is read at the next tick instead of up to
// MaxPeriod-1 ticks later. With a source that sees every request the
// polling backstop can be stretched (a longer Options.QuietMax) without
// delaying anyone's charge.
//
// Cgroups are named by the inode number of their directory, which is the
// kernel's cgroup ID (kernfs node id) on both hierarchies: what a BPF
// program reads from a request's blkcg.
type Activity interface {
	// BeginTick starts a tick: Active answers for the time since the
	// previous BeginTick.
	BeginTick()
	// Active reports whether the cgroup with directory inode ino issued
	// or completed I/O since the previous tick; known is false when the
	// source cannot tell (an unknown cgroup, a device it does not see):
	// then the polling rule alone decides.
	Active(ino uint64) (active, known bool)
}

// Due reports whether c's counters are read at tick: when its polling
// period says so, or when the Activity source saw its cgroup (directory
// inode ino, 0 unknown) do I/O since the last tick. While the source knows
// the cgroup, the period may have grown up to ActiveMaxPeriod; while it
// does not (no source, an unknown cgroup, a tick whose record is
// incomplete), MaxPeriod bounds it again: the short backstop.
func (s *Sensor) Due(c *Counters, ino uint64, tick uint64) bool {
	if c.period <= 1 {
		return true
	}
	known := false
	if s.Activity != nil && ino != 0 {
		var active bool
		if active, known = s.Activity.Active(ino); known && active {
			return true
		}
	}
	p := c.period
	if !known {
		p = min(p, max(s.MaxPeriod, 1))
	}
	return (uint32(tick)+c.slot)%p == 0
}

// Seen is an Activity fed once per tick with the cgroups that did I/O (an
// eBPF sensor's per-tick deltas): Reset starts the record of the next
// tick, Saw adds a cgroup to it, Incomplete says it misses some (a failed
// read, requests the kernel could not count, activity not yet attributed);
// BeginTick makes it the record Active answers from. A tick without a
// record (no Reset since the last BeginTick) knows no cgroup; one with an
// incomplete record knows those it saw: for the others the polling rule
// alone decides.
type Seen struct {
	cur, next     map[uint64]struct{}
	curOK, nextOK bool
	recorded      bool
}

// Reset starts the next tick's record, complete until Incomplete.
func (s *Seen) Reset() {
	if s.next == nil {
		s.next, s.cur = map[uint64]struct{}{}, map[uint64]struct{}{}
	}
	clear(s.next)
	s.nextOK, s.recorded = true, true
}

// Saw adds the cgroup of directory inode ino to the next tick's record.
func (s *Seen) Saw(ino uint64) {
	if s.next != nil {
		s.next[ino] = struct{}{}
	}
}

// Incomplete marks the next tick's record as missing some activity.
func (s *Seen) Incomplete() { s.nextOK = false }

// BeginTick makes the record since the last Reset the one Active answers
// from.
func (s *Seen) BeginTick() {
	s.cur, s.next = s.next, s.cur
	s.curOK = s.recorded && s.nextOK
	s.recorded = false
	if s.next != nil {
		clear(s.next)
	}
}

// Complete reports whether the record Active answers from is complete (a
// Reset before the last BeginTick, and no Incomplete since).
func (s *Seen) Complete() bool { return s.curOK }

// Active reports whether the tick's record saw ino. Not seen is unknown
// when the record is missing or incomplete; seen is seen.
func (s *Seen) Active(ino uint64) (active, known bool) {
	if _, ok := s.cur[ino]; ok {
		return true, true
	}
	return false, s.curOK
}

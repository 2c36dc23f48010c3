package sensor

// Activity says which cgroups did I/O, from a source cheaper than their
// counter files: an eBPF sensor's per-cgroup maps (issue 19), fed by the
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
// inode ino, 0 unknown) do I/O since the last tick.
func (s *Sensor) Due(c *Counters, ino uint64, tick uint64) bool {
	if c.Due(tick) {
		return true
	}
	if s.Activity == nil || ino == 0 {
		return false
	}
	active, known := s.Activity.Active(ino)
	return known && active
}

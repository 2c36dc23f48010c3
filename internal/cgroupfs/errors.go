package cgroupfs

import (
	"errors"
	"fmt"
)

var (
	// ErrNotAvailable means a file that only exists when a kernel feature is
	// on (PSI, BFQ, iocost, a per-device weight) is absent: "no data", which
	// is neither an error reading it nor a zero.
	ErrNotAvailable = errors.New("not available")
	// ErrNoCgroupMounts means the mount table holds no cgroup filesystem.
	ErrNoCgroupMounts = errors.New("no cgroup filesystem mounted")
	// ErrNoIOHierarchy means neither v1 blkio nor cgroup2 is mounted.
	ErrNoIOHierarchy = errors.New("no I/O cgroup hierarchy")
	// ErrOutsideHierarchy means a cgroup name would resolve outside the
	// hierarchy it is meant to be in.
	ErrOutsideHierarchy = errors.New("path outside the cgroup hierarchy")
	// ErrCgroupGone means the cgroup directory no longer exists (its
	// container ended): a normal event, not a failure of the daemon.
	ErrCgroupGone = errors.New("cgroup gone")
	// ErrDeviceGone means a block device named by MAJ:MIN no longer exists
	// (a loop device detached, a disk unplugged since it was listed).
	ErrDeviceGone = errors.New("device gone")
)

// ParseError is a malformed line in a kernel-provided file.
type ParseError struct {
	File string // file name, e.g. "io.stat"
	Line int    // 1-based line number
	Text string // the offending line
	Msg  string // what was wrong
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("parse %s line %d %q: %s", e.File, e.Line, e.Text, e.Msg)
}

package cgroupfs

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ParseTaskState returns the state letter of /proc/<pid>/stat (or
// /proc/<pid>/task/<tid>/stat), proc(5):
//
//	1234 (comm) D 1 1234 ...
//
// comm may itself hold blanks and parentheses: the state is the field
// after the last ')'. 'D' is uninterruptible sleep (usually I/O).
func ParseTaskState(data []byte) (byte, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) || data[i+1] != ' ' {
		return 0, fmt.Errorf("task stat %q: no state after the command name", clip(data))
	}
	c := data[i+2]
	if c < 'A' || c > 'z' {
		return 0, fmt.Errorf("task stat %q: state %q is not a letter", clip(data), c)
	}
	return c, nil
}

// ParseProcsBlocked returns procs_blocked of /proc/stat, proc(5): the
// number of tasks blocked waiting for I/O to complete, host-wide (what
// /proc/loadavg does not say: it lumps them with the runnable ones).
//
//	procs_running 2
//	procs_blocked 0
func ParseProcsBlocked(data []byte) (uint64, error) {
	for len(data) > 0 {
		var line []byte
		line, data = nextLine(data)
		k, rest := nextField(line)
		if string(k) != "procs_blocked" {
			continue
		}
		v, _ := nextField(rest)
		n, ok := parseUint(v)
		if !ok {
			return 0, fmt.Errorf("/proc/stat procs_blocked %q: not a count", v)
		}
		return n, nil
	}
	return 0, fmt.Errorf("/proc/stat: no procs_blocked line: %w", ErrNotAvailable)
}

// ProcStat is procRoot/stat kept open (KeptFile), for procs_blocked
// every tick.
type ProcStat struct{ f *KeptFile }

// OpenProcStat opens procRoot/stat for repeated reads.
func OpenProcStat(procRoot string) (*ProcStat, error) {
	f, err := OpenKept(filepath.Join(procRoot, "stat"))
	if err != nil {
		return nil, err
	}
	return &ProcStat{f}, nil
}

// ProcsBlocked reads the file again and returns its procs_blocked: the
// host's tasks in uninterruptible sleep now.
func (p *ProcStat) ProcsBlocked() (uint64, error) {
	data, err := p.f.Read()
	if err != nil {
		return 0, err
	}
	return ParseProcsBlocked(data)
}

// Close releases the descriptor.
func (p *ProcStat) Close() error { return p.f.Close() }

// TaskCount is a cgroup's tasks in uninterruptible sleep out of those
// looked at.
type TaskCount struct {
	D, Seen int
	// Capped: the cgroup has more tasks than were looked at.
	Capped bool
}

// CountDState counts the tasks (threads: one thread of a process may wait
// on I/O while the others do not) of the cgroup in state D, reading at most
// max of them ("cgroup.threads" on v2, "tasks" on v1) through procRoot. A
// task that exits between the listing and its stat is skipped. buf is
// scratch for the listing (returned, to be passed again).
func (c *Cgroup) CountDState(procRoot string, max int, buf []byte) (TaskCount, []byte, error) {
	name := "tasks"
	if c.h.Version == 2 {
		name = "cgroup.threads"
	}
	p := filepath.Join(c.Dir(), name)
	// Raw system calls, no *os.File: a sample opens one file per task,
	// and os.Open's runtime-poller bookkeeping cost more than the read.
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return TaskCount{}, buf, fmt.Errorf("%s: %w", p, ErrCgroupGone)
		}
		return TaskCount{}, buf, fmt.Errorf("open %s: %w", p, err)
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	unix.Close(fd)
	var tc TaskCount
	var stat [512]byte
	pre := filepath.Join(procRoot, "x")
	pre = pre[:len(pre)-1]
	for rest := buf; len(rest) > 0; {
		var line []byte
		line, rest = nextLine(rest)
		if len(line) == 0 {
			continue
		}
		if tc.Seen >= max {
			tc.Capped = true
			break
		}
		if _, ok := parseUint(line); !ok {
			return tc, buf, fmt.Errorf("%s: task id %q: not a number", p, line)
		}
		sp := pre + string(line) + "/stat"
		sfd, err := unix.Open(sp, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // exited
		}
		n, rerr := unix.Read(sfd, stat[:])
		unix.Close(sfd)
		if rerr != nil {
			continue // exited
		}
		st, err := ParseTaskState(stat[:n])
		if err != nil {
			continue // exited mid-read (empty)
		}
		tc.Seen++
		if st == 'D' {
			tc.D++
		}
	}
	return tc, buf, nil
}

package host

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// ParseScheduler parses a block device's queue/scheduler file:
//
//	[none] mq-deadline kyber bfq        (blk-mq, no scheduler active)
//	none mq-deadline kyber [bfq]        (blk-mq, bfq active)
//	noop deadline [cfq]                 (legacy single-queue kernels < 5.0)
//	none                                (bio-based: dm, md; no choice)
//
// It returns the active (bracketed) scheduler and every offered one, in the
// kernel's order, without brackets. A file with a single unbracketed entry
// ("none" on a bio-based device) has that entry active. More than one
// bracketed entry, or a bracket that is not closed, is a *cgroupfs.ParseError.
func ParseScheduler(s string) (active string, offered []string, err error) {
	line := strings.TrimSpace(s)
	fields := strings.Fields(line)
	for _, f := range fields {
		open, closed := strings.HasPrefix(f, "["), strings.HasSuffix(f, "]")
		name := strings.TrimSuffix(strings.TrimPrefix(f, "["), "]")
		if open != closed || name == "" || strings.ContainsAny(name, "[]") {
			return "", nil, &cgroupfs.ParseError{File: "scheduler", Line: 1, Text: line, Msg: fmt.Sprintf("bad entry %q", f)}
		}
		if open {
			if active != "" {
				return "", nil, &cgroupfs.ParseError{File: "scheduler", Line: 1, Text: line, Msg: "more than one active scheduler"}
			}
			active = name
		}
		offered = append(offered, name)
	}
	if active == "" && len(offered) == 1 {
		active = offered[0]
	}
	return active, offered, nil
}

// Rlimit is one value of a resource limit. Unlimited is RLIM_INFINITY.
type Rlimit uint64

// Unlimited is the kernel's RLIM_INFINITY, printed as "unlimited".
const Unlimited = Rlimit(math.MaxUint64)

func (v Rlimit) String() string {
	if v == Unlimited {
		return "unlimited"
	}
	return strconv.FormatUint(uint64(v), 10)
}

// Limit is one row of /proc/<pid>/limits.
type Limit struct {
	Name       string // e.g. "Max open files"
	Soft, Hard Rlimit
	Unit       string // e.g. "files"; "" for some rows
}

// ParseLimits parses /proc/<pid>/limits (fs/proc/base.c, proc_pid_limits):
//
//	Limit                     Soft Limit           Hard Limit           Units
//	Max processes             96365                96365                processes
//	Max open files            1048576              1048576              files
//	Max realtime timeout      unlimited            unlimited            us
//
// The name is every word before the first value (names hold no digits); a
// value is a number or "unlimited". The header and blank lines are skipped;
// a row with a name but no two values is a *cgroupfs.ParseError.
func ParseLimits(r io.Reader) ([]Limit, error) {
	var out []Limit
	err := eachLine("limits", r, func(n int, line string) error {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] == "Limit" {
			return nil
		}
		i := 0
		for i < len(fields) && !isLimitValue(fields[i]) {
			i++
		}
		if i == 0 || i+2 > len(fields) || !isLimitValue(fields[i+1]) {
			return &cgroupfs.ParseError{File: "limits", Line: n, Text: line, Msg: "want: name, soft, hard[, unit]"}
		}
		l := Limit{Name: strings.Join(fields[:i], " ")}
		var err error
		if l.Soft, err = parseRlimit(fields[i]); err != nil {
			return &cgroupfs.ParseError{File: "limits", Line: n, Text: line, Msg: err.Error()}
		}
		if l.Hard, err = parseRlimit(fields[i+1]); err != nil {
			return &cgroupfs.ParseError{File: "limits", Line: n, Text: line, Msg: err.Error()}
		}
		l.Unit = strings.Join(fields[i+2:], " ")
		out = append(out, l)
		return nil
	})
	return out, err
}

// FindLimit returns the row named name, and whether it is present.
func FindLimit(ls []Limit, name string) (Limit, bool) {
	for _, l := range ls {
		if l.Name == name {
			return l, true
		}
	}
	return Limit{}, false
}

func isLimitValue(s string) bool {
	if s == "unlimited" {
		return true
	}
	return s != "" && s[0] >= '0' && s[0] <= '9'
}

func parseRlimit(s string) (Rlimit, error) {
	if s == "unlimited" {
		return Unlimited, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("value %q: %w", s, err)
	}
	return Rlimit(v), nil
}

// ParseSysctlInt parses a one-number file under /proc/sys, such as
// kernel/pid_max ("32768\n"). Surrounding white space is ignored; anything
// else than one base-10 integer is a *cgroupfs.ParseError.
func ParseSysctlInt(name string, r io.Reader) (int64, error) {
	b, err := io.ReadAll(io.LimitReader(r, 4097))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", name, err)
	}
	if len(b) > 4096 {
		return 0, &cgroupfs.ParseError{File: name, Line: 1, Msg: "longer than 4096 bytes"}
	}
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, &cgroupfs.ParseError{File: name, Line: 1, Text: s, Msg: "want one integer"}
	}
	return v, nil
}

// eachLine calls fn with every line (1-based numbers) of r, the file
// named file. A line longer than 1 MiB is a *cgroupfs.ParseError.
func eachLine(file string, r io.Reader, fn func(n int, line string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		if err := fn(n, sc.Text()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &cgroupfs.ParseError{File: file, Line: n + 1, Msg: "line too long"}
		}
		return fmt.Errorf("read %s: %w", file, err)
	}
	return nil
}

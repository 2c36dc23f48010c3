package cgroupfs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ProcCgroup is one line of /proc/<pid>/cgroup.
type ProcCgroup struct {
	ID          int
	Controllers []string // empty on the v2 line
	Path        string
}

// ParseProcCgroup parses /proc/<pid>/cgroup, one line per hierarchy the
// process belongs to (cgroups(7)):
//
//	hierarchy-ID:controller-list:cgroup-path
//	12:blkio:/docker/4f1c...e2
//	1:name=systemd:/docker/4f1c...e2
//	0::/system.slice/docker-4f1c...e2.scope
//
// On v1 the controller list names the hierarchy's controllers (comma
// separated, named hierarchies as "name=..."). The v2 line has ID 0 and an
// empty list; it is the only line on a pure v2 host. The path is relative to
// the reader's cgroup namespace and may itself contain ':' or '\r' (a cgroup's
// name may hold any byte but '/' and '\n'), so lines end at '\n' alone and a
// '\r' before it belongs to the path. Blank lines are skipped; anything else
// malformed is a *ParseError.
func ParseProcCgroup(r io.Reader) ([]ProcCgroup, error) {
	const file = "/proc/<pid>/cgroup"
	var out []ProcCgroup
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	sc.Split(scanNewlines)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return nil, &ParseError{File: file, Line: n, Text: line, Msg: "want hierarchy-ID:controllers:path"}
		}
		id, err := strconv.Atoi(parts[0])
		if err != nil || id < 0 {
			return nil, &ParseError{File: file, Line: n, Text: line, Msg: "hierarchy id is not a non-negative integer"}
		}
		if !strings.HasPrefix(parts[2], "/") {
			return nil, &ParseError{File: file, Line: n, Text: line, Msg: "cgroup path does not start with /"}
		}
		var ctls []string
		if parts[1] != "" {
			ctls = strings.Split(parts[1], ",")
		}
		out = append(out, ProcCgroup{ID: id, Controllers: ctls, Path: parts[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	return out, nil
}

// scanNewlines is bufio.ScanLines without its dropping of a '\r' before the
// '\n': in /proc/<pid>/cgroup that byte is part of a cgroup's name.
func scanNewlines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// ReadProcCgroup reads and parses <procRoot>/<pid>/cgroup.
func ReadProcCgroup(procRoot string, pid int) ([]ProcCgroup, error) {
	return ParseFile(filepath.Join(procRoot, strconv.Itoa(pid), "cgroup"), ParseProcCgroup)
}

// CgroupIn returns the path of the line for the v1 hierarchy that has
// controller (e.g. "blkio"), or of the v2 line (ID 0, no controllers) when
// controller is "".
func CgroupIn(lines []ProcCgroup, controller string) (string, bool) {
	for _, l := range lines {
		switch {
		case controller == "" && l.ID == 0 && len(l.Controllers) == 0:
			return l.Path, true
		case controller != "" && slices.Contains(l.Controllers, controller):
			return l.Path, true
		}
	}
	return "", false
}

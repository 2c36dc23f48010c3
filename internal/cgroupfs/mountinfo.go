package cgroupfs

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Mount is one line of a mountinfo file.
type Mount struct {
	ID, Parent int
	Dev        Dev    // st_dev of files on this mount
	Root       string // the mounted directory inside its filesystem, unescaped
	Mountpoint string // unescaped
	Options    string // per-mount options, e.g. "rw,relatime"
	Optional   []string
	FSType     string // e.g. "cgroup", "cgroup2", "ext4"
	Source     string // unescaped; may be "" (the kernel writes nothing)
	SuperOpts  string // per-superblock options, e.g. "rw,blkio"
}

// ParseMountLine parses one line of the mountinfo format of proc(5):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//	(1)(2)(3)   (4)   (5)      (6)      (7)   (8) (9)   (10)         (11)
//
// Field 7 is zero or more optional fields ended by a single "-". Fields are
// separated by exactly one space, and a field may be empty: a mount whose
// source is "" shows as "- cgroup  rw,blkio" (two spaces). So the line is cut
// at " - " and each side split on single spaces, never with strings.Fields,
// which would drop the empty source and take the super options for it. Spaces
// inside paths are escaped by the kernel (\040) and undone here.
func ParseMountLine(line string) (Mount, error) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return Mount{}, fmt.Errorf("no ' - ' separator")
	}
	f := strings.Split(pre, " ")
	if len(f) < 6 {
		return Mount{}, fmt.Errorf("%d fields before ' - ', want at least 6", len(f))
	}
	// The super options come last; old kernels could leave a space in them
	// (cifs "unc=//srv/My Docs"), so the third field takes the rest.
	g := strings.SplitN(post, " ", 3)
	if len(g) < 3 {
		return Mount{}, fmt.Errorf("%d fields after ' - ', want 3 (type, source, super options)", len(g))
	}
	var m Mount
	var err error
	if m.ID, err = strconv.Atoi(f[0]); err != nil || m.ID < 0 {
		return Mount{}, fmt.Errorf("mount ID %q is not a number", f[0])
	}
	if m.Parent, err = strconv.Atoi(f[1]); err != nil || m.Parent < 0 {
		return Mount{}, fmt.Errorf("parent ID %q is not a number", f[1])
	}
	if m.Dev, err = ParseDev(f[2]); err != nil {
		return Mount{}, err
	}
	if f[3] == "" || f[4] == "" || g[0] == "" {
		return Mount{}, fmt.Errorf("empty root, mount point or filesystem type")
	}
	m.Root = UnescapeMount(f[3])
	m.Mountpoint = UnescapeMount(f[4])
	m.Options = f[5]
	for _, o := range f[6:] {
		if o != "" {
			m.Optional = append(m.Optional, o)
		}
	}
	m.FSType = g[0]
	m.Source = UnescapeMount(g[1])
	m.SuperOpts = g[2]
	return m, nil
}

// ParseMounts parses a whole mountinfo file. Blank lines are skipped; any
// other line that ParseMountLine refuses fails the parse with a *ParseError
// naming the line.
func ParseMounts(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := ParseMountLine(line)
		if err != nil {
			return nil, &ParseError{File: "mountinfo", Line: lineNo, Text: line, Msg: err.Error()}
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return out, nil
}

// ReadMounts reads and parses a mountinfo file such as /proc/self/mountinfo.
func ReadMounts(path string) ([]Mount, error) { return ParseFile(path, ParseMounts) }

// UnescapeMount undoes the octal escapes (\040 for space, \011, \012, \134)
// that the kernel writes into mountinfo paths. A backslash not followed by
// three octal digits below \400 is kept as it is.
func UnescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			o := s[i+1 : i+4]
			if o[0] >= '0' && o[0] <= '3' && o[1] >= '0' && o[1] <= '7' && o[2] >= '0' && o[2] <= '7' {
				b.WriteByte((o[0]-'0')<<6 | (o[1]-'0')<<3 | (o[2] - '0'))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

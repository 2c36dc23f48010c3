package cgroupfs

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseMountLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line string
		want Mount
	}{
		{
			// proc(5)'s example.
			"36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
			Mount{ID: 36, Parent: 35, Dev: Dev{98, 0}, Root: "/mnt1", Mountpoint: "/mnt2", Options: "rw,noatime",
				Optional: []string{"master:1"}, FSType: "ext3", Source: "/dev/root", SuperOpts: "rw,errors=continue"},
		},
		{
			// An empty mount source: two spaces after the type. Seen on
			// hosts whose cgroup v1 hierarchies were mounted with source "".
			"38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime shared:15 - cgroup  rw,blkio",
			Mount{ID: 38, Parent: 31, Dev: Dev{0, 35}, Root: "/", Mountpoint: "/sys/fs/cgroup/blkio", Options: "rw,relatime",
				Optional: []string{"shared:15"}, FSType: "cgroup", Source: "", SuperOpts: "rw,blkio"},
		},
		{
			// No optional fields; escaped spaces, tab, newline and backslash.
			`40 22 0:50 /a\040b /tmp/x\011y\012z\134 rw - overlay over\040lay rw,lowerdir=/x`,
			Mount{ID: 40, Parent: 22, Dev: Dev{0, 50}, Root: "/a b", Mountpoint: "/tmp/x\ty\nz\\", Options: "rw",
				FSType: "overlay", Source: "over lay", SuperOpts: "rw,lowerdir=/x"},
		},
		{
			// Two optional fields; a space in the super options (old cifs).
			"70 22 0:60 / /mnt/share rw shared:40 master:2 - cifs //srv/My rw,unc=//srv/My Docs",
			Mount{ID: 70, Parent: 22, Dev: Dev{0, 60}, Root: "/", Mountpoint: "/mnt/share", Options: "rw",
				Optional: []string{"shared:40", "master:2"}, FSType: "cifs", Source: "//srv/My", SuperOpts: "rw,unc=//srv/My Docs"},
		},
	} {
		got, err := ParseMountLine(tc.line)
		if err != nil {
			t.Errorf("%q: %v", tc.line, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", tc.line, got, tc.want)
		}
	}
}

func TestParseMountLineRefusesShortLines(t *testing.T) {
	t.Parallel()
	for _, line := range []string{
		"garbage line",
		"38 31 0:35 / /sys/fs/cgroup/blkio rw - cgroup rw,blkio", // two fields after " - "
		"38 31 0:35 / /sys/fs/cgroup/blkio rw - cgroup",
		"38 31 0:35 / /sys/fs/cgroup/blkio - cgroup cgroup rw,blkio",  // five before
		"38 31 0:35 / /sys/fs/cgroup/blkio rw cgroup cgroup rw,blkio", // no separator
		"x 31 0:35 / /b rw - cgroup cgroup rw,blkio",
		"38 31 0-35 / /b rw - cgroup cgroup rw,blkio",
		"38 31 0:35 / /b rw -  cgroup rw,blkio", // empty type
	} {
		if m, err := ParseMountLine(line); err == nil {
			t.Errorf("%q accepted: %+v", line, m)
		}
		// In a file, the error names the line and its number.
		_, err := ParseMountInfo(strings.NewReader("41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n" + line + "\n"))
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Line != 2 || pe.Text != line || !strings.Contains(err.Error(), line) {
			t.Errorf("%q in a file: %v", line, err)
		}
	}
}

// On a hybrid host whose blkio mount has an empty source, blkio must stay
// the I/O hierarchy; split with strings.Fields it dropped out and the host
// looked like v2.
func TestParseMountInfoEmptySource(t *testing.T) {
	t.Parallel()
	text := "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup  rw,cpu,cpuacct\n" +
		"38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime shared:15 - cgroup  rw,blkio\n" +
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:4 - cgroup2  rw\n"
	l, err := ParseMountInfo(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if l.Mode != ModeHybrid {
		t.Fatalf("mode %s, want hybrid: %+v", l.Mode, l)
	}
	h, err := l.IOHierarchy()
	if err != nil || h != (Hierarchy{Version: 1, Mount: "/sys/fs/cgroup/blkio"}) {
		t.Fatalf("IOHierarchy = %+v, %v", h, err)
	}
	if m, ok := l.V1Controller("cpuacct"); !ok || !reflect.DeepEqual(m.Controllers, []string{"cpu", "cpuacct"}) {
		t.Fatalf("cpuacct = %+v %v", m, ok)
	}
}

func TestUnescapeMount(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/plain":       "/plain",
		`/a\040b`:      "/a b",
		`\134`:         `\`,
		`/x\0`:         `/x\0`,   // too short: kept
		`/x\400`:       `/x\400`, // above a byte: kept
		`/x\08a`:       `/x\08a`, // not octal: kept
		`\101\102\103`: "ABC",
	} {
		if got := UnescapeMount(in); got != want {
			t.Errorf("UnescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

package cgroupfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const id1 = "4f1c0a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e2"

func TestParseProcCgroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     []ProcCgroup
		ok       bool
	}{
		{"v2", "0::/system.slice/docker-" + id1 + ".scope\n",
			[]ProcCgroup{{ID: 0, Path: "/system.slice/docker-" + id1 + ".scope"}}, true},
		{"hybrid", "12:blkio:/docker/" + id1 + "\n3:cpu,cpuacct:/docker/" + id1 + "\n1:name=systemd:/docker/" + id1 + "\n0::/docker/" + id1 + "\n",
			[]ProcCgroup{
				{ID: 12, Controllers: []string{"blkio"}, Path: "/docker/" + id1},
				{ID: 3, Controllers: []string{"cpu", "cpuacct"}, Path: "/docker/" + id1},
				{ID: 1, Controllers: []string{"name=systemd"}, Path: "/docker/" + id1},
				{ID: 0, Path: "/docker/" + id1},
			}, true},
		{"blank lines and no final newline", "\n7:blkio:/\n\n0::/", []ProcCgroup{
			{ID: 7, Controllers: []string{"blkio"}, Path: "/"}, {ID: 0, Path: "/"}}, true},
		{"colon in path", "0::/a:b", []ProcCgroup{{ID: 0, Path: "/a:b"}}, true},
		{"carriage return in path", "7:blkio:/a\r\n0::/\r\r\n", []ProcCgroup{
			{ID: 7, Controllers: []string{"blkio"}, Path: "/a\r"}, {ID: 0, Path: "/\r\r"}}, true},
		{"outside namespace", "0::/../../x", []ProcCgroup{{ID: 0, Path: "/../../x"}}, true},
		{"empty", "", nil, true},
		{"two fields", "7:blkio\n", nil, false},
		{"bad id", "x:blkio:/\n", nil, false},
		{"negative id", "-1:blkio:/\n", nil, false},
		{"relative path", "7:blkio:docker\n", nil, false},
		{"empty path", "0::\n", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseProcCgroup(strings.NewReader(tc.in))
			if (err == nil) != tc.ok {
				t.Fatalf("error = %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("error %v is not a *ParseError", err)
				}
				return
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if g.ID != w.ID || g.Path != w.Path || strings.Join(g.Controllers, ",") != strings.Join(w.Controllers, ",") {
					t.Errorf("line %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestReadProcCgroupAndCgroupIn(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "42"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "42", "cgroup"), []byte(
		"12:cpu,cpuacct:/docker/abc\n4:blkio:/docker/abc\n\n1:name=systemd:/sd\n0::/system.slice/docker-abc.scope\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lines, err := ReadProcCgroup(proc, 42)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ ctrl, want string }{
		{"blkio", "/docker/abc"}, {"", "/system.slice/docker-abc.scope"}, {"cpu", "/docker/abc"}, {"name=systemd", "/sd"},
	} {
		if got, ok := CgroupIn(lines, tc.ctrl); !ok || got != tc.want {
			t.Errorf("CgroupIn(%q) = %q, %v; want %q", tc.ctrl, got, ok, tc.want)
		}
	}
	if got, ok := CgroupIn(lines, "memory"); ok {
		t.Errorf("CgroupIn(memory) = %q: no such line", got)
	}
	// A pure v1 host has no v2 line.
	if got, ok := CgroupIn(lines[:2], ""); ok {
		t.Errorf("CgroupIn(\"\") on v1 lines = %q", got)
	}
	if _, err := ReadProcCgroup(proc, 43); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing process: %v", err)
	}
	if err := os.WriteFile(filepath.Join(proc, "42", "cgroup"), []byte("0::/ok\nbroken\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var pe *ParseError
	if _, err := ReadProcCgroup(proc, 42); !errors.As(err, &pe) || pe.Line != 2 || !strings.Contains(err.Error(), filepath.Join(proc, "42", "cgroup")) {
		t.Errorf("malformed: %v", err)
	}
}

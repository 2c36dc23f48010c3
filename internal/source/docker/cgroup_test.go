package docker

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

const (
	id1 = "4f1c0d3e2b1a09f8e7d6c5b4a3928170615f4e3d2c1b0a9f8e7d6c5b4a392817"
	id2 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

func TestExpandSlice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"-.slice", "/", true},
		{"system.slice", "/system.slice", true},
		{"a-b.slice", "/a.slice/a-b.slice", true},
		{"kubepods-burstable-pod1.slice", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice", true},
		{"machine.slice", "/machine.slice", true},
		{"", "", false},
		{".slice", "", false},
		{"system", "", false},
		{"a--b.slice", "", false},
		{"-a.slice", "", false},
		{"a-.slice", "", false},
		{"a/b.slice", "", false},
		{"../x.slice", "", false},
		{"/system.slice", "", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := ExpandSlice(tc.in)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("ExpandSlice(%q) = %q, %v; want %q, ok=%v", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}

// TestComputeCgroup covers both drivers with and without a cgroup parent.
// The layout (v1, v2, hybrid) does not enter the computation: the same
// relative path is used inside whichever hierarchy carries block I/O;
// TestResolve covers the layouts.
func TestComputeCgroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, driver, parent, id, want string
		ok                             bool
	}{
		{"cgroupfs default", DriverCgroupfs, "", id1, "/docker/" + id1, true},
		{"cgroupfs parent", DriverCgroupfs, "/lxc/tenant", id1, "/lxc/tenant/" + id1, true},
		{"cgroupfs relative parent", DriverCgroupfs, "tenant", id1, "/tenant/" + id1, true},
		{"cgroupfs parent cannot escape", DriverCgroupfs, "/../../etc", id1, "/etc/" + id1, true},
		{"cgroupfs trailing slash", DriverCgroupfs, "/x/", id1, "/x/" + id1, true},
		{"systemd default", DriverSystemd, "", id1, "/system.slice/docker-" + id1 + ".scope", true},
		{"systemd nested slice", DriverSystemd, "a-b.slice", id1, "/a.slice/a-b.slice/docker-" + id1 + ".scope", true},
		{"systemd root slice", DriverSystemd, "-.slice", id1, "/docker-" + id1 + ".scope", true},
		{"systemd parent not a slice", DriverSystemd, "/docker", id1, "", false},
		{"unknown driver", "none", "", id1, "", false},
		{"empty driver", "", "", id1, "", false},
		{"empty id", DriverCgroupfs, "", "", "", false},
		{"id with slash", DriverCgroupfs, "", "../x", "", false},
		{"id dot-dot", DriverSystemd, "", "..", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ComputeCgroup(tc.driver, tc.parent, tc.id)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("ComputeCgroup(%q, %q, %q) = %q, %v; want %q, ok=%v", tc.driver, tc.parent, tc.id, got, err, tc.want, tc.ok)
			}
		})
	}
}

func FuzzParseProcCgroup(f *testing.F) {
	for _, s := range []string{
		"0::/\n",
		"12:blkio:/docker/" + id1 + "\n0::/\n",
		"1:name=systemd:/system.slice/docker-" + id1 + ".scope\n",
		"\n\n:::\n",
		"7:blkio:/a:b:c",
		"0::/docker/" + id1 + "/init\n",
		"0::/../" + id1 + "\n",
		"4:blkio://" + id1 + "//x\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		lines, err := cgroupfs.ParseProcCgroup(strings.NewReader(in))
		if err != nil {
			var pe *cgroupfs.ParseError
			if !errors.As(err, &pe) && !strings.Contains(err.Error(), "token too long") {
				t.Fatalf("error %v is neither a *ParseError nor a read error", err)
			}
			return
		}
		for _, l := range lines {
			if l.ID < 0 || !strings.HasPrefix(l.Path, "/") {
				t.Fatalf("accepted bad line %+v", l)
			}
		}
		// Whatever the file says, the container's part of a path names the
		// container, never walks up, and is a prefix of the path.
		for _, v := range []int{1, 2} {
			p, ok := ioLine(lines, v)
			if !ok {
				continue
			}
			cp, ok := containerPart(p, id1)
			if !ok {
				continue
			}
			if !strings.HasPrefix(cp, "/") || !strings.Contains(cp, id1) ||
				slices.Contains(strings.Split(cp, "/"), "..") ||
				!strings.HasPrefix(strings.Trim(p, "/")+"/", strings.TrimPrefix(cp, "/")+"/") {
				t.Fatalf("containerPart(%q) = %q", p, cp)
			}
		}
	})
}

// writeProc writes <procfs>/<pid>/cgroup.
func writeProc(t *testing.T, procfs string, pid int, content string) {
	t.Helper()
	dir := filepath.Join(procfs, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// hybrid and v1 files as a container's main process shows them.
func v1File(p string) string {
	return "12:blkio:" + p + "\n11:memory:" + p + "\n1:name=systemd:" + p + "\n"
}
func hybridFile(p string) string { return v1File(p) + "0::" + p + "\n" }
func v2File(p string) string     { return "0::" + p + "\n" }

// TestResolve covers every driver × layout, the fallback to the
// configuration when /proc cannot tell, and a non-root mount.
func TestResolve(t *testing.T) {
	t.Parallel()
	fsPath := "/docker/" + id1
	sdPath := "/system.slice/docker-" + id1 + ".scope"
	for _, tc := range []struct {
		name    string
		version int
		root    string
		file    string // "" = no /proc/<pid>/cgroup
		driver  string
		parent  string
		want    string
		how     string
		ok      bool
	}{
		{"v1 cgroupfs", 1, "/", v1File(fsPath), DriverCgroupfs, "", fsPath, "proc", true},
		{"v1 systemd", 1, "/", v1File(sdPath), DriverSystemd, "", sdPath, "proc", true},
		{"hybrid cgroupfs", 1, "/", hybridFile(fsPath), DriverCgroupfs, "", fsPath, "proc", true},
		{"hybrid systemd", 1, "/", hybridFile(sdPath), DriverSystemd, "", sdPath, "proc", true},
		{"v2 cgroupfs", 2, "/", v2File(fsPath), DriverCgroupfs, "", fsPath, "proc", true},
		{"v2 systemd", 2, "/", v2File(sdPath), DriverSystemd, "", sdPath, "proc", true},
		// Hybrid where the v2 line differs: blkio's line wins.
		{"hybrid uses blkio line", 1, "/", "12:blkio:" + fsPath + "\n0::/other/" + id1 + "\n", DriverCgroupfs, "", fsPath, "proc", true},
		// An engine-wide --cgroup-parent is invisible in inspect; /proc knows.
		{"engine cgroup-parent", 1, "/", v1File("/tenants/" + id1), DriverCgroupfs, "", "/tenants/" + id1, "proc", true},
		{"main pid in a child", 2, "/", v2File(fsPath + "/init"), DriverCgroupfs, "", fsPath, "proc", true},
		{"mount root stripped", 1, "/host", v1File("/host" + fsPath), DriverCgroupfs, "", fsPath, "proc", true},
		// Fallbacks to the configuration.
		{"no proc file cgroupfs", 1, "/", "", DriverCgroupfs, "/lxc", "/lxc/" + id1, "config", true},
		{"no proc file systemd", 2, "/", "", DriverSystemd, "a-b.slice", "/a.slice/a-b.slice/docker-" + id1 + ".scope", "config", true},
		{"pid reused by another process", 1, "/", v1File("/user.slice"), DriverCgroupfs, "", fsPath, "config", true},
		{"no blkio line on v1", 1, "/", v2File(fsPath), DriverCgroupfs, "", fsPath, "config", true},
		{"no v2 line on v2", 2, "/", "12:blkio:" + sdPath + "\n", DriverSystemd, "", sdPath, "config", true},
		{"outside cgroup namespace", 2, "/", v2File("/../" + id1), DriverCgroupfs, "", fsPath, "config", true},
		{"outside mount root", 1, "/host", v1File(fsPath), DriverCgroupfs, "", fsPath, "config", true},
		{"malformed proc file", 1, "/", "garbage\n", DriverCgroupfs, "", fsPath, "config", true},
		{"nothing works", 1, "/", "", "none", "", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			procfs := t.TempDir()
			const pid = 4242
			if tc.file != "" {
				writeProc(t, procfs, pid, tc.file)
			}
			r := resolver{procfs: procfs, version: tc.version, root: tc.root}
			got, how, err := r.resolve(id1, pid, tc.driver, tc.parent)
			if (err == nil) != tc.ok || got != tc.want || how != tc.how {
				t.Fatalf("resolve = %q, %q, %v; want %q, %q, ok=%v", got, how, err, tc.want, tc.how, tc.ok)
			}
			if !tc.ok && !errors.Is(err, ErrUnresolved) {
				t.Errorf("error %v does not wrap ErrUnresolved", err)
			}
		})
	}
}

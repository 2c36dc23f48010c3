package state

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/policy"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "state.json")
	if f, err := Load(path); err != nil || len(f.Originals) != 0 {
		t.Fatalf("missing file: %+v %v", f, err)
	}
	in := File{
		Written:          time.Unix(100, 0).UTC(),
		HierarchyVersion: 1, HierarchyMount: "/sys/fs/cgroup/blkio",
		Originals: []actuate.Original{{Cgroup: "/docker/a", Knob: "bfq", Dev: cgroupfs.Dev{Major: 7}, DevStr: "7:0", Value: "300"}},
		Workloads: []Workload{{Cgroup: "/docker/a", View: policy.View{ID: "a", Level: policy.Level3, BytesInLevel: 5}}},
	}
	if err := Save(path, in); err != nil {
		t.Fatal(err)
	}
	out, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if out.Originals[0] != in.Originals[0] || out.Workloads[0].View.Level != policy.Level3 || out.HierarchyMount != in.HierarchyMount {
		t.Fatalf("round trip: %+v", out)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
}

func TestLoadRejectsCorruptAndFutureFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{not json"), 0o600)
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("corrupt file: %v", err)
	}
	future := filepath.Join(dir, "future.json")
	os.WriteFile(future, []byte(`{"version": 99}`), 0o600)
	if _, err := Load(future); err == nil || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("future version: %v", err)
	}
}

// TestNamesLossless: cgroup names and IDs that are not valid UTF-8 (JSON
// strings would turn their bytes into U+FFFD) come back byte for byte, as
// do inodes; valid ones stay plain strings in the file.
func TestNamesLossless(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.json")
	bad := "/lxc/caf\xe9 \xff\n.."
	in := File{HierarchyVersion: 1, HierarchyMount: "/sys/fs/cgroup/blkio",
		Originals: []actuate.Original{
			{Cgroup: bad, Knob: "bfq", Dev: cgroupfs.Dev{Major: 7, Minor: 3}, DevStr: "7:3", Value: "300"},
			{Cgroup: "/lxc/plain", Knob: "throttle", Dev: cgroupfs.Dev{Major: 8}, DevStr: "8:0", Value: "rbps=5 wbps=max riops=max wiops=max"},
		},
		Workloads: []Workload{{Cgroup: bad, View: policy.View{ID: bad, Level: policy.Level4}}},
		Inodes:    map[string]uint64{bad: 4242, "/lxc/plain": 7},
	}
	if err := Save(path, in); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `"cgroup":"/lxc/plain"`) || !strings.Contains(string(data), `"base64":`) {
		t.Fatalf("names not stored as expected:\n%s", data)
	}
	out, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Originals) != 2 || out.Originals[0] != in.Originals[0] || out.Originals[1] != in.Originals[1] {
		t.Fatalf("originals: got %+v, want %+v", out.Originals, in.Originals)
	}
	if out.Workloads[0].Cgroup != bad || out.Workloads[0].View.ID != bad || out.Workloads[0].View.Level != policy.Level4 {
		t.Fatalf("workload: got %+v", out.Workloads[0])
	}
	if out.Inodes[bad] != 4242 || out.Inodes["/lxc/plain"] != 7 {
		t.Fatalf("inodes: %v", out.Inodes)
	}
}

// TestLoadVersion1: files of the previous format are still adopted.
func TestLoadVersion1(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.json")
	v1 := `{"version": 1, "written": "2026-01-02T03:04:05Z", "hierarchy_version": 1, "hierarchy_mount": "/sys/fs/cgroup/blkio",
  "originals": [{"cgroup": "/docker/a", "knob": "bfq", "dev": "7:0", "had": true, "native": 300,
                 "limits": {"RBps": 0, "WBps": 0, "RIOps": 0, "WIOps": 0}}],
  "workloads": [{"cgroup": "/docker/a", "view": {"id": "a", "level": 3, "bytes_in_level": 5, "allowance": 0, "weight": 250}}]}`
	os.WriteFile(path, []byte(v1), 0o600)
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := actuate.Original{Cgroup: "/docker/a", Knob: "bfq", Dev: cgroupfs.Dev{Major: 7}, DevStr: "7:0", Value: "300"}
	if f.Version != 1 || len(f.Originals) != 1 || f.Originals[0] != want || f.Workloads[0].View.ID != "a" ||
		f.Workloads[0].View.Level != policy.Level3 || f.HierarchyMount != "/sys/fs/cgroup/blkio" {
		t.Fatalf("version 1 file read as %+v", f)
	}
}

// TestLoadRefusesBadFiles: every malformed file is refused with an error
// naming it, never half-adopted.
func TestLoadRefusesBadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := Save(good, File{Originals: []actuate.Original{{Cgroup: "/a", Knob: "bfq", DevStr: "7:0", Value: "1"}}}); err != nil {
		t.Fatal(err)
	}
	whole, _ := os.ReadFile(good)
	for _, c := range []struct{ name, body, want string }{
		{"truncated", string(whole[:len(whole)/2]), "corrupt"},
		{"empty", "", "corrupt"},
		{"not an object", "[1]", "corrupt"},
		{"trailing data", string(whole) + "{}", "corrupt"},
		{"no version", `{"originals": []}`, "corrupt"},
		{"bad device", `{"version": 2, "originals": [{"cgroup": "/a", "knob": "bfq", "dev": "x"}]}`, "corrupt"},
		{"bad base64", `{"version": 2, "originals": [{"cgroup": {"base64": "!!"}, "knob": "bfq", "dev": "7:0"}]}`, "corrupt"},
		{"version 0", `{"version": 0}`, "version 0"},
		{"version 4", `{"version": 4}`, "version 4"},
	} {
		path := filepath.Join(dir, c.name+".json")
		os.WriteFile(path, []byte(c.body), 0o600)
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s and saying %q", c.name, err, path, c.want)
		}
	}
	huge := filepath.Join(dir, "huge.json")
	fh, _ := os.Create(huge)
	fh.Truncate(MaxSize + 1) // sparse: no disk used
	fh.Close()
	if _, err := Load(huge); err == nil || !strings.Contains(err.Error(), huge) || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("oversized file: %v", err)
	}
}

// TestLoadVersion2: a file the previous version wrote (testdata, kept as
// it was) is adopted with every original's value as its mechanism's text —
// a weight's entry, the throttle's limits, none, Docker's weight — and
// saved again as the current version, which reads back the same.
func TestLoadVersion2(t *testing.T) {
	t.Parallel()
	f, err := Load(filepath.Join("testdata", "state-v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	dev73, dev80 := cgroupfs.Dev{Major: 7, Minor: 3}, cgroupfs.Dev{Major: 8}
	want := []actuate.Original{
		{Cgroup: "/docker/aaa", Knob: "bfq", Dev: dev73, DevStr: "7:3", Value: "300"},
		{Cgroup: "/docker/aaa", Knob: "throttle", Dev: dev73, DevStr: "7:3", Value: "rbps=1048576 wbps=max riops=max wiops=120"},
		{Cgroup: "/docker/bbb", Knob: "bfq", Dev: dev73, DevStr: "7:3"},
		{Cgroup: "/docker/bbb", Knob: "throttle", Dev: dev73, DevStr: "7:3"},
		{Cgroup: "/lxc/caf\xe9", Knob: "cfq", Dev: dev80, DevStr: "8:0", Value: "500"},
		{Cgroup: "0123456789ab", Knob: "docker-blkio-weight", Value: "600"},
	}
	if f.Version != 2 || !slices.Equal(f.Originals, want) {
		t.Fatalf("version %d, originals\n%+v\nwant\n%+v", f.Version, f.Originals, want)
	}
	if len(f.Workloads) != 1 || f.Workloads[0].View.ID != "aaa" || f.Workloads[0].View.Level != policy.Level3 ||
		f.Inodes["/docker/aaa"] != 4101 || f.Inodes["/lxc/caf\xe9"] != 4103 {
		t.Fatalf("workloads %+v, inodes %v", f.Workloads, f.Inodes)
	}
	path := filepath.Join(t.TempDir(), "state.json")
	if err := Save(path, f); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `"version":3`) || strings.Contains(string(data), `"had"`) ||
		!strings.Contains(string(data), `"value":"rbps=1048576 wbps=max riops=max wiops=120"`) {
		t.Fatalf("saved again as:\n%s", data)
	}
	again, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if again.Version != Version || !slices.Equal(again.Originals, want) {
		t.Fatalf("read back as version %d: %+v", again.Version, again.Originals)
	}
}

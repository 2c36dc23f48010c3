package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
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
		Originals: []actuate.Original{{Cgroup: "/docker/a", Knob: "bfq", DevStr: "7:0", Had: true, Native: 300}},
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

package iolat

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestGeneratedCurrent compiles iolat.c again as `go generate` does, into a
// temporary directory, and fails when the committed object or its Go file
// differ: the C source changed and `go generate ./internal/iolat` was not
// run (or ran with another clang: the message names the one used here).
func TestGeneratedCurrent(t *testing.T) {
	for _, tool := range []string{"clang", "llvm-strip"} {
		_, err := exec.LookPath(tool)
		testkit.Need(t, err == nil, "%s not found (apt-get install clang llvm): it compiles iolat.c", tool)
	}
	goBin, err := exec.LookPath("go")
	testkit.Need(t, err == nil, "go not found in PATH: it runs bpf2go")
	dir := t.TempDir()
	cmd := exec.Command(goBin, "tool", "bpf2go", "-target", "bpfel", "-no-global-types", "-output-dir", dir, "iolat", "iolat.c")
	cmd.Env = append(os.Environ(), "GOPACKAGE=iolat")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bpf2go: %v\n%s", err, out)
	}
	version, _ := exec.Command("clang", "--version").Output()
	first, _, _ := strings.Cut(string(version), "\n")
	for _, f := range []string{"iolat_bpfel.o", "iolat_bpfel.go"} {
		fresh, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fresh, committed) {
			t.Errorf("%s is stale: iolat.c compiles to something else now (%s); run `go generate ./internal/iolat` and commit", f, first)
		}
	}
}

// TestLayout: the Go mirrors of iolat.c's key and value have the sizes of
// the C structs in the committed object, and its histogram as many buckets.
func TestLayout(t *testing.T) {
	t.Parallel()
	spec, err := loadIolat()
	if err != nil {
		t.Fatal(err)
	}
	m := spec.Maps["aggregates"]
	if m == nil {
		t.Fatal("no map aggregates in the object")
	}
	if k, v := binary.Size(rawKey{}), binary.Size(rawValue{}); int(m.KeySize) != k || int(m.ValueSize) != v {
		t.Errorf("aggregates: C key %d B, value %d B; Go rawKey %d B, rawValue %d B", m.KeySize, m.ValueSize, k, v)
	}
	if m.MaxEntries != DefaultMaxKeys {
		t.Errorf("aggregates: max_entries %d in iolat.c, DefaultMaxKeys %d", m.MaxEntries, DefaultMaxKeys)
	}
	b := spec.Maps["bios"]
	if b == nil {
		t.Fatal("no map bios in the object")
	}
	if k := binary.Size(bioKey{}); int(b.KeySize) != k || b.ValueSize != 4 {
		t.Errorf("bios: C key %d B, value %d B; Go bioKey %d B, a slot 4 B", b.KeySize, b.ValueSize, k)
	}
	c := spec.Maps["bio_counts"]
	if c == nil {
		t.Fatal("no map bio_counts in the object")
	}
	if v := binary.Size(bioValue{}); int(c.ValueSize) != v || v != bioValueSize || c.MaxEntries != b.MaxEntries {
		t.Errorf("bio_counts: C value %d B, %d slots; Go bioValue %d B (stride %d), bios %d keys",
			c.ValueSize, c.MaxEntries, v, bioValueSize, b.MaxEntries)
	}
	for _, p := range []string{"on_issue", "on_requeue", "on_complete", "on_bio"} {
		if spec.Programs[p] == nil {
			t.Errorf("no program %s in the object", p)
		}
	}
}

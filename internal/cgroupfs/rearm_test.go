package cgroupfs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRearmLimits: one file written, the first whose limit is set (v1), or
// the io.max line (v2), whatever it holds now; the zero Limits is refused
// with nothing written.
func TestRearmLimits(t *testing.T) {
	t.Parallel()
	dev := Dev{Major: 7, Minor: 3}
	newTree := func(t *testing.T, files ...string) (Hierarchy, string) {
		root := t.TempDir()
		dir := filepath.Join(root, "cg")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("stale\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return Hierarchy{Version: 1, Mount: root}, dir
	}
	read := func(t *testing.T, p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range []struct {
		name string
		l    Limits
		file string
		want string
	}{
		{"bytes: read_bps", Limits{RBps: 100, WBps: 200, RIOps: 5, WIOps: 6}, "blkio.throttle.read_bps_device", "7:3 100"},
		{"write bytes alone: write_bps", Limits{WBps: 200}, "blkio.throttle.write_bps_device", "7:3 200"},
		{"IOPS alone (a ceiling): read_iops", Limits{RIOps: 5, WIOps: 5}, "blkio.throttle.read_iops_device", "7:3 5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, dir := newTree(t, v1LimitFiles[:]...)
			if err := h.RearmLimits("/cg", dev, c.l); err != nil {
				t.Fatal(err)
			}
			for _, f := range v1LimitFiles {
				got, want := read(t, filepath.Join(dir, f)), "stale\n"
				if f == c.file {
					want = c.want
				}
				if got != want {
					t.Errorf("%s: %q, want %q", f, got, want)
				}
			}
		})
	}
	h, dir := newTree(t, v1LimitFiles[:]...)
	if err := h.RearmLimits("/cg", dev, Limits{}); err == nil {
		t.Fatal("the zero Limits re-armed, want an error")
	}
	for _, f := range v1LimitFiles {
		if got := read(t, filepath.Join(dir, f)); got != "stale\n" {
			t.Errorf("%s written (%q) by a refused re-arm", f, got)
		}
	}
	h, dir = newTree(t, "io.max")
	h.Version = 2
	if err := h.RearmLimits("/cg", dev, Limits{RBps: 100, RIOps: 5}); err != nil {
		t.Fatal(err)
	}
	if got, want := read(t, filepath.Join(dir, "io.max")), "7:3 rbps=100 wbps=max riops=5 wiops=max"; got != want {
		t.Errorf("io.max: %q, want %q", got, want)
	}
}

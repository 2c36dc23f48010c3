package devhealth

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
)

// TestWatchStep: a device without a sensor is not watched; the first Step
// only reads, the second has a sample whose counters the snapshot shows;
// a read that starts failing is counted once; a device that cannot be held
// has no hold, and no Step changes a ceiling.
func TestWatchStep(t *testing.T) {
	t.Parallel()
	sys := t.TempDir()
	stat := func(reads uint64) {
		t.Helper()
		dir := filepath.Join(sys, "class", "block", "sda")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		line := []byte("    " + strconv.FormatUint(reads, 10) + " 0 " + strconv.FormatUint(8*reads, 10) + " 10 0 0 0 0 0 10 10 0 0 0 0\n")
		if err := os.WriteFile(filepath.Join(dir, "stat"), line, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat(100)
	sen, err := devsensor.Open(sys, "sda", time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWatch([]Device{
		{Name: "sda", Dev: cgroupfs.Dev{Major: 8}, Sensor: sen},
		{Name: "sdb", Dev: cgroupfs.Dev{Major: 8, Minor: 16}, Holdable: true},
	}, HoldConfig{Below: 0.2, FromLevel: 2}, slog.New(slog.DiscardHandler))
	if w.Len() != 1 || !w.Has("sda") || w.Has("sdb") {
		t.Fatalf("watched %d, sda %v, sdb %v; want sda alone", w.Len(), w.Has("sda"), w.Has("sdb"))
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, reads := range []uint64{100, 300} {
		stat(reads)
		if failed, holds := w.Step(t0.Add(time.Duration(i) * time.Second)); failed != 0 || len(holds) != 0 {
			t.Fatalf("step %d: %d failed, holds %v", i, failed, holds)
		}
	}
	devs := w.Devices(nil)
	if len(devs) != 1 || devs[0].Name != "sda" || devs[0].Dev != "8:0" || devs[0].ReadIOs != 300 || devs[0].Hold != nil {
		t.Fatalf("devices %+v", devs)
	}
	sen.Close()
	for i := range 2 {
		if failed, _ := w.Step(t0.Add(time.Duration(2+i) * time.Second)); failed != i^1 {
			t.Fatalf("read failing, step %d: %d failed, want %d", i, failed, i^1)
		}
	}
}

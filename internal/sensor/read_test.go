package sensor

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// TestReadCountsEveryFourth: on v1 a busy workload's serviced counts (a
// file of their own) are read at its first reading and then at every
// IOCountsEvery-th, its bytes at every reading; a quiet workload that wakes
// has its counts read at once.
func TestReadCountsEveryFourth(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "w")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(mib, ios uint64) {
		t.Helper()
		for name, v := range map[string]uint64{"blkio.throttle.io_service_bytes_recursive": mib << 20, "blkio.throttle.io_serviced_recursive": ios} {
			body := fmt.Sprintf("7:1 Read %d\n7:1 Write 0\n7:1 Total %d\nTotal %d\n", v, v, v)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, 0)
	h := cgroupfs.Hierarchy{Version: 1, Mount: root}
	cg, err := h.Open("w")
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	s := &Sensor{Devices: []cgroupfs.Dev{devA}, MaxPeriod: 4}
	s.BeginTick()
	c := s.NewCounters(0, true)
	now := time.Unix(100, 0)
	// Reading i sees i MiB in 10*i requests.
	var got []uint64
	for i := uint64(0); i <= 9; i++ {
		write(i, 10*i)
		if _, err := s.Read(c, cg, now.Add(time.Duration(i)*time.Second), 1); err != nil {
			t.Fatal(err)
		}
		if c.RBytes != i<<20 {
			t.Fatalf("reading %d: %d bytes, want %d MiB (bytes at every reading)", i, c.RBytes, i)
		}
		got = append(got, c.RIOs)
	}
	// Counts read at readings 0, 4 and 8 (the first and every fourth after).
	want := []uint64{0, 0, 0, 0, 40, 40, 40, 40, 80, 80}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_ios after each reading %v, want %v", got, want)
	}
	// Quiet: the bytes stand still, the period grows, and the first
	// reading at a longer period reads the counts the moving bytes left
	// stale.
	for i := 10; i < 13; i++ {
		if _, err := s.Read(c, cg, now.Add(time.Duration(i)*time.Second), 1); err != nil {
			t.Fatal(err)
		}
	}
	if c.RIOs != 90 || c.period == 1 {
		t.Fatalf("quiet: read_ios %d period %d, want 90 and backed off", c.RIOs, c.period)
	}
	// It wakes: the first reading that sees bytes has the counts too.
	write(12, 125)
	if _, err := s.Read(c, cg, now.Add(20*time.Second), 1); err != nil {
		t.Fatal(err)
	}
	if c.RBytes != 12<<20 || c.RIOs != 125 {
		t.Fatalf("woken: %d bytes in %d requests, want 12 MiB in 125", c.RBytes, c.RIOs)
	}
}

package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

// TestDetailKeptThroughStillTicks: a v1 workload's serviced-counts
// descriptor is kept while its bytes move and through a still tick or two
// (a paced or capped stream has them: closing and reopening the file each
// time cost an open, a close and three allocations per flip), and given
// back once it has stood still long enough to be polled least often.
func TestDetailKeptThroughStillTicks(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	dir := filepath.Join(mount, "w")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(b uint64) {
		t.Helper()
		for name, v := range map[string]uint64{"blkio.throttle.io_service_bytes_recursive": b, "blkio.throttle.io_serviced_recursive": b / 4096} {
			body := fmt.Sprintf("8:0 Read %d\n8:0 Write 0\n8:0 Total %d\nTotal %d\n", v, v, v)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := New(Options{
		Hierarchy: cgroupfs.Hierarchy{Version: 1, Mount: mount}, Source: idleSource{}, Policy: policy.DefaultConfig(),
		NewActuator: func(actuate.Config, []actuate.Original) (Actuator, error) { return nullActuator{}, nil },
		Interval:    time.Second, Now: func() time.Time { return now }, NoFile: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	d.started, d.noFile = now, 1<<20
	d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: "w", Name: "w", Cgroup: "/w"}})
	w := d.work["w"]
	step := func(b uint64) {
		t.Helper()
		write(b)
		now = now.Add(time.Second)
		d.step()
	}
	kept := func(when string, want bool) {
		t.Helper()
		if got := w.cg.KeptFiles() == 2; got != want || d.details != map[bool]int{true: 1, false: 0}[want] {
			t.Fatalf("%s: detail kept %v (details %d), want %v", when, got, d.details, want)
		}
	}
	step(0)
	step(4096)
	kept("moving", true)
	step(4096) // still: polled every 2nd tick from now
	kept("after one still reading", true)
	step(8192) // (not read: not due) ...
	step(8192) // ... moving again
	kept("moving again", true)
	for i := 0; i < 8; i++ {
		step(8192)
	}
	kept("still, polled least often", false)
	step(12288)
	for i := 0; i < 4 && w.cg.KeptFiles() < 2; i++ {
		step(12288)
	}
	kept("woken", true)
	if err := d.shutdown(); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

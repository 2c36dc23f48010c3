package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

// fakeActivity is an activity source (sensor.Activity) told by the test
// which cgroups did I/O.
type fakeActivity struct {
	active map[uint64]bool
	ticks  int
}

func (a *fakeActivity) BeginTick() { a.ticks++ }
func (a *fakeActivity) Active(ino uint64) (bool, bool) {
	v, ok := a.active[ino]
	return v, ok
}

// TestActivityWakesQuietWorkload: a workload whose counters stood still is
// read only every few ticks (adaptive polling); when the activity source
// (an eBPF sensor's maps) says its cgroup did I/O, it is read — and its
// bytes charged — at the very next tick, on a tick its polling would have
// skipped. A workload the source does not know keeps the polling rule.
func TestActivityWakesQuietWorkload(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	stat := func(name string, rbytes int) {
		t.Helper()
		dir := filepath.Join(mount, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		line := "8:0 rbytes=" + itoa(rbytes) + " wbytes=0 rios=0 wios=0 dbytes=0 dios=0\n"
		if err := os.WriteFile(filepath.Join(dir, "io.stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat("w", 0)
	stat("v", 0)
	act := &fakeActivity{active: map[uint64]bool{}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := New(Options{
		Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: mount}, Source: idleSource{}, Policy: policy.DefaultConfig(),
		NewActuator: func(actuate.Config, []actuate.Original) (Actuator, error) { return nullActuator{}, nil },
		Interval:    time.Second, Now: func() time.Time { return now }, NoFile: 1 << 20, Activity: act,
	})
	if err != nil {
		t.Fatal(err)
	}
	d.started, d.noFile = now, 1<<20
	for _, n := range []string{"w", "v"} {
		d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: n, Name: n, Cgroup: "/" + n}})
	}
	w := d.work["w"]
	if w.ino == 0 {
		t.Fatal("no directory inode for w")
	}
	act.active[w.ino] = false // known, idle
	step := func() *snapshot.Snapshot {
		now = now.Add(time.Second)
		d.step()
		return d.Snapshot()
	}
	// Quiet until w is polled less than every tick, and this tick is one
	// its polling skips.
	for i := 0; i < 10 && w.c.Due(d.tick); i++ {
		step()
	}
	if w.c.Due(d.tick) {
		t.Fatal("w still read every tick after 10 quiet ones")
	}
	stat("w", 1<<20)
	act.active[w.ino] = true
	s := step()
	if got := byName(t, s, "w").ReadBytes; got != 1<<20 {
		t.Fatalf("the tick after the source saw w's I/O: read_bytes %d, want %d", got, 1<<20)
	}
	if act.ticks != int(d.tick) {
		t.Errorf("activity source told of %d ticks, want %d", act.ticks, d.tick)
	}
	// v, unknown to the source, follows its polling: its bytes are charged
	// within MaxPeriod ticks, not necessarily at the next.
	stat("v", 1<<20)
	seen := 0
	for i := 1; i <= int(d.sen.MaxPeriod); i++ {
		if byName(t, step(), "v").ReadBytes == 1<<20 {
			seen = i
			break
		}
	}
	if seen == 0 {
		t.Fatalf("v's bytes not charged within %d ticks", d.sen.MaxPeriod)
	}
	if err := d.shutdown(); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

func byName(t *testing.T, s *snapshot.Snapshot, name string) *snapshot.Workload {
	t.Helper()
	for _, w := range s.Workloads {
		if w.Name == name {
			return w
		}
	}
	t.Fatalf("tick %d: no workload %q", s.Tick, name)
	return nil
}

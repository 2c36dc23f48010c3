package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/iolat"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/sensor/latency"
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

// stepLatency hands the daemon the deltas the test sets, once per read.
type stepLatency struct {
	deltas []iolat.Delta
	drops  iolat.Drops
	err    error
	reads  int
}

func (f *stepLatency) Read(dst []iolat.Delta) ([]iolat.Delta, iolat.Drops, error) {
	f.reads++
	dst = append(dst, f.deltas...)
	f.deltas = nil
	return dst, f.drops, f.err
}
func (f *stepLatency) Keys() int    { return 0 }
func (f *stepLatency) Close() error { return nil }

// TestKernelActivity: with the latency sensor attached, its per-tick read
// is the activity source. A quiet workload is then polled at the long
// backstop (ActiveQuietMax), and read at the tick after its cgroup — or a
// cgroup below it, found by a walk — did I/O. While some cgroup's I/O is
// not attributed yet (walks are walkEvery ticks apart), or the read failed,
// or the kernel could not count some requests, nobody is vouched for: the
// short backstop. A cgroup below no workload (the root) is remembered as
// such.
func TestKernelActivity(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	inoOf := func(name string) uint64 {
		t.Helper()
		fi, err := os.Stat(filepath.Join(mount, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
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
	stat("w/c", 0)
	lat := &stepLatency{}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := New(Options{
		Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: mount}, Source: idleSource{}, Policy: policy.DefaultConfig(),
		NewActuator: func(actuate.Config, []actuate.Original) (Actuator, error) { return nullActuator{}, nil },
		Interval:    time.Second, Now: func() time.Time { return now }, NoFile: 1 << 20,
		Latency: latency.Options{Open: func() (latency.Sensor, error) { return lat, nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d.sen.Activity == nil || d.sen.MaxPeriod != 4 || d.sen.ActiveMaxPeriod != 64 {
		t.Fatalf("activity %v, backstops %d / %d ticks; want the latency sensor's, 4 and 64", d.sen.Activity, d.sen.MaxPeriod, d.sen.ActiveMaxPeriod)
	}
	d.started, d.noFile = now, 1<<20
	for _, n := range []string{"w", "v"} {
		d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: n, Name: n, Cgroup: "/" + n}})
	}
	w, v := d.work["w"], d.work["v"]
	step := func() *snapshot.Snapshot {
		now = now.Add(time.Second)
		d.step()
		return d.Snapshot()
	}
	// readIn is the ticks until the workload's new bytes are charged.
	readIn := func(name string, bytes uint64, most int) int {
		t.Helper()
		for i := 1; i <= most; i++ {
			if wlNamed(step(), name).ReadBytes == bytes {
				return i
			}
		}
		t.Fatalf("%s: %d bytes not charged in %d ticks", name, bytes, most)
		return 0
	}
	for range 64 {
		step()
	}
	if w.c.Period() != 64 || v.c.Period() != 64 {
		t.Fatalf("periods after 64 quiet ticks %d and %d, want 64", w.c.Period(), v.c.Period())
	}
	// Bytes the kernel did not see (its record says nobody did I/O): at
	// the long backstop, later than the short one.
	stat("v", 4096)
	if n := readIn("v", 4096, 64); n <= 4 {
		t.Errorf("v's unseen bytes charged after %d ticks, want after more than the short backstop (4)", n)
	}
	// The root did I/O: attributed to nobody by a walk, remembered.
	lat.deltas = []iolat.Delta{{Key: iolat.Key{Cgroup: 1}, Count: 1}}
	step()
	if walks, owner := d.lat.Walks(), first(d.lat.OwnerOf(1)); walks != 1 || owner != 0 {
		t.Fatalf("after the root's I/O: %d walks, owner %v; want 1, the root owned by none", walks, owner)
	}
	if _, known := d.sen.Activity.Active(v.ino); !known {
		t.Error("the tick after the root's I/O, attributed: v not vouched for")
	}
	// w's child c did I/O: w is read at the next tick.
	for w.c.Due(d.tick) {
		step()
	}
	stat("w", 8192)
	lat.deltas = []iolat.Delta{{Key: iolat.Key{Cgroup: inoOf("w/c")}, Count: 2}}
	if n := readIn("w", 8192, 1); n != 1 {
		t.Errorf("w, whose child did I/O: read after %d ticks, want 1", n)
	}
	if d.lat.Walks() != 1 {
		t.Errorf("walks %d, want 1 (the first walk found c)", d.lat.Walks())
	}
	// A new child, d, does I/O less than walkEvery ticks after the last
	// walk: not attributed yet, nobody vouched for, until a walk may run;
	// then w is read.
	stat("w/d", 0)
	for range 32 {
		step() // w quiet again
	}
	d.lat.NoWalkBefore(d.tick + 3)
	stat("w", 3*4096)
	lat.deltas = []iolat.Delta{{Key: iolat.Key{Cgroup: inoOf("w/d")}, Count: 1}}
	step()
	if _, known := d.sen.Activity.Active(v.ino); known {
		t.Error("a cgroup's I/O not attributed yet: v vouched for")
	}
	if n := readIn("w", 3*4096, 4); n > 3 {
		t.Errorf("w, whose new child did I/O: read %d ticks later, want by the walk 2 ticks later", n)
	}
	// A failed read, or requests the kernel could not count: nobody
	// vouched for at the next tick.
	lat.err = errors.New("boom")
	step()
	if _, known := d.sen.Activity.Active(v.ino); known {
		t.Error("after a failed read: v vouched for")
	}
	lat.err = nil
	lat.drops.Uncounted++
	step()
	if _, known := d.sen.Activity.Active(v.ino); known {
		t.Error("after uncounted requests: v vouched for")
	}
	step()
	if active, known := d.sen.Activity.Active(v.ino); active || !known {
		t.Errorf("a normal tick: v active %v known %v, want known idle", active, known)
	}
	if err := d.shutdown(); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// first is the first of two results.
func first[T, U any](t T, _ U) T { return t }

package daemon

import (
	"context"
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
	"github.com/ddiskqos/ddiskqos/internal/throttle"
)

// idleSource reports nothing; the test hands the daemon its events.
type idleSource struct{}

func (idleSource) Name() string { return "test" }
func (idleSource) Run(ctx context.Context, _ chan<- source.Event) error {
	<-ctx.Done()
	return nil
}

// nullActuator applies nothing (no devices).
type nullActuator struct{}

func (nullActuator) Devices() []actuate.Device             { return nil }
func (nullActuator) ObservePeak(int, float64)              {}
func (nullActuator) OpenFiles() int                        { return 0 }
func (nullActuator) Applied(string) []actuate.Applied      { return nil }
func (nullActuator) Release(string) error                  { return nil }
func (nullActuator) Forget(string)                         {}
func (nullActuator) RestoreAll() error                     { return nil }
func (nullActuator) RestoreOrphans(map[string]bool) error  { return nil }
func (nullActuator) Originals() ([]actuate.Original, bool) { return nil, false }
func (nullActuator) Apply(time.Time, []actuate.Target) ([]actuate.DeviceStatus, error) {
	return nil, nil
}
func (nullActuator) Hold(cgroupfs.Dev, throttle.Ceiling) error { return errors.New("no throttle") }
func (nullActuator) Steer(cgroupfs.Dev, float64) error         { return errors.New("no throttle") }

// TestPublishSharesUnchangedWorkloads: a workload whose record did not
// change is the same *snapshot.Workload in consecutive snapshots; one that
// changed gets a new record, and the previous snapshot still says what it
// said (a published record is never modified).
func TestPublishSharesUnchangedWorkloads(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	stat := func(name string, rbytes int) { writeIOStat(t, mount, name, rbytes) }
	stat("idle", 4096)
	stat("busy", 4096)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := New(Options{
		Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: mount}, Source: idleSource{}, Policy: policy.DefaultConfig(),
		NewActuator: func(actuate.Config, []actuate.Original) (Actuator, error) { return nullActuator{}, nil },
		Interval:    time.Second, Now: func() time.Time { return now }, NoFile: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	d.started, d.noFile = now, 1<<20
	for _, n := range []string{"idle", "busy"} {
		d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: n, Name: n, Cgroup: "/" + n}})
	}
	d.step() // baseline
	s1 := d.Snapshot()
	stat("busy", 4096+3<<20)
	now = now.Add(time.Second)
	d.step()
	s2 := d.Snapshot()
	byName := func(s *snapshot.Snapshot, name string) *snapshot.Workload {
		for _, w := range s.Workloads {
			if w.Name == name {
				return w
			}
		}
		t.Fatalf("tick %d: no workload %q", s.Tick, name)
		return nil
	}
	if byName(s1, "idle") != byName(s2, "idle") {
		t.Error("idle workload: a new record although nothing changed")
	}
	b1, b2 := byName(s1, "busy"), byName(s2, "busy")
	if b1 == b2 {
		t.Fatal("busy workload: the record of the previous tick was reused")
	}
	if b1.ReadBytes != 0 || b2.ReadBytes != 3<<20 || b2.Level != 2 {
		t.Errorf("busy: previous snapshot read_bytes %d (want 0), new %d at level %d (want 3 MiB, level 2)",
			b1.ReadBytes, b2.ReadBytes, b2.Level)
	}
	// A labels update is a change even when the numbers are not.
	d.handle(source.Event{Kind: source.Updated, Workload: source.Workload{ID: "idle", Name: "idle", Cgroup: "/idle",
		Labels: map[string]string{"team": "x"}}})
	now = now.Add(time.Second)
	d.step()
	if i3 := byName(d.Snapshot(), "idle"); i3 == byName(s2, "idle") || i3.Labels["team"] != "x" {
		t.Errorf("idle after a labels update: same record %v, labels %v", i3 == byName(s2, "idle"), i3.Labels)
	}
	if err := d.shutdown(); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// appliedActuator says the same thing is in force on one device for every
// workload, until changed.
type appliedActuator struct {
	nullActuator
	limits *cgroupfs.Limits
}

func (a appliedActuator) Applied(string) []actuate.Applied {
	return []actuate.Applied{{Device: actuate.Device{Name: "sda", Dev: cgroupfs.Dev{Major: 8}}, Limits: *a.limits}}
}

// TestPublishSharesUnchangedApplied: a workload whose counters move gets a
// new record every tick, but while what is in force on its devices is the
// same, the record shares the previous one's Applied entries (no copy per
// busy workload per tick); when that changes, a new slice, and the previous
// snapshot still says what it said.
func TestPublishSharesUnchangedApplied(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	dir := filepath.Join(mount, "busy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stat := func(rbytes int) {
		t.Helper()
		line := "8:0 rbytes=" + itoa(rbytes) + " wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n"
		if err := os.WriteFile(filepath.Join(dir, "io.stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat(4096)
	limits := &cgroupfs.Limits{RBps: 1 << 20}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := New(Options{
		Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: mount}, Source: idleSource{}, Policy: policy.DefaultConfig(),
		NewActuator: func(actuate.Config, []actuate.Original) (Actuator, error) {
			return appliedActuator{limits: limits}, nil
		},
		Interval: time.Second, Now: func() time.Time { return now }, NoFile: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	d.started, d.noFile = now, 1<<20
	d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: "busy", Name: "busy", Cgroup: "/busy"}})
	var recs []*snapshot.Workload
	for i := 1; i <= 3; i++ {
		if i == 3 {
			limits.RBps = 2 << 20
		}
		stat(4096 + i<<20)
		now = now.Add(time.Second)
		d.step()
		recs = append(recs, d.Snapshot().Workloads[0])
	}
	r1, r2, r3 := recs[0], recs[1], recs[2]
	if r1 == r2 || len(r1.Applied) != 1 || len(r2.Applied) != 1 {
		t.Fatalf("records %p %p, applied %v %v: want two records with one entry each", r1, r2, r1.Applied, r2.Applied)
	}
	if &r1.Applied[0] != &r2.Applied[0] {
		t.Error("unchanged applied entries copied into the new record")
	}
	if &r3.Applied[0] == &r2.Applied[0] || r3.Applied[0].ReadBps != 2<<20 || r2.Applied[0].ReadBps != 1<<20 {
		t.Errorf("changed limits: shared %v, new %d, previous %d; want a new slice with 2 MiB/s, the previous 1 MiB/s",
			&r3.Applied[0] == &r2.Applied[0], r3.Applied[0].ReadBps, r2.Applied[0].ReadBps)
	}
	if err := d.shutdown(); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

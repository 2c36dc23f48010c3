package latency

import (
	"log/slog"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/iolat"
	"github.com/ddiskqos/ddiskqos/internal/sensor"
)

// fakeSensor hands out one batch of deltas per Read.
type fakeSensor struct{ next [][]iolat.Delta }

func (f *fakeSensor) Read(dst []iolat.Delta) ([]iolat.Delta, iolat.Drops, error) {
	if len(f.next) > 0 {
		dst = append(dst, f.next[0]...)
		f.next = f.next[1:]
	}
	return dst, iolat.Drops{}, nil
}
func (f *fakeSensor) Keys() int    { return 1 }
func (f *fakeSensor) Close() error { return nil }

func delta(ino uint64, op iolat.Op, n uint32, bytes uint64) iolat.Delta {
	d := iolat.Delta{Key: iolat.Key{Cgroup: ino, Dev: cgroupfs.Dev{Major: 8}, Op: op}, Count: uint64(n), Bytes: uint64(n) * bytes}
	d.Hist[iolat.Bucket(200_000)] = n
	return d
}

// TestStageStep: the stage, given its workloads as values, charges each
// delta to its workload and its level (a cgroup of none: "other"), says
// whose each delta is, and hands a workload its kernel readings; a
// workload with no requests in a tick has its tick figures cleared.
func TestStageStep(t *testing.T) {
	t.Parallel()
	fake := &fakeSensor{next: [][]iolat.Delta{
		{delta(10, iolat.Read, 4, 4096), delta(20, iolat.Write, 2, 65536), delta(99, iolat.Read, 1, 4096)},
		{delta(20, iolat.Write, 1, 65536)},
	}}
	l := Open(Options{SysRoot: t.TempDir(), Open: func() (Sensor, error) { return fake, nil }}, slog.New(slog.DiscardHandler), nil)
	seen := l.Activity("/nonexistent", func(string) (string, error) { return "", nil })
	if seen == nil {
		t.Fatal("no activity source with a sensor attached")
	}
	ws := []Workload{{Ino: 10, Cgroup: "/a", Level: 1}, {Ino: 20, Cgroup: "/b", Level: 3}}
	if err := l.Step(ws, Tick{Changed: true, Workloads: 2}); err != nil {
		t.Fatal(err)
	}
	if w, ok := l.Owner(20); !ok || w != 1 {
		t.Fatalf("owner of 20: %d, %v; want 1", w, ok)
	}
	if _, ok := l.Owner(99); ok {
		t.Fatal("cgroup 99 owned by a workload")
	}
	a := l.WorkloadLatency(10)
	if len(a) != 1 || a[0].Read.Requests != 4 || a[0].Read.TickRequests != 4 || a[0].Dev != "8:0" {
		t.Fatalf("a's latency %+v", a)
	}
	levels := map[string]uint64{}
	for _, se := range l.Snapshot().Series {
		levels[se.Level] += se.Requests
	}
	if levels["1"] != 4 || levels["3"] != 2 || levels["other"] != 1 {
		t.Fatalf("requests by level %v, want 1: 4, 3: 2, other: 1", levels)
	}
	// 99 was placed by the first walk (below no workload): the record
	// is complete once the sensing begins its tick.
	if l.KernelReadings(func(int, *iolat.Delta) {}) {
		t.Fatal("kernel readings complete before the sensing's BeginTick")
	}
	if err := l.Step(ws, Tick{Tick: 1, Workloads: 2}); err != nil {
		t.Fatal(err)
	}
	if a := l.WorkloadLatency(10); a[0].Read.TickRequests != 0 || a[0].Read.Requests != 4 {
		t.Fatalf("a, quiet this tick: %+v; want its tick figures cleared, its total kept", a[0].Read)
	}
	if l.Walks() != 1 {
		t.Fatalf("walks %d, want 1", l.Walks())
	}
	if w, ok := l.OwnerOf(99); !ok || w != 0 {
		t.Fatalf("cgroup 99 placed below %d (%v), want placed below none", w, ok)
	}
	seen.BeginTick()
	var kio [2][]sensor.KernelIO
	if !l.KernelReadings(func(w int, dl *iolat.Delta) { kio[w] = AddKernelIO(kio[w], dl) }) {
		t.Fatal("kernel readings incomplete")
	}
	if len(kio[0]) != 0 || len(kio[1]) != 1 || kio[1][0].WBytes != 65536 || kio[1][0].WIOs != 1 {
		t.Fatalf("kernel readings %+v", kio)
	}
}

// biosSensor is a sensor with bio counters.
type biosSensor struct {
	fakeSensor
	b *iolat.Bios
}

func (f *biosSensor) Bios() *iolat.Bios { return f.b }

// TestStageBios: the stage hands out its sensor's bio counters, none when
// the sensor has none or there is no sensor.
func TestStageBios(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	b := &iolat.Bios{}
	for _, c := range []struct {
		name string
		sen  Sensor
		want *iolat.Bios
	}{
		{"with bio counters", &biosSensor{b: b}, b},
		{"without", &fakeSensor{}, nil},
		{"none", nil, nil},
	} {
		opts := Options{SysRoot: t.TempDir()}
		if c.sen != nil {
			opts.Open = func() (Sensor, error) { return c.sen, nil }
		}
		if got := Open(opts, log, nil).Bios(); got != c.want {
			t.Errorf("%s: bios %p, want %p", c.name, got, c.want)
		}
	}
}

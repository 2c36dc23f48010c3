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

// fakeLatency hands the daemon one prepared batch of deltas per read.
type fakeLatency struct {
	next   [][]iolat.Delta
	closed bool
}

func (f *fakeLatency) Read(dst []iolat.Delta) ([]iolat.Delta, iolat.Drops, error) {
	if len(f.next) > 0 {
		dst = append(dst, f.next[0]...)
		f.next = f.next[1:]
	}
	return dst, iolat.Drops{Uncounted: 2}, nil
}
func (f *fakeLatency) Keys() int    { return 3 }
func (f *fakeLatency) Close() error { f.closed = true; return nil }

// delta is n requests of ns each, of bytes each.
func delta(ino uint64, dev cgroupfs.Dev, op iolat.Op, n int, ns uint64, bytes uint64, inFlight uint64) iolat.Delta {
	d := iolat.Delta{Key: iolat.Key{Cgroup: ino, Dev: dev, Op: op}, Count: uint64(n), Bytes: uint64(n) * bytes,
		Total: time.Duration(uint64(n) * ns), Queue: time.Duration(uint64(n) * ns / 10), InFlight: inFlight}
	d.Hist[iolat.Bucket(ns)] = uint32(n)
	return d
}

// TestLatencyCharged: the sensor's deltas go to the workload whose cgroup
// directory has the delta's inode — per disk (named from sysfs) and
// direction, with the tick's p50 and p99 — and to the per-level histograms
// at that workload's level; a cgroup that is no workload is "other". A tick
// without requests clears the tick's figures and keeps the totals.
func TestLatencyCharged(t *testing.T) {
	t.Parallel()
	mount, sys := t.TempDir(), t.TempDir()
	inos := map[string]uint64{}
	for _, n := range []string{"web", "bulk"} {
		dir := filepath.Join(mount, n)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "io.stat"), []byte("8:0 rbytes=0 wbytes=0 rios=0 wios=0 dbytes=0 dios=0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(dir)
		inos[n] = fi.Sys().(*syscall.Stat_t).Ino
	}
	if err := os.MkdirAll(filepath.Join(sys, "dev", "block"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../devices/virtual/block/sda", filepath.Join(sys, "dev", "block", "8:0")); err != nil {
		t.Fatal(err)
	}
	sda := cgroupfs.Dev{Major: 8}
	fake := &fakeLatency{next: [][]iolat.Delta{nil, {
		delta(inos["web"], sda, iolat.Read, 100, 200_000, 4096, 1),
		delta(inos["web"], sda, iolat.Write, 10, 5_000_000, 65536, 0),
		delta(inos["bulk"], sda, iolat.Read, 50, 8_000_000, 1<<20, 4),
		delta(4242, sda, iolat.Write, 5, 1_000_000, 4096, 0),
	}}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := New(Options{
		Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: mount}, Source: idleSource{}, Policy: policy.DefaultConfig(),
		NewActuator: func(actuate.Config, []actuate.Original) (Actuator, error) { return nullActuator{}, nil },
		Interval:    time.Second, Now: func() time.Time { return now }, NoFile: 1 << 20,
		Latency: latency.Options{SysRoot: sys, Open: func() (latency.Sensor, error) { return fake, nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	d.started, d.noFile = now, 1<<20
	for _, n := range []string{"web", "bulk"} {
		d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: n, Name: n, Cgroup: "/" + n,
			Labels: map[string]string{"ddiskqos.level": map[string]string{"web": "1", "bulk": "3"}[n]}}})
	}
	d.step()
	now = now.Add(time.Second)
	d.step()
	s := d.Snapshot()
	web, bulk := wlNamed(s, "web"), wlNamed(s, "bulk")
	if len(web.Latency) != 1 || web.Latency[0].Device != "sda" || web.Latency[0].Dev != "8:0" {
		t.Fatalf("web's latency: %+v; want one entry for sda 8:0", web.Latency)
	}
	r, w := web.Latency[0].Read, web.Latency[0].Write
	lo, hi := iolat.Bounds(iolat.Bucket(200_000))
	if r.Requests != 100 || r.Bytes != 409600 || r.InFlight != 1 || r.TickRequests != 100 ||
		r.P50*1e9 < lo || r.P50*1e9 >= hi || r.P99*1e9 < lo || r.P99*1e9 >= hi || r.Queue != 20e-6 {
		t.Errorf("web read: %+v; want 100 requests of 4 KiB, p50 and p99 in [%g, %g) ns, queue 20µs", r, lo, hi)
	}
	if w.Requests != 10 || w.P99 < 4e-3 || w.P99 > 6e-3 {
		t.Errorf("web write: %+v; want 10 requests, p99 near 5 ms", w)
	}
	if len(bulk.Latency) != 1 || bulk.Latency[0].Read.Requests != 50 || bulk.Latency[0].Read.InFlight != 4 {
		t.Errorf("bulk's latency: %+v", bulk.Latency)
	}
	l := s.Latency
	if l == nil || !l.Available || l.Uncounted != 2 || l.Keys != 3 || len(l.Buckets) != len(latency.Bounds) {
		t.Fatalf("snapshot latency: %+v", l)
	}
	want := map[[2]string]uint64{{"read", "1"}: 100, {"write", "1"}: 10, {"read", "3"}: 50, {"write", "other"}: 5}
	if len(l.Series) != len(want) {
		t.Errorf("series %+v; want %d", l.Series, len(want))
	}
	for _, se := range l.Series {
		n, ok := want[[2]string{se.Operation, se.Level}]
		if !ok || se.Requests != n || se.Device != "sda" || len(se.Counts) != len(latency.Bounds) || se.Counts[len(se.Counts)-1] != n {
			t.Errorf("series %+v: want %d requests on sda, all below the last bound", se, n)
		}
	}

	now = now.Add(time.Second)
	d.step() // nothing completed
	s = d.Snapshot()
	web = wlNamed(s, "web")
	if r := web.Latency[0].Read; r.Requests != 100 || r.TickRequests != 0 || r.P50 != 0 || r.P99 != 0 || r.InFlight != 1 {
		t.Errorf("web read, a tick later: %+v; want totals kept, tick figures 0, in flight kept", r)
	}
	now = now.Add(time.Second)
	d.step()
	if s2 := d.Snapshot(); wlNamed(s2, "web") != wlNamed(s, "web") {
		t.Error("web unchanged for a tick: a new record")
	}
	d.lat.Close()
	if !fake.closed {
		t.Error("sensor not closed")
	}
}

// TestLatencyUnavailable: a sensor that cannot be opened leaves the daemon
// running, and the snapshot says why and the fix; without a sensor asked
// for, the snapshot has no latency at all.
func TestLatencyUnavailable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		open func() (latency.Sensor, error)
	}{
		{"unavailable", func() (latency.Sensor, error) {
			return nil, &iolat.UnavailableError{Why: iolat.WhyNoBTF, Fix: "boot a kernel with BTF", Err: errors.New("no vmlinux")}
		}},
		{"not asked", nil},
	} {
		d, err := New(Options{
			Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: t.TempDir()}, Source: idleSource{}, Policy: policy.DefaultConfig(),
			NewActuator: func(actuate.Config, []actuate.Original) (Actuator, error) { return nullActuator{}, nil },
			Interval:    time.Second, NoFile: 1 << 20, Latency: latency.Options{Open: c.open},
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		d.step()
		l := d.Snapshot().Latency
		switch {
		case c.open == nil && l != nil:
			t.Errorf("%s: latency %+v, want none", c.name, l)
		case c.open != nil && (l == nil || l.Available || l.Reason != "no BTF: no vmlinux" || l.Fix != "boot a kernel with BTF"):
			t.Errorf("%s: latency %+v, want the reason and the fix", c.name, l)
		}
	}
}

// wlNamed is the record of the workload called name in s, nil when none.
func wlNamed(s *snapshot.Snapshot, name string) *snapshot.Workload {
	for _, w := range s.Workloads {
		if w.Name == name {
			return w
		}
	}
	return nil
}

package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/iolat"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/sensor/latency"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

// TestPublishReusesReleasedRecords: a busy workload gets a new record
// every tick; the records it replaced are reused once no reader holds a
// snapshot that had them. A snapshot held by Acquire reads the same all
// along while the ticks go on; after its release the records come back;
// a snapshot taken with Snapshot (no release) stops reuse for good.
func TestPublishReusesReleasedRecords(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	rbytes := 4096
	stat := func(name string, rbytes int) { writeIOStat(t, mount, name, rbytes) }
	stat("idle", 4096)
	stat("busy", rbytes)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := newTestDaemon(t, mount, &now, nil)
	for _, n := range []string{"idle", "busy"} {
		d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: n, Name: n, Cgroup: "/" + n}})
	}
	// tick reads 64 KiB more for busy, steps, and returns busy's record
	// in the new snapshot (acquired and released at once: its pointer only
	// is used afterwards).
	tick := func() *snapshot.Workload {
		t.Helper()
		rbytes += 64 << 10
		stat("busy", rbytes)
		now = now.Add(time.Second)
		d.step()
		s, release := d.Acquire()
		defer release()
		for _, w := range s.Workloads {
			if w.Name == "busy" {
				return w
			}
		}
		t.Fatalf("tick %d: no busy workload", s.Tick)
		return nil
	}
	tick() // baseline

	// Held across 5 ticks: nothing in it changes, none of its records
	// comes back.
	held, release := d.Acquire()
	var heldBusy *snapshot.Workload
	for _, w := range held.Workloads {
		if w.Name == "busy" {
			heldBusy = w
		}
	}
	want := *heldBusy
	wantWorkloads := append([]*snapshot.Workload(nil), held.Workloads...)
	seen := map[*snapshot.Workload]bool{heldBusy: true}
	for range 5 {
		b := tick()
		if seen[b] {
			t.Fatalf("tick %d: a record published before was reused while a reader held snapshot %d", d.tick, held.Tick)
		}
		seen[b] = true
	}
	if !heldBusy.Same(&want) || !heldBusy.LevelSince.Equal(want.LevelSince) {
		t.Errorf("the held snapshot's record changed under its reader: %+v, was %+v", *heldBusy, want)
	}
	for i, w := range held.Workloads {
		if w != wantWorkloads[i] {
			t.Errorf("the held snapshot's workload %d changed under its reader", i)
		}
	}
	release()
	release() // twice is allowed

	// Released: within two ticks a record published before comes back.
	reused := false
	for range 3 {
		if seen[tick()] {
			reused = true
		}
	}
	if !reused {
		t.Error("3 ticks after the last reader released, no busy record was reused")
	}

	// Snapshot pins what it returned and every later generation.
	pinned := d.Snapshot()
	after := map[*snapshot.Workload]bool{}
	for _, w := range pinned.Workloads {
		after[w] = true
	}
	for range 4 {
		b := tick()
		if after[b] {
			t.Fatalf("tick %d: a record published since Snapshot was called was reused", d.tick)
		}
		after[b] = true
	}
}

// TestPublishKeepsTheStoredSnapshot: the snapshot stored while a tick
// builds the next is what any reader may acquire meanwhile, so none of its
// records is reused in that tick, even with nobody holding it: three busy
// workloads replace their records every tick, and after each tick the
// previous snapshot (released before the tick) still says what it said.
func TestPublishKeepsTheStoredSnapshot(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	names := []string{"a", "b", "c"}
	stat := func(name string, rbytes int) { writeIOStat(t, mount, name, rbytes) }
	for _, n := range names {
		stat(n, 4096)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := newTestDaemon(t, mount, &now, nil)
	for _, n := range names {
		d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: n, Name: n, Cgroup: "/" + n}})
	}
	d.step()
	seen := map[*snapshot.Workload]bool{}
	for i := range 8 {
		s, release := d.Acquire()
		recs := append([]*snapshot.Workload(nil), s.Workloads...)
		vals := make([]snapshot.Workload, len(recs))
		for j, w := range recs {
			vals[j] = *w
			seen[w] = true
		}
		release()
		for j, n := range names {
			stat(n, 4096+(i+1)*(j+1)*(64<<10))
		}
		now = now.Add(time.Second)
		d.step()
		for j, w := range recs {
			if !w.Same(&vals[j]) {
				t.Fatalf("tick %d: the snapshot stored while it was built lost its record of %s: %+v, was %+v", d.tick, vals[j].Name, *w, vals[j])
			}
		}
	}
	s, release := d.Acquire()
	defer release()
	reused := 0
	for _, w := range s.Workloads {
		if seen[w] {
			reused++
		}
	}
	if reused == 0 {
		t.Error("8 ticks of 3 busy workloads, no reader held anything: no record was reused")
	}
}

// TestLatencyListsReused: a workload that completes requests every tick
// gets a new latency list every tick; a held snapshot's list is not
// touched while held, and after the release the lists come back.
func TestLatencyListsReused(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	ino := writeIOStat(t, mount, "web", 0)
	sda := cgroupfs.Dev{Major: 8}
	fake := &fakeLatency{next: [][]iolat.Delta{nil}}
	for i := range 16 {
		fake.next = append(fake.next, []iolat.Delta{delta(ino, sda, iolat.Read, 10+i, 200_000, 4096, 0)})
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := newTestDaemon(t, mount, &now, fake)
	d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: "web", Name: "web", Cgroup: "/web"}})
	// tick steps and returns where web's latency list lives, and the list.
	tick := func() (*snapshot.WorkloadLatency, []snapshot.WorkloadLatency) {
		t.Helper()
		now = now.Add(time.Second)
		d.step()
		s, release := d.Acquire()
		defer release()
		l := wlNamed(s, "web").Latency
		if len(l) != 1 {
			t.Fatalf("tick %d: web's latency %+v, want one device", d.tick, l)
		}
		return unsafe.SliceData(l), l
	}
	d.step()
	tick()
	held, release := d.Acquire()
	heldList := wlNamed(held, "web").Latency
	want := heldList[0]
	seen := map[*snapshot.WorkloadLatency]bool{unsafe.SliceData(heldList): true}
	for range 5 {
		p, _ := tick()
		if seen[p] {
			t.Fatalf("tick %d: a latency list was reused while a reader held snapshot %d", d.tick, held.Tick)
		}
		seen[p] = true
	}
	if heldList[0] != want {
		t.Errorf("the held snapshot's latency list changed under its reader: %+v, was %+v", heldList[0], want)
	}
	release()
	reused := false
	for i := range 4 {
		p, l := tick()
		if r := l[0].Read; r.TickRequests != uint64(10+6+i) {
			t.Errorf("tick %d: web's tick requests %d, want %d", d.tick, r.TickRequests, 10+6+i)
		}
		reused = reused || seen[p]
	}
	if !reused {
		t.Error("4 ticks after the last reader released, no latency list was reused")
	}
}

// TestLatencyListSharedNotReused: a record replaced for other figures
// (its bytes) keeps the latency list that did not change; that list is
// still the new record's, so it is not reused while a busy neighbour's
// lists are.
func TestLatencyListSharedNotReused(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	inos := map[string]uint64{}
	stat := func(name string, rbytes int) { inos[name] = writeIOStat(t, mount, name, rbytes) }
	stat("web", 0)
	stat("quiet", 0)
	sda := cgroupfs.Dev{Major: 8}
	// quiet completes 7 requests in the first tick, none after; web some
	// every tick.
	fake := &fakeLatency{next: [][]iolat.Delta{nil, {delta(inos["quiet"], sda, iolat.Read, 7, 200_000, 4096, 0)}}}
	for i := range 16 {
		fake.next = append(fake.next, []iolat.Delta{delta(inos["web"], sda, iolat.Read, 10+i, 200_000, 4096, 0)})
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := newTestDaemon(t, mount, &now, fake)
	for _, n := range []string{"web", "quiet"} {
		d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: n, Name: n, Cgroup: "/" + n}})
	}
	d.step()
	for i := range 12 {
		stat("quiet", (i+1)*(64<<10)) // a new record every tick
		now = now.Add(time.Second)
		d.step()
		s, release := d.Acquire()
		q := wlNamed(s, "quiet").Latency
		if i > 0 && (len(q) != 1 || q[0].Read.Requests != 7) {
			t.Fatalf("tick %d: quiet's latency %+v, want its 7 requests", d.tick, q)
		}
		release()
	}
}

// TestReuseWithConcurrentReaders: readers acquire, read every record
// twice with a pause between, and release, while the loop ticks with
// busy workloads: a record must read the same both times (under -race, a
// write to a held record is also reported as a race).
func TestReuseWithConcurrentReaders(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	names := []string{"a", "b", "c", "d"}
	stat := func(name string, rbytes int) { writeIOStat(t, mount, name, rbytes) }
	for _, n := range names {
		stat(n, 0)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := newTestDaemon(t, mount, &now, nil)
	for _, n := range names {
		d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: n, Name: n, Cgroup: "/" + n}})
	}
	d.step()
	stop := make(chan struct{})
	errs := make(chan string, 4)
	var reads [4]int
	for r := range 4 {
		go func() {
			for {
				select {
				case <-stop:
					errs <- ""
					return
				default:
				}
				s, release := d.Acquire()
				first := make([]snapshot.Workload, len(s.Workloads))
				for i, w := range s.Workloads {
					first[i] = *w
				}
				time.Sleep(time.Duration(r) * 200 * time.Microsecond)
				for i, w := range s.Workloads {
					if !w.Same(&first[i]) {
						release()
						errs <- "tick " + itoa(int(s.Tick)) + ": " + first[i].Name + "'s record changed while held"
						return
					}
				}
				release()
				reads[r]++
			}
		}()
	}
	for i := range 200 {
		for j, n := range names {
			stat(n, (i+1)*(j+1)*(64<<10))
		}
		now = now.Add(time.Second)
		d.step()
	}
	close(stop)
	for range 4 {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
	if reads[0] == 0 {
		t.Error("no reader read a snapshot while the loop ticked")
	}
}

// writeIOStat writes cgroup name's io.stat under the v2 tree at mount:
// rbytes read on 8:0. It returns the cgroup directory's inode.
func writeIOStat(t *testing.T, mount, name string, rbytes int) uint64 {
	t.Helper()
	dir := filepath.Join(mount, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	line := "8:0 rbytes=" + itoa(rbytes) + " wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n"
	if err := os.WriteFile(filepath.Join(dir, "io.stat"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// newTestDaemon is a daemon on the v2 tree at mount with no devices, its
// clock *now, lat its latency sensor (nil: none); shut down at the test's
// end.
func newTestDaemon(t *testing.T, mount string, now *time.Time, lat latency.Sensor) *Daemon {
	t.Helper()
	opts := Options{
		Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: mount}, Source: idleSource{}, Policy: policy.DefaultConfig(),
		NewActuator: func(actuate.Config, []actuate.Original) (Actuator, error) { return nullActuator{}, nil },
		Interval:    time.Second, Now: func() time.Time { return *now }, NoFile: 1 << 20,
	}
	if lat != nil {
		opts.Latency = latency.Options{SysRoot: t.TempDir(), Open: func() (latency.Sensor, error) { return lat, nil }}
	}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.shutdown(); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Error(err)
		}
	})
	d.started, d.noFile = *now, 1<<20
	return d
}

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
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

// scriptSource sends the batches of events the test hands it, each as soon
// as it is handed, and says when a batch is sent: a source whose listing
// comes when the test wants it to.
type scriptSource struct {
	batches chan []source.Event
	sent    chan struct{}
}

func (scriptSource) Name() string { return "script" }

func (s scriptSource) Run(ctx context.Context, out chan<- source.Event) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-s.batches:
			for _, ev := range b {
				if err := source.Send(ctx, out, ev); err != nil {
					return nil
				}
			}
			s.sent <- struct{}{}
		}
	}
}

// TestSyncedDecidesWhatIsCharged: the workloads of the source's initial
// listing were found running — their I/O history is not charged, however
// late the listing comes (here 10 s after start, beyond the 3 s the daemon
// used to allow) — and the workloads added after the source said Synced
// are new: all their I/O counts. A workload refused for want of
// descriptors keeps what it was when first seen once it is tracked.
func TestSyncedDecidesWhatIsCharged(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	stat := func(name string, rbytes int) { writeIOStat(t, mount, name, rbytes) }
	// Every workload read 100 MiB before the daemon saw it: charged, that
	// is level 4 at once (2 + 8 + 32 MiB are levels 1 to 3).
	const history = 100 << 20
	for _, n := range []string{"old", "old-crowded", "new", "new-crowded"} { // "late" comes later
		stat(n, history)
	}
	src := scriptSource{batches: make(chan []source.Event), sent: make(chan struct{})}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := New(Options{
		Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: mount}, Source: src, Policy: policy.DefaultConfig(),
		NewActuator: func(actuate.Config, []actuate.Original) (Actuator, error) { return nullActuator{}, nil },
		Interval:    time.Second, Now: func() time.Time { return now }, NoFile: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Run's start, driven by hand on the test's clock.
	d.started, d.noFile = now, 1<<20
	ctx, cancel := context.WithCancel(context.Background())
	srcDone := make(chan error, 1)
	go func() { srcDone <- src.Run(ctx, d.events) }()
	defer func() {
		cancel()
		if err := <-srcDone; err != nil {
			t.Error(err)
		}
		if err := d.shutdown(); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Error(err)
		}
	}()
	deliver := func(evs ...source.Event) {
		t.Helper()
		select {
		case src.batches <- evs:
		case <-time.After(10 * time.Second):
			t.Fatal("the source did not take the events within 10 s")
		}
		<-src.sent // in d.events, which is buffered: the next step drains them
	}
	step := func() *snapshot.Snapshot {
		d.step()
		now = now.Add(time.Second)
		return d.Snapshot()
	}
	added := func(name string) source.Event {
		return source.Event{Kind: source.Added, Workload: source.Workload{ID: name, Name: name, Cgroup: "/" + name}}
	}
	check := func(s *snapshot.Snapshot, name string, level int, read uint64) {
		t.Helper()
		w, ok := workloadNamed(s, name)
		if !ok {
			t.Fatalf("tick %d: %s not tracked", s.Tick, name)
		}
		if w.Level != level || w.ReadBytes != read {
			t.Errorf("tick %d: %s at level %d having read %d B, want level %d, %d B", s.Tick, name, w.Level, w.ReadBytes, level, read)
		}
	}

	// A slow first listing: 10 ticks of nothing (the old rule's grace was
	// max(2 s, 3 ticks) = 3 s).
	for range 10 {
		step()
	}
	// The listing, with "old-crowded" refused for want of descriptors.
	deliver(added("old"))
	step()
	d.noFile = host.FDReserve // no room for one more
	deliver(added("old-crowded"), source.Event{Kind: source.Synced})
	s := step()
	if !d.synced {
		t.Fatal("the source's Synced was not taken")
	}
	if _, ok := workloadNamed(s, "old-crowded"); ok || len(d.refused) != 1 {
		t.Fatalf("old-crowded tracked (%d refused): the budget did not refuse it", len(d.refused))
	}
	// Found running: the history is not charged, what it does now is.
	check(s, "old", 1, 0)
	stat("old", history+1<<20)
	check(step(), "old", 1, 1<<20)

	// Added after Synced: new, its history charged (also once a
	// refused one gets room); "old-crowded" gets room as well and is
	// still the found-running one it was.
	d.noFile = uint64(host.FDReserve + d.fds + d.actFDs + 1) // room for one more
	deliver(added("new"), added("new-crowded"))
	s = step()
	check(s, "new", 4, history)
	if _, ok := workloadNamed(s, "new-crowded"); ok || len(d.refused) != 2 {
		t.Fatalf("new-crowded tracked (%d refused): the budget did not refuse it", len(d.refused))
	}
	d.noFile = 1 << 20
	step() // tracked: the baseline of the found-running one
	s = step()
	check(s, "old-crowded", 1, 0)
	check(s, "new-crowded", 4, history)

	// A second Synced (a source may re-list) changes nothing.
	stat("late", history)
	deliver(source.Event{Kind: source.Synced}, added("late"))
	check(step(), "late", 4, history)
}

// orphanActuator records the live sets RestoreOrphans is called with.
type orphanActuator struct {
	nullActuator
	calls *[]map[string]bool
}

func (a orphanActuator) RestoreOrphans(live map[string]bool) error {
	*a.calls = append(*a.calls, live)
	return nil
}

// TestOrphansWaitForSynced: the cgroups adopted from the state file are
// restored as unclaimed only once the source's initial listing is
// complete, however long after the orphan grace it comes: before it,
// every adopted cgroup would look unclaimed. The workloads of the listing
// are claimed, also one refused for want of descriptors.
func TestOrphansWaitForSynced(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	for _, n := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(mount, n), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mount, n, "io.stat"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var calls []map[string]bool
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := New(Options{
		Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: mount}, Source: idleSource{}, Policy: policy.DefaultConfig(),
		NewActuator: func(actuate.Config, []actuate.Original) (Actuator, error) { return orphanActuator{calls: &calls}, nil },
		Interval:    time.Second, Now: func() time.Time { return now }, NoFile: 1 << 20, OrphanGrace: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	d.started, d.noFile = now, 1<<20
	step := func() {
		d.step()
		now = now.Add(time.Second)
	}
	for range 10 { // five times the grace
		step()
	}
	if len(calls) != 0 {
		t.Fatalf("orphans restored before the source's listing: live sets %v", calls)
	}
	d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: "a", Name: "a", Cgroup: "/a"}})
	d.noFile = host.FDReserve // no room: b is refused
	d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: "b", Name: "b", Cgroup: "/b"}})
	d.handle(source.Event{Kind: source.Synced})
	step()
	step()
	if len(calls) != 1 || len(calls[0]) != 2 || !calls[0]["/a"] || !calls[0]["/b"] {
		t.Fatalf("orphan restores after the listing: live sets %v, want one with /a and /b", calls)
	}
}

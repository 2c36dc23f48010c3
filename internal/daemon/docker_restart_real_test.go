package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/dockertest"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/source/docker"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestRealDockerEngineRestart proves that the daemon survives a restart of
// a real Docker engine — a private dockerd the test starts, stops and
// starts again with --live-restore, never the machine's shared one. A bulk
// reader is at level 4 (weight 100 on a BFQ loop device) when the engine
// goes down; while it is down and after it is back the daemon keeps
// running and keeps the container at level 4 without releasing it: the
// source's resync finds the same container with the same pid and reports
// nothing. A container started after the restart is discovered, one
// removed after it is released, and shutdown restores the originals.
func TestRealDockerEngineRestart(t *testing.T) {
	if testkit.InVM() {
		t.Skip("the Docker engine tests run on the host")
	}
	testkit.NeedRoot(t)
	e := dockertest.StartEngine(t)
	c := e.Client(t)
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.IOHierarchy()
	if err != nil {
		t.Fatal(err)
	}
	testkit.Need(t, h.Version == 1, "the host test expects the cgroup v1 blkio hierarchy (layout %s)", l.Mode)
	loop := testkit.LoopDevice(t, 512)
	testkit.SetScheduler(t, loop.Name, "bfq")
	r := dockerRig{c: c, image: e.Image(t), h: h, mode: string(l.Mode), path: loop.Path,
		dev: actuate.Device{Name: loop.Name, Dev: cgroupfs.Dev{Major: loop.Major, Minor: loop.Minor}, Mech: host.MechBFQWeight},
		run: fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())}

	var logs testkit.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	eng := &tracedEngine{Client: c}
	src, err := docker.New(docker.Options{Engine: eng, Layout: l, ProcFS: "/proc",
		MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingSource{inner: src}
	pc := policy.DefaultConfig()
	pc.BoostAfter = 2 * time.Minute // no boost during the test
	d, err := New(Options{Hierarchy: h, CgroupMode: r.mode, Source: rec, Policy: pc,
		Actuator:     actuate.Config{Devices: []actuate.Device{r.dev}, Reassert: time.Minute},
		ActuatorName: "cgroup", Interval: 100 * time.Millisecond, OrphanGrace: 300 * time.Millisecond,
		Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	runErr, stop := runDaemon(t, d)

	bulk := r.reader(t, "bulk", "--loop", "--duration", "60s")
	s := waitFor(t, d, "bulk at level 4", func(s *snapshot.Snapshot) bool {
		w, ok := byID(s, bulk.ID)
		return ok && w.Level == 4
	})
	wb, _ := byID(s, bulk.ID)
	if v, _ := r.deviceWeight(t, wb.Cgroup); v != 100 {
		t.Fatalf("bulk at level 4: %s blkio.bfq.weight_device on %s = %d, want 100", wb.Cgroup, r.dev.Dev, v)
	}
	pid := dockertest.WaitRunning(t, c, bulk.ID, 10*time.Second)

	// Restart the engine, watching every snapshot meanwhile.
	watch := watchWorkload(d, bulk.ID)
	mark := time.Now()
	stopping, starting := e.Restart(t)
	up := time.Now()
	// The restart is over for the daemon once its source has listed the
	// containers again (the resync); give the loop two ticks to apply
	// whatever that produced.
	resync := eng.waitCall(t, "list", up, 20*time.Second)
	time.Sleep(2 * d.opts.Interval)
	seen := watch.stop()

	rel := func(at time.Time) string { return at.Sub(mark).Round(time.Millisecond).String() }
	t.Logf("engine restart, times from SIGTERM: dockerd exited at %s, answered again at %s (%s after its start); daemon source calls: %s",
		stopping.Round(time.Millisecond), rel(up), starting.Round(time.Millisecond), eng.summary(mark, rel))
	t.Logf("resync listed the containers at %s (%s after the engine answered)", rel(resync.at), resync.at.Sub(up).Round(time.Millisecond))
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "reconnecting") {
			t.Logf("source: %s", line)
		}
	}
	t.Logf("during the restart: %d snapshots, bulk at level 4 in %d, at another level in %d, missing in %d",
		seen.total, seen.atLevel4, seen.otherLevel, seen.missing)

	select {
	case err := <-runErr:
		t.Fatalf("daemon Run returned during the engine restart: %v", err)
	default:
	}
	if seen.missing > 0 || seen.otherLevel > 0 {
		t.Errorf("bulk not at level 4 in every snapshot across the restart: %+v", seen)
	}
	if evs := rec.since(mark, bulk.ID); len(evs) > 0 {
		t.Errorf("the restart produced events for the live-restored container (its pid %d): %s", pid, evs)
	}
	if got := dockertest.WaitRunning(t, c, bulk.ID, 10*time.Second); got != pid {
		t.Errorf("bulk container's pid %d after the restart, was %d: not live-restored", got, pid)
	}
	s = d.Snapshot()
	wb2, ok := byID(s, bulk.ID)
	if !ok || wb2.Level != 4 || wb2.Cgroup != wb.Cgroup {
		t.Errorf("after the restart bulk is %+v (tracked %v), want level 4 in %s", wb2, ok, wb.Cgroup)
	}
	if v, _ := r.deviceWeight(t, wb.Cgroup); v != 100 {
		t.Errorf("after the restart %s has weight %d on %s, want 100", wb.Cgroup, v, r.dev.Dev)
	}

	// A container started after the restart is discovered through the new
	// event stream, charged from its first byte; one removed is released.
	lateMark := time.Now()
	late := r.reader(t, "late", "--loop", "--offset", "256MiB", "--duration", "60s")
	s = waitFor(t, d, "late container at level 4", func(s *snapshot.Snapshot) bool {
		w, ok := byID(s, late.ID)
		return ok && w.Level == 4
	})
	if evs := rec.since(lateMark, late.ID); len(evs) != 1 || evs[0].ev.Kind != source.Added {
		t.Errorf("events of the container started after the restart = %s, want one Added", evs)
	} else {
		t.Logf("late container added %s after it was started", evs[0].at.Sub(lateMark).Round(time.Millisecond))
	}
	wl, _ := byID(s, late.ID)
	if v, _ := r.deviceWeight(t, wl.Cgroup); v != 100 {
		t.Errorf("late container at level 4: weight %d on %s, want 100", v, r.dev.Dev)
	}
	rmMark := time.Now()
	dockertest.RemoveContainer(t, c, late.ID)
	s = waitFor(t, d, "late container released", func(s *snapshot.Snapshot) bool {
		_, ok := byID(s, late.ID)
		return !ok
	})
	if evs := rec.since(rmMark, late.ID); len(evs) != 1 || evs[0].ev.Kind != source.Removed {
		t.Errorf("events of the removed container = %s, want one Removed", evs)
	} else {
		t.Logf("late container removed: released %s after the remove call began", evs[0].at.Sub(rmMark).Round(time.Millisecond))
	}
	if n := errorCount(s, "actuate") + errorCount(s, "sense"); n != 0 {
		t.Errorf("errors in the snapshot: %+v", s.Errors)
	}
	// Its cgroup went with it: no weight entry of it can be left anywhere.
	if dir, err := h.Path(wl.Cgroup); err != nil {
		t.Error(err)
	} else if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cgroup %s of the removed container still there: %v", dir, err)
	}
	if _, ok := byID(s, bulk.ID); !ok {
		t.Errorf("bulk no longer tracked after the late container went")
	}

	// Shutdown restores the bulk container's cgroup: no per-device weight.
	if err := stop(); err != nil {
		t.Fatalf("daemon: %v", err)
	}
	if v, ok := r.deviceWeight(t, wb.Cgroup); ok {
		t.Errorf("after shutdown the bulk container still has weight %d on %s", v, r.dev.Dev)
	}
	if got := dockertest.WaitRunning(t, c, bulk.ID, 10*time.Second); got != pid {
		t.Errorf("bulk container's pid %d at the end, was %d", got, pid)
	}
}

// runDaemon runs d until the test ends; runErr receives Run's result should
// it return early, stop ends it and returns that result.
func runDaemon(t *testing.T, d *Daemon) (runErr <-chan error, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				err = errors.New("daemon did not stop within 30s")
			}
		})
		return err
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	return done, stop
}

// workloadWatch polls the daemon's snapshot every 10ms and counts how one
// workload appears in them.
type workloadWatch struct {
	quit chan struct{}
	done chan watchCounts
}

type watchCounts struct {
	total, atLevel4, otherLevel, missing int
	lastTick                             uint64
}

func watchWorkload(d *Daemon, id string) *workloadWatch {
	w := &workloadWatch{quit: make(chan struct{}), done: make(chan watchCounts, 1)}
	go func() {
		var c watchCounts
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-w.quit:
				w.done <- c
				return
			case <-tk.C:
			}
			s := d.Snapshot()
			if s == nil || s.Tick == c.lastTick {
				continue
			}
			c.lastTick = s.Tick
			c.total++
			switch wl, ok := byID(s, id); {
			case !ok:
				c.missing++
			case wl.Level == 4:
				c.atLevel4++
			default:
				c.otherLevel++
			}
		}
	}()
	return w
}

func (w *workloadWatch) stop() watchCounts {
	close(w.quit)
	return <-w.done
}

// recordingSource passes on its inner source's events and keeps them, with
// the time each was sent.
type recordingSource struct {
	inner source.Source
	mu    sync.Mutex
	evs   []recordedEvent
}

type recordedEvent struct {
	at time.Time
	ev source.Event
}

func (e recordedEvent) String() string {
	return fmt.Sprintf("%s %s %.12s pid %d", e.at.Format("15:04:05.000"), e.ev.Kind, e.ev.Workload.ID, e.ev.Workload.Pid)
}

func (r *recordingSource) Name() string { return r.inner.Name() }

func (r *recordingSource) Run(ctx context.Context, out chan<- source.Event) error {
	in := make(chan source.Event, 64)
	done := make(chan error, 1)
	go func() { done <- r.inner.Run(ctx, in) }()
	for {
		select {
		case err := <-done:
			return err
		case ev := <-in:
			r.mu.Lock()
			r.evs = append(r.evs, recordedEvent{at: time.Now(), ev: ev})
			r.mu.Unlock()
			if err := source.Send(ctx, out, ev); err != nil {
				return <-done
			}
		}
	}
}

// since returns the events of workload id recorded at or after from.
func (r *recordingSource) since(from time.Time, id string) []recordedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recordedEvent
	for _, e := range r.evs {
		if e.ev.Workload.ID == id && !e.at.Before(from) {
			out = append(out, e)
		}
	}
	return out
}

// tracedEngine is the docker source's engine with its calls timed: when
// the event stream broke, which calls failed while the engine was down,
// when the resync listed the containers again.
type tracedEngine struct {
	*client.Client
	mu    sync.Mutex
	calls []engineCall
}

type engineCall struct {
	at   time.Time
	what string // "info", "list", "events": subscribed; "events-end": the stream ended
	err  error
}

func (e *tracedEngine) note(what string, err error) {
	e.mu.Lock()
	e.calls = append(e.calls, engineCall{at: time.Now(), what: what, err: err})
	e.mu.Unlock()
}

func (e *tracedEngine) Info(ctx context.Context, o client.InfoOptions) (client.SystemInfoResult, error) {
	i, err := e.Client.Info(ctx, o)
	e.note("info", err)
	return i, err
}

func (e *tracedEngine) ContainerList(ctx context.Context, o client.ContainerListOptions) (client.ContainerListResult, error) {
	l, err := e.Client.ContainerList(ctx, o)
	e.note("list", err)
	return l, err
}

func (e *tracedEngine) Events(ctx context.Context, o client.EventsListOptions) client.EventsResult {
	r := e.Client.Events(ctx, o)
	e.note("events", nil)
	out := make(chan error, 1)
	go func() {
		err, ok := <-r.Err
		if !ok {
			close(out)
			return
		}
		e.note("events-end", err)
		out <- err
	}()
	return client.EventsResult{Messages: r.Messages, Err: out}
}

// waitCall waits until a call what succeeded at or after from.
func (e *tracedEngine) waitCall(t *testing.T, what string, from time.Time, within time.Duration) engineCall {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		e.mu.Lock()
		for _, c := range e.calls {
			if c.what == what && c.err == nil && !c.at.Before(from) {
				e.mu.Unlock()
				return c
			}
		}
		e.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no successful %s call to the engine within %s; calls: %s", what, within, e.summary(from, func(at time.Time) string {
		return at.Sub(from).Round(time.Millisecond).String()
	}))
	return engineCall{}
}

// summary lists the calls from from on, errors shortened.
func (e *tracedEngine) summary(from time.Time, rel func(time.Time) string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var parts []string
	for _, c := range e.calls {
		if c.at.Before(from) {
			continue
		}
		s := c.what + "@" + rel(c.at)
		if c.err != nil {
			msg := c.err.Error()
			if i := strings.LastIndex(msg, ": "); i >= 0 {
				msg = msg[i+2:]
			}
			s += " (" + msg + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

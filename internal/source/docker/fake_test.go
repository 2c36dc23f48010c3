package docker

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// fakeEngine speaks just enough of the Engine API, over a unix socket, for
// the real SDK client: _ping, info, containers/json, containers/<id>/json and
// a streaming events endpoint. It can be stopped and started again on the
// same socket, which is what an engine restart looks like to a client.
type fakeEngine struct {
	t      *testing.T
	sock   string
	driver string

	mu         sync.Mutex
	containers map[string]fakeContainer
	subs       map[chan events.Message]bool
	srv        *http.Server
	requests   map[string]int // by endpoint
	hang       map[string]int // by path: how many more requests get no answer
}

type fakeContainer struct {
	id, name, parent string
	pid              int
	labels           map[string]string
}

func newFakeEngine(t *testing.T, driver string) *fakeEngine {
	f := &fakeEngine{
		t:          t,
		sock:       filepath.Join(t.TempDir(), "docker.sock"),
		driver:     driver,
		containers: map[string]fakeContainer{},
		subs:       map[chan events.Message]bool{},
		requests:   map[string]int{},
		hang:       map[string]int{},
	}
	f.start()
	t.Cleanup(f.stop)
	return f
}

func (f *fakeEngine) client() *client.Client {
	c, err := client.New(client.WithHost("unix://" + f.sock))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	return c
}

var versionPrefix = regexp.MustCompile(`^/v[0-9.]+`)

func (f *fakeEngine) start() {
	os.Remove(f.sock)
	l, err := net.Listen("unix", f.sock)
	if err != nil {
		f.t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(f.serve)}
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
	go srv.Serve(l)
}

// stop closes the listener and every connection, the event streams too.
func (f *fakeEngine) stop() {
	f.mu.Lock()
	srv := f.srv
	f.srv = nil
	f.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

func (f *fakeEngine) serve(w http.ResponseWriter, r *http.Request) {
	p := versionPrefix.ReplaceAllString(r.URL.Path, "")
	f.mu.Lock()
	f.requests[strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)[0]]++
	hang := f.hang[p] > 0
	if hang {
		f.hang[p]--
	}
	f.mu.Unlock()
	if hang {
		// Taken, never answered: until the client gives up.
		<-r.Context().Done()
		return
	}
	w.Header().Set("Api-Version", "1.41")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case p == "/_ping":
		w.Write([]byte("OK"))
	case p == "/info":
		json.NewEncoder(w).Encode(system.Info{CgroupDriver: f.driver})
	case p == "/containers/json":
		f.mu.Lock()
		var list []container.Summary
		for _, c := range f.containers {
			list = append(list, container.Summary{ID: c.id, Names: []string{"/" + c.name}, State: "running"})
		}
		f.mu.Unlock()
		json.NewEncoder(w).Encode(list)
	case strings.HasPrefix(p, "/containers/") && strings.HasSuffix(p, "/json"):
		id := strings.TrimSuffix(strings.TrimPrefix(p, "/containers/"), "/json")
		f.mu.Lock()
		c, ok := f.containers[id]
		f.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"message":"No such container: ` + id + `"}`))
			return
		}
		json.NewEncoder(w).Encode(container.InspectResponse{
			ID: c.id, Name: "/" + c.name,
			State:      &container.State{Running: true, Pid: c.pid, Status: "running"},
			HostConfig: &container.HostConfig{Resources: container.Resources{CgroupParent: c.parent}},
			Config:     &container.Config{Labels: c.labels},
		})
	case p == "/events":
		ch := make(chan events.Message, 64)
		f.mu.Lock()
		f.subs[ch] = true
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			delete(f.subs, ch)
			f.mu.Unlock()
		}()
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		enc := json.NewEncoder(w)
		for {
			select {
			case <-r.Context().Done():
				return
			case m := <-ch:
				if err := enc.Encode(m); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}
	default:
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"message":"not faked: ` + p + `"}`))
	}
}

func (f *fakeEngine) put(c fakeContainer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers[c.id] = c
}

func (f *fakeEngine) del(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.containers, id)
}

// emit sends a container event to every subscriber.
func (f *fakeEngine) emit(action events.Action, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		ch <- events.Message{Type: events.ContainerEventType, Action: action, Actor: events.Actor{ID: id}}
	}
}

// waitSubscribed waits until some client follows the event stream.
func (f *fakeEngine) waitSubscribed() {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		n := len(f.subs)
		f.mu.Unlock()
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.t.Fatal("no event subscriber within 5s")
}

func (f *fakeEngine) count(endpoint string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[endpoint]
}

var hybridLayout = cgroupfs.Layout{
	Mode:        cgroupfs.ModeHybrid,
	V1:          []cgroupfs.V1Mount{{Mountpoint: "/sys/fs/cgroup/blkio", Root: "/", Controllers: []string{"blkio"}}},
	Unified:     "/sys/fs/cgroup/unified",
	UnifiedRoot: "/",
}

type harness struct {
	t      *testing.T
	engine *fakeEngine
	procfs string
	logs   *testkit.SyncBuffer
	out    chan source.Event
	done   chan error
	cancel context.CancelFunc
	src    *Source
}

// startHarness runs a Source over f, its options changed by each of opts
// (a ProcFS set there is the harness's procfs).
func startHarness(t *testing.T, f *fakeEngine, min, max time.Duration, opts ...func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, engine: f, logs: &testkit.SyncBuffer{}, out: make(chan source.Event), done: make(chan error, 1)}
	o := Options{
		Engine: f.client(), Layout: hybridLayout, ProcFS: t.TempDir(),
		MinBackoff: min, MaxBackoff: max,
		Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, set := range opts {
		set(&o)
	}
	h.procfs = o.ProcFS
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h.src = s
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- s.Run(ctx, h.out) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.done:
			if err != nil {
				t.Errorf("Run = %v after cancellation, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Run did not return within 5s of cancellation")
		}
		if t.Failed() {
			t.Logf("source log:\n%s", h.logs.String())
		}
	})
	return h
}

func (h *harness) expect(kind source.EventKind, want source.Workload) {
	h.t.Helper()
	select {
	case ev := <-h.out:
		if ev.Kind != kind || !ev.Workload.Equal(want) {
			h.t.Fatalf("event = %v %+v\nwant    %v %+v", ev.Kind, ev.Workload, kind, want)
		}
	case err := <-h.done:
		h.t.Fatalf("Run returned %v while waiting for %v %s", err, kind, want.Name)
	case <-time.After(5 * time.Second):
		h.t.Fatalf("no %v %s within 5s", kind, want.Name)
	}
}

// expectKinds wants the next events to be of kinds, in order, an Added one
// of container id (in cgroup cg unless "").
func (h *harness) expectKinds(id, cg string, kinds ...source.EventKind) {
	h.t.Helper()
	for i, want := range kinds {
		select {
		case ev := <-h.out:
			if ev.Kind != want || (want == source.Added && (ev.Workload.ID != id || (cg != "" && ev.Workload.Cgroup != cg))) {
				h.t.Fatalf("event %d: %v %+v, want %v (of %s in %q)", i, ev.Kind, ev.Workload, want, id, cg)
			}
		case <-time.After(5 * time.Second):
			h.t.Fatalf("no %v within 5 s", want)
		}
	}
}

func (h *harness) expectNone(wait time.Duration) {
	h.t.Helper()
	select {
	case ev := <-h.out:
		h.t.Fatalf("unexpected event %v %+v", ev.Kind, ev.Workload)
	case <-time.After(wait):
	}
}

const id3 = "3333333333333333333333333333333333333333333333333333333333333333"
const id4 = "4444444444444444444444444444444444444444444444444444444444444444"

func TestFakeEngineEvents(t *testing.T) {
	t.Parallel()
	f := newFakeEngine(t, DriverCgroupfs)
	c1 := fakeContainer{id: id1, name: "web", pid: 101, labels: map[string]string{"ddiskqos.level": "high"}}
	c2 := fakeContainer{id: id2, name: "batch", pid: 102, parent: "/tenants"}
	f.put(c1)
	f.put(c2)
	h := startHarness(t, f, time.Millisecond, 10*time.Millisecond)
	// c1's main process is readable in /proc; c2's is not (config fallback).
	writeProc(t, h.procfs, 101, hybridFile("/docker/"+id1))

	w1 := source.Workload{ID: id1, Name: "web", Labels: c1.labels, Cgroup: "/docker/" + id1, Pid: 101}
	w2 := source.Workload{ID: id2, Name: "batch", Cgroup: "/tenants/" + id2, Pid: 102}
	// Listed in id order.
	h.expect(source.Added, w2)
	h.expect(source.Added, w1)
	h.expect(source.Synced, source.Workload{}) // the listing is complete

	// A start for an already listed container (it overlapped the listing)
	// is deduplicated.
	f.emit(events.ActionStart, id1)
	h.expectNone(50 * time.Millisecond)

	c3 := fakeContainer{id: id3, name: "db", pid: 103, parent: "/x"}
	f.put(c3)
	f.emit(events.ActionStart, id3)
	w3 := source.Workload{ID: id3, Name: "db", Cgroup: "/x/" + id3, Pid: 103}
	h.expect(source.Added, w3)

	// docker update: reported even though nothing in the Workload changed.
	f.emit(events.ActionUpdate, id1)
	h.expect(source.Updated, w1)
	// rename changes the name.
	c1.name = "web2"
	f.put(c1)
	f.emit(events.ActionRename, id1)
	w1.Name = "web2"
	h.expect(source.Updated, w1)

	f.del(id2)
	f.emit(events.ActionDie, id2)
	h.expect(source.Removed, w2)
	f.emit(events.ActionDestroy, id2) // already gone: nothing
	// A container that vanished between its event and the inspect.
	f.emit(events.ActionStart, id4)
	// Events of other kinds are ignored.
	f.mu.Lock()
	for ch := range f.subs {
		ch <- events.Message{Type: events.NetworkEventType, Action: events.ActionDestroy, Actor: events.Actor{ID: id1}}
	}
	f.mu.Unlock()
	f.del(id3)
	f.emit(events.ActionDie, id3)
	h.expect(source.Removed, w3) // the next event: nothing came of id2's destroy or id4
	// update of a container that is not running (not known): nothing.
	f.emit(events.ActionUpdate, id2)
	h.expectNone(50 * time.Millisecond)
}

// TestFakeEngineRestart stops the engine (closing the event stream, refusing
// connections), changes the containers meanwhile, and starts it again: the
// source must reconnect with backoff and resync.
func TestFakeEngineRestart(t *testing.T) {
	t.Parallel()
	f := newFakeEngine(t, DriverSystemd)
	c1 := fakeContainer{id: id1, name: "a", pid: 11}
	c2 := fakeContainer{id: id2, name: "b", pid: 12}
	c3 := fakeContainer{id: id3, name: "c", pid: 13}
	f.put(c1)
	f.put(c2)
	f.put(c3)
	h := startHarness(t, f, 10*time.Millisecond, 40*time.Millisecond)
	scope := func(id string) string { return "/system.slice/docker-" + id + ".scope" }
	w1 := source.Workload{ID: id1, Name: "a", Cgroup: scope(id1), Pid: 11}
	w2 := source.Workload{ID: id2, Name: "b", Cgroup: scope(id2), Pid: 12}
	w3 := source.Workload{ID: id3, Name: "c", Cgroup: scope(id3), Pid: 13}
	h.expect(source.Added, w2)
	h.expect(source.Added, w3)
	h.expect(source.Added, w1)
	h.expect(source.Synced, source.Workload{})
	f.waitSubscribed()
	before := f.count("info")

	f.stop()
	// While the engine is down: c2 goes away, c1 restarts with a new pid,
	// c4 appears, c3 stays as it was.
	f.del(id2)
	c1.pid = 21
	f.put(c1)
	c4 := fakeContainer{id: id4, name: "d", pid: 14, labels: map[string]string{"k": "v"}}
	f.put(c4)
	time.Sleep(300 * time.Millisecond) // several refused reconnections
	f.start()

	// Resync: vanished ones first, then the listing in id order
	// (id2 < id3 < id4 < id1).
	h.expect(source.Removed, w2)
	h.expect(source.Added, source.Workload{ID: id4, Name: "d", Labels: c4.labels, Cgroup: scope(id4), Pid: 14})
	w1.Pid = 21
	h.expect(source.Updated, w1)
	// c3 unchanged: nothing; and no second Synced: c4, listed by the
	// resync, started after the source began and is new.
	h.expectNone(50 * time.Millisecond)

	if n := strings.Count(h.logs.String(), "reconnecting"); n < 3 {
		t.Errorf("%d reconnection attempts logged in 300ms with 10-40ms backoff, want >= 3", n)
	}
	if f.count("info") <= before {
		t.Errorf("engine info not asked again after reconnecting")
	}
	// The new stream works.
	f.waitSubscribed()
	f.del(id3)
	f.emit(events.ActionDie, id3)
	h.expect(source.Removed, w3)
}

// TestFakeEngineUnreachableAtStart: an engine that is down when the source
// starts is retried (at boot dockerd may come up after the daemon): the
// source is degraded meanwhile — Health says why, Errors counts, one WARN —
// and finds the containers once the engine answers.
func TestFakeEngineUnreachableAtStart(t *testing.T) {
	t.Parallel()
	f := newFakeEngine(t, DriverCgroupfs)
	c := f.client()
	f.stop()
	var logs testkit.SyncBuffer
	s, err := New(Options{Engine: c, Layout: hybridLayout, ProcFS: t.TempDir(), MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 40 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if h := s.Health(); h != "" {
		t.Errorf("Health before Run = %q, want healthy", h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan source.Event, 8)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, out) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run after cancel = %v, want nil", err)
		}
		if t.Failed() {
			t.Logf("source log:\n%s", logs.String())
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for s.Errors() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("after 5s %d failed attempts, want >= 3", s.Errors())
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned %v with the engine down at start, want it to retry", err)
	default:
	}
	h := s.Health()
	if !strings.Contains(h, "degraded") || !strings.Contains(h, "unreachable") {
		t.Errorf("Health with the engine down = %q", h)
	}
	t.Logf("Health: %s", h)
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "docker engine unreachable") {
		t.Errorf("%d WARN lines after %d failed attempts, want 1 (docker engine unreachable):\n%s", n, s.Errors(), logs.String())
	}

	f.put(fakeContainer{id: id1, name: "a", pid: 1})
	f.start()
	select {
	case ev := <-out:
		if ev.Kind != source.Added || ev.Workload.ID != id1 {
			t.Errorf("first event %v %+v, want Added %s", ev.Kind, ev.Workload, id1)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no container reported within 5s of the engine coming up")
	}
	// The first listing that succeeded is the one that ends with Synced.
	select {
	case ev := <-out:
		if ev.Kind != source.Synced {
			t.Errorf("event after the first listing %v %+v, want synced", ev.Kind, ev.Workload)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no synced event within 5s of the first listing")
	}
	if h := s.Health(); h != "" {
		t.Errorf("Health after the engine came up = %q, want healthy", h)
	}
	if !strings.Contains(logs.String(), "docker engine reachable again") {
		t.Errorf("recovery not logged:\n%s", logs.String())
	}
}

// TestFakeEngineCallHangs: an engine that takes a call and never answers
// it (the listing, then an inspect) is unreachable after CallTimeout: one
// WARN, a new session, and the container reported once it answers.
func TestFakeEngineCallHangs(t *testing.T) {
	t.Parallel()
	f := newFakeEngine(t, DriverCgroupfs)
	f.put(fakeContainer{id: id1, name: "a", pid: 1})
	f.mu.Lock()
	f.hang["/containers/json"] = 1
	f.hang["/containers/"+id1+"/json"] = 1
	f.mu.Unlock()
	h := startHarness(t, f, 10*time.Millisecond, 40*time.Millisecond, func(o *Options) { o.CallTimeout = 100 * time.Millisecond })
	h.expectKinds(id1, "", source.Added, source.Synced)
	if n := h.src.Errors(); n != 2 {
		t.Errorf("%d failed sessions, want 2 (the listing's, the inspect's)", n)
	}
	if l := h.logs.String(); strings.Count(l, "level=WARN") != 2 || !strings.Contains(l, "docker engine unreachable") ||
		!strings.Contains(l, "deadline exceeded") || !strings.Contains(l, "reachable again") {
		t.Errorf("want one WARN of the engine unreachable (a deadline exceeded) and one of it back:\n%s", l)
	}
}

// TestFakeEngineInfoHangs: an engine whose info call never answers (podman
// 4.3's service, now and then) is still followed: its containers are
// resolved from /proc, with one WARN that the driver is unknown.
func TestFakeEngineInfoHangs(t *testing.T) {
	t.Parallel()
	f := newFakeEngine(t, DriverCgroupfs)
	f.put(fakeContainer{id: id1, name: "a", pid: 101})
	f.mu.Lock()
	f.hang["/info"] = 100
	f.mu.Unlock()
	procfs := t.TempDir()
	writeProc(t, procfs, 101, hybridFile("/docker/"+id1))
	h := startHarness(t, f, 10*time.Millisecond, 40*time.Millisecond, func(o *Options) {
		o.CallTimeout, o.ProcFS = 100*time.Millisecond, procfs
	})
	h.expectKinds(id1, "/docker/"+id1, source.Added, source.Synced)
	if n := h.src.Errors(); n != 0 {
		t.Errorf("%d failed sessions, want 0: a slow info is no unreachable engine", n)
	}
	if l := h.logs.String(); strings.Count(l, "level=WARN") != 1 || !strings.Contains(l, "did not answer its info call") {
		t.Errorf("want one WARN of the info unanswered:\n%s", l)
	}
}

// TestCancelWhileReconnecting: Run returns nil when ctx ends during the
// backoff, and when it ends while a consumer does not read.
func TestCancelWhileReconnecting(t *testing.T) {
	t.Parallel()
	f := newFakeEngine(t, DriverCgroupfs)
	f.put(fakeContainer{id: id1, name: "a", pid: 1})
	h := startHarness(t, f, time.Hour, time.Hour)
	h.expect(source.Added, source.Workload{ID: id1, Name: "a", Cgroup: "/docker/" + id1, Pid: 1})
	h.expect(source.Synced, source.Workload{})
	f.stop()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(h.logs.String(), "reconnecting") {
		if time.Now().After(deadline) {
			t.Fatal("stream loss not noticed within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// the harness cleanup cancels and requires nil within 5s
}

func TestNewOptions(t *testing.T) {
	t.Parallel()
	if _, err := New(Options{}); err == nil {
		t.Error("New without a layout: no error")
	}
	if _, err := New(Options{Layout: hybridLayout, MinBackoff: time.Second, MaxBackoff: time.Millisecond}); err == nil {
		t.Error("New with max < min backoff: no error")
	}
	v2 := cgroupfs.Layout{Mode: cgroupfs.ModeV2, Unified: "/sys/fs/cgroup", UnifiedRoot: "/x"}
	s, err := New(Options{Layout: v2})
	if err != nil {
		t.Fatal(err)
	}
	if s.resolver.version != 2 || s.resolver.root != "/x" || s.resolver.procfs != "/proc" {
		t.Errorf("resolver = %+v", s.resolver)
	}
	s, err = New(Options{Layout: hybridLayout})
	if err != nil {
		t.Fatal(err)
	}
	if s.resolver.version != 1 || s.Name() != "docker" {
		t.Errorf("resolver = %+v, name %q", s.resolver, s.Name())
	}
}

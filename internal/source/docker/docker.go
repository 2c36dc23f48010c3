// Package docker discovers containers through the Docker Engine API: the
// running containers at start, then the container event stream (start, die,
// destroy, update, rename) — never by polling.
//
// The stream is subscribed to before the containers are listed, so nothing
// that happens in between is missed; the events that overlap the listing are
// deduplicated against it. The first complete listing is followed by
// source.Synced. When the stream breaks (the engine restarted), the
// source reconnects with jittered exponential backoff and lists again,
// reporting the containers that vanished meanwhile as Removed, new ones as
// Added, and ones that restarted (new main pid) as Updated.
//
// While the engine cannot be reached — lost mid-run, or down at start (the
// source retries from the start as well: at boot dockerd may come up after
// the daemon) — the source is degraded: Health says since when and why, the
// loss is logged once as a WARN, and Errors counts every failed attempt.
//
// A container's cgroup comes from its main process's /proc/<pid>/cgroup, or,
// when that cannot be read, from the engine's cgroup driver and the
// container's cgroup parent (see ComputeCgroup).
package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/events"

	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

// Engine is the part of the Engine API the source uses; *client.Client
// implements it.
type Engine interface {
	Info(ctx context.Context, options client.InfoOptions) (client.SystemInfoResult, error)
	ContainerList(ctx context.Context, options client.ContainerListOptions) (client.ContainerListResult, error)
	ContainerInspect(ctx context.Context, containerID string, options client.ContainerInspectOptions) (client.ContainerInspectResult, error)
	Events(ctx context.Context, options client.EventsListOptions) client.EventsResult
}

var _ Engine = (*client.Client)(nil)

// Default reconnection backoff bounds.
const (
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
	// DefaultCallTimeout bounds each call of a session to the engine
	// (info, the listing, an inspect): an engine that takes the request
	// and never answers is unreachable (a WARN, then a new session), not
	// waited for in silence. Seen with podman 4.3's service: in 2 of ~14
	// runs of TestRealPodmanDockerAPI the daemon logged nothing after its
	// start and tracked no container for 60 s.
	DefaultCallTimeout = 15 * time.Second
)

// Options configure a Source.
type Options struct {
	// Engine talks to dockerd. Nil: Run makes a client from the environment
	// (DOCKER_HOST, DOCKER_CERT_PATH, DOCKER_TLS_VERIFY; default the unix
	// socket /var/run/docker.sock) that negotiates the API version, so
	// engines as old as 20.10 (API 1.41) work.
	Engine Engine
	// Layout is the host's cgroup layout; it decides which line of
	// /proc/<pid>/cgroup names the I/O hierarchy (blkio on v1 and hybrid,
	// "0::" on v2) and the cgroup of that hierarchy's mount root.
	Layout cgroupfs.Layout
	// ProcFS is the root of procfs; "" means /proc.
	ProcFS string
	// MinBackoff and MaxBackoff bound the delay between reconnections;
	// zero means DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// CallTimeout bounds each call to the engine but the event stream;
	// zero means DefaultCallTimeout.
	CallTimeout time.Duration
	// Logger receives a WARN when the engine becomes unreachable and when
	// it is back, debug messages on each further attempt and on skipped
	// containers; nil discards them.
	Logger *slog.Logger
}

// Source reports running Docker containers as workloads.
type Source struct {
	engine   Engine
	resolver resolver
	min, max time.Duration
	call     time.Duration // each call's bound (Options.CallTimeout)
	infoSlow bool          // an info call timed out (WARNed once; Run's goroutine only)
	log      *slog.Logger
	lostAt   time.Time // when the event stream was lost; zero while connected (Run's goroutine only)

	failures atomic.Uint64 // failed sessions: connection lost or attempt failed
	mu       sync.Mutex    // guards down*
	// While the engine is unreachable: since when, the last error, how many
	// attempts failed.
	downSince time.Time
	downErr   error
	downTries int
}

var _ source.Source = (*Source)(nil)

// New validates the options.
func New(o Options) (*Source, error) {
	h, err := o.Layout.IOHierarchy()
	if err != nil {
		return nil, fmt.Errorf("docker source: %w", err)
	}
	root := o.Layout.UnifiedRoot
	if h.Version == 1 {
		m, _ := o.Layout.V1Controller("blkio")
		root = m.Root
	}
	s := &Source{
		engine:   o.Engine,
		resolver: resolver{procfs: o.ProcFS, version: h.Version, root: root},
		min:      o.MinBackoff,
		max:      o.MaxBackoff,
		call:     cmp.Or(o.CallTimeout, DefaultCallTimeout),
		log:      o.Logger,
	}
	if s.resolver.procfs == "" {
		s.resolver.procfs = "/proc"
	}
	if s.min <= 0 {
		s.min = DefaultMinBackoff
	}
	if s.max <= 0 {
		s.max = DefaultMaxBackoff
	}
	if s.max < s.min {
		return nil, fmt.Errorf("docker source: max backoff %s is below min backoff %s", s.max, s.min)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Name returns "docker".
func (s *Source) Name() string { return "docker" }

// Errors is how many times the engine could not be reached or the event
// stream broke since start (safe for concurrent use).
func (s *Source) Errors() uint64 { return s.failures.Load() }

// Health is "" while the source is in touch with the engine, else why not:
// since when it is unreachable, how many attempts failed, the last error.
// Safe for concurrent use.
func (s *Source) Health() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.downSince.IsZero() {
		return ""
	}
	return fmt.Sprintf("degraded: the docker engine is unreachable since %s (%s ago, %d attempts): %v; containers are not discovered or released until it is back",
		s.downSince.UTC().Format(time.RFC3339), time.Since(s.downSince).Round(time.Second), s.downTries, s.downErr)
}

// setDown records a failed attempt and reports whether it is the first of
// an outage.
func (s *Source) setDown(err error) bool {
	s.failures.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.downSince.IsZero()
	if first {
		s.downSince = time.Now()
	}
	s.downErr, s.downTries = err, s.downTries+1
	return first
}

func (s *Source) setUp() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.downSince, s.downErr, s.downTries = time.Time{}, nil, 0
}

// Run reports the running containers as Added, then Synced, then follows
// the engine's events until ctx ends. When the engine cannot be reached —
// at start or later — it retries with backoff for as long as ctx lives,
// degraded meanwhile (see Health). It fails only when no client can be made.
func (s *Source) Run(ctx context.Context, out chan<- source.Event) error {
	eng := s.engine
	if eng == nil {
		// The client negotiates the API version on its first request, once.
		c, err := client.New(client.FromEnv)
		if err != nil {
			return fmt.Errorf("docker client: %w", err)
		}
		defer c.Close()
		eng = c
	}
	known := map[string]source.Workload{}
	delay := s.min
	first := true // no listing has completed yet: the next one ends with Synced
	for {
		began := time.Now()
		synced, err := s.session(ctx, eng, known, first, out)
		if ctx.Err() != nil {
			return nil
		}
		if synced {
			first = false
			// A stream that stayed up for a while was a success: start the
			// backoff again from the bottom. One that broke at once (an
			// engine that lists but cannot stream) keeps backing off.
			if time.Since(began) >= s.max {
				delay = s.min
			}
		}
		// Equal jitter: half fixed, half random, so restarted daemons on many
		// hosts do not knock on their engines in step.
		wait := delay/2 + rand.N(delay/2+1)
		if s.lostAt.IsZero() {
			s.lostAt = time.Now()
		}
		if s.setDown(err) {
			s.log.Warn("docker engine unreachable, reconnecting; containers are not discovered or released until it is back",
				"err", err, "in", wait)
		} else {
			s.log.Debug("docker engine still unreachable, reconnecting", "err", err, "in", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		delay = min(2*delay, s.max)
	}
}

// errStreamClosed is reported when the engine ends the event stream without
// an error of its own.
var errStreamClosed = errors.New("event stream closed by the engine")

// session subscribes to events, resynchronises known with the running
// containers, then follows the events until the stream or an API call fails
// or ctx ends. synced reports whether the resync completed. With first (no
// listing completed before), the resync is followed by Synced: the
// containers it sent were found running. A later resync (after the engine
// was out of reach) sends none: a container it adds started while the
// engine was unreachable, after the consumer began, and is new to it. (One
// that a restart of the engine without live-restore restarted comes as
// Updated, with a new pid, and lives in a cgroup made again: the daemon
// tracks that afresh too.)
func (s *Source) session(ctx context.Context, eng Engine, known map[string]source.Workload, first bool, out chan<- source.Event) (synced bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the SDK's stream goroutine
	ev := eng.Events(sctx, client.EventsListOptions{Filters: make(client.Filters).
		Add("type", string(events.ContainerEventType)).
		Add("event", string(events.ActionStart), string(events.ActionDie), string(events.ActionDestroy),
			string(events.ActionUpdate), string(events.ActionRename))})
	msgs, errs := ev.Messages, ev.Err
	cctx, ccancel := context.WithTimeout(sctx, s.call)
	info, err := eng.Info(cctx, client.InfoOptions{})
	timedOut := cctx.Err() == context.DeadlineExceeded && sctx.Err() == nil
	ccancel()
	var driver string
	switch {
	case err == nil:
		driver = info.Info.CgroupDriver
	case timedOut:
		// Reachable but slow to describe itself: podman 4.3's service took
		// over 15 s for /info in 2 of ~16 runs of TestRealPodmanDockerAPI
		// (make test, 2026-12-04), every session alike. The driver only
		// names a container's cgroup when its /proc/<pid>/cgroup cannot
		// (resolve): go on without it; the listing tells whether the
		// engine answers at all.
		if !s.infoSlow {
			s.log.Warn("docker engine did not answer its info call: its cgroup driver is unknown, containers' cgroups are read from /proc only",
				"within", s.call)
			s.infoSlow = true
		}
	default:
		return false, fmt.Errorf("info: %w", err)
	}
	if err := s.resync(sctx, eng, driver, known, out); err != nil {
		return false, err
	}
	// Reachable and resynced: healthy before Synced says so to the
	// consumer (which may ask Health at once: a CI run caught it still
	// degraded when setUp came after the send).
	if !s.lostAt.IsZero() {
		s.log.Warn("docker engine reachable again, resynced", "down", time.Since(s.lostAt).Round(time.Millisecond),
			"containers", len(known))
		s.lostAt = time.Time{}
	}
	s.setUp()
	if first {
		if err := source.Send(sctx, out, source.Event{Kind: source.Synced}); err != nil {
			return false, err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case err, ok := <-errs:
			if !ok || err == nil || errors.Is(err, io.EOF) {
				err = errStreamClosed
			}
			return true, fmt.Errorf("events: %w", err)
		case m := <-msgs:
			if err := s.handle(sctx, eng, driver, known, m, out); err != nil {
				return true, err
			}
		}
	}
}

// resync lists the running containers and brings known in line with them.
func (s *Source) resync(ctx context.Context, eng Engine, driver string, known map[string]source.Workload, out chan<- source.Event) error {
	cctx, cancel := context.WithTimeout(ctx, s.call)
	list, err := eng.ContainerList(cctx, client.ContainerListOptions{})
	cancel()
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	s.log.Debug("docker engine listed its running containers", "running", len(list.Items), "known", len(known))
	running := make(map[string]bool, len(list.Items))
	ids := make([]string, 0, len(list.Items))
	for _, c := range list.Items {
		running[c.ID] = true
		ids = append(ids, c.ID)
	}
	slices.Sort(ids)
	for _, id := range slices.Sorted(maps.Keys(known)) {
		if !running[id] {
			if err := s.remove(ctx, known, id, out); err != nil {
				return err
			}
		}
	}
	for _, id := range ids {
		if err := s.refresh(ctx, eng, driver, known, id, false, out); err != nil {
			return err
		}
	}
	return nil
}

// handle applies one container event.
func (s *Source) handle(ctx context.Context, eng Engine, driver string, known map[string]source.Workload, m events.Message, out chan<- source.Event) error {
	id := m.Actor.ID
	if m.Type != events.ContainerEventType || id == "" {
		return nil
	}
	s.log.Debug("docker engine event", "action", m.Action, "id", id)
	switch m.Action {
	case events.ActionStart, events.ActionRename:
		return s.refresh(ctx, eng, driver, known, id, false, out)
	case events.ActionUpdate:
		// Someone changed the container's resources (docker update
		// --blkio-weight ...) and thereby maybe what ddiskqos wrote:
		// reported even when nothing in the Workload differs.
		return s.refresh(ctx, eng, driver, known, id, true, out)
	case events.ActionDie, events.ActionDestroy:
		return s.remove(ctx, known, id, out)
	}
	return nil
}

// refresh inspects container id and reports it Added when new, Updated when
// it changed (or always, with force), Removed when it is no longer running.
// A container that vanished before it could be inspected is no error.
func (s *Source) refresh(ctx context.Context, eng Engine, driver string, known map[string]source.Workload, id string, force bool, out chan<- source.Event) error {
	cctx, cancel := context.WithTimeout(ctx, s.call)
	res, err := eng.ContainerInspect(cctx, id, client.ContainerInspectOptions{})
	cancel()
	if cerrdefs.IsNotFound(err) {
		return s.remove(ctx, known, id, out)
	}
	if err != nil {
		return fmt.Errorf("inspect container %s: %w", id, err)
	}
	ci := res.Container
	if ci.State == nil || !ci.State.Running || ci.State.Pid <= 0 {
		return s.remove(ctx, known, id, out)
	}
	wl, err := s.workload(ci, driver)
	if err != nil {
		s.log.Info("skipping container whose cgroup is unknown", "id", id, "err", err)
		return s.remove(ctx, known, id, out)
	}
	old, ok := known[wl.ID]
	kind := source.Added
	if ok {
		if !force && old.Equal(wl) {
			return nil
		}
		kind = source.Updated
	}
	known[wl.ID] = wl
	return source.Send(ctx, out, source.Event{Kind: kind, Workload: wl})
}

func (s *Source) remove(ctx context.Context, known map[string]source.Workload, id string, out chan<- source.Event) error {
	wl, ok := known[id]
	if !ok {
		return nil
	}
	delete(known, id)
	return source.Send(ctx, out, source.Event{Kind: source.Removed, Workload: wl})
}

// workload builds the Workload of a running container.
func (s *Source) workload(ci container.InspectResponse, driver string) (source.Workload, error) {
	var labels map[string]string
	if ci.Config != nil && len(ci.Config.Labels) > 0 {
		labels = maps.Clone(ci.Config.Labels)
	}
	parent := ""
	if ci.HostConfig != nil {
		parent = ci.HostConfig.CgroupParent
	}
	cg, how, err := s.resolver.resolve(ci.ID, ci.State.Pid, driver, parent)
	if err != nil {
		return source.Workload{}, err
	}
	s.log.Debug("container cgroup resolved", "id", ci.ID, "cgroup", cg, "from", how)
	return source.Workload{
		ID:     ci.ID,
		Name:   strings.TrimPrefix(ci.Name, "/"),
		Labels: labels,
		Cgroup: cg,
		Pid:    ci.State.Pid,
	}, nil
}

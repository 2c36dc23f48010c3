package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ddiskqos/ddiskqos/internal/metrics"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func fixture() *snapshot.Snapshot {
	return &snapshot.Snapshot{
		At: t0, Tick: 7, Interval: time.Second, Source: "docker", Actuator: "cgroup", CgroupMode: "v2",
		Workloads: []*snapshot.Workload{
			{ID: "aaa111", Name: "api-1", Level: 1, Weight: 1000},
			{ID: "bbb222", Name: "api-2", Level: 2, Weight: 500},
			{ID: "ccc333", Name: "backup", Level: 4, Weight: 10},
			{ID: "ddd444", Name: "ssh", Exempt: true},
		},
		Devices: []snapshot.Device{{Name: "loop3", Dev: "7:3", Scheduler: "bfq", Mechanism: "bfq-weight", WeightsEffective: true}},
		Levels:  [5]int{1, 1, 1, 0, 1},
	}
}

// testHandler serves snap (nil: before the first tick) with the clock at now.
func testHandler(t *testing.T, snap *snapshot.Snapshot, now time.Time) http.Handler {
	t.Helper()
	reg := prometheus.NewRegistry()
	current := snapshot.Fixed(func() *snapshot.Snapshot { return snap })
	if _, err := metrics.New(reg, current); err != nil {
		t.Fatal(err)
	}
	return newHandler(current, reg, slog.New(slog.DiscardHandler), func() time.Time { return now })
}

func do(h http.Handler, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func TestAPIWorkloads(t *testing.T) {
	t.Parallel()
	h := testHandler(t, fixture(), t0)
	tests := []struct {
		target string
		want   []string // names, in order
	}{
		{"/v1/workloads", []string{"api-1", "api-2", "backup", "ssh"}},
		{"/v1/workloads?name=api", []string{"api-1", "api-2"}},
		{"/v1/workloads?level=4", []string{"backup"}},
		{"/v1/workloads?level=0", []string{"ssh"}},
		{"/v1/workloads?level=2&name=api", []string{"api-2"}},
		{"/v1/workloads?name=nomatch", []string{}},
		{"/v1/workloads?name=", []string{"api-1", "api-2", "backup", "ssh"}},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			t.Parallel()
			rec := do(h, http.MethodGet, tt.target)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			// workloads is [] (not null) when nothing matches.
			if !bytes.Contains(rec.Body.Bytes(), []byte(`"workloads":[`)) {
				t.Errorf("body has no workloads array: %s", rec.Body)
			}
			var got snapshot.Snapshot
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			names := []string{}
			for _, w := range got.Workloads {
				names = append(names, w.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.want, ",") {
				t.Errorf("workloads %v, want %v", names, tt.want)
			}
			if got.Tick != 7 || got.Interval != time.Second || got.Levels != [5]int{1, 1, 1, 0, 1} || len(got.Devices) != 1 {
				t.Errorf("host-wide fields changed by filter: %+v", got)
			}
		})
	}
}

func TestAPIWorkloadsDoesNotModifySnapshot(t *testing.T) {
	t.Parallel()
	snap := fixture()
	h := testHandler(t, snap, t0)
	do(h, http.MethodGet, "/v1/workloads?level=4")
	if len(snap.Workloads) != 4 || snap.Workloads[0].Name != "api-1" {
		t.Errorf("published snapshot modified: %+v", snap.Workloads)
	}
}

func TestAPIWorkloadsBadFilter(t *testing.T) {
	t.Parallel()
	h := testHandler(t, fixture(), t0)
	tests := []struct{ target, wantParam string }{
		{"/v1/workloads?level=x", `"level"`},
		{"/v1/workloads?level=5", `"level"`},
		{"/v1/workloads?level=-1", `"level"`},
		{"/v1/workloads?level=1&level=2", `"level"`},
		{"/v1/workloads?lvl=2", `"lvl"`},
		{"/v1/workloads?name=a&name=b", `"name"`},
		// r.URL.Query() drops these pairs silently: the unfiltered list.
		{"/v1/workloads?name=%ZZ", `"name"`},
		{"/v1/workloads?level=1;name=zz", `level=1;name=zz`},
		{"/v1/workloads?%ZZ=1", `"%ZZ"`},
		{"/v1/workloads?name=a&bogus", `"bogus"`},
		{"/v1/workloads?level=", `"level"`},
		{"/v1/workloads?level=99999999999999999999", `"level"`},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			t.Parallel()
			rec := do(h, http.MethodGet, tt.target)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
			}
			var body struct{ Error string }
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("error body is not JSON: %v: %s", err, rec.Body)
			}
			if !strings.Contains(body.Error, tt.wantParam) {
				t.Errorf("error %q does not name %s", body.Error, tt.wantParam)
			}
		})
	}
}

func TestAPIBeforeFirstTick(t *testing.T) {
	t.Parallel()
	h := testHandler(t, nil, t0)
	rec := do(h, http.MethodGet, "/v1/workloads")
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var body struct{ Error string }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || !strings.Contains(body.Error, "first tick") {
		t.Errorf("body %s (err %v), want a JSON error about the first tick", rec.Body, err)
	}
	// A bad filter is still a 400: the client's mistake, tick or no tick.
	if rec := do(h, http.MethodGet, "/v1/workloads?level=9"); rec.Code != http.StatusBadRequest {
		t.Errorf("bad filter before first tick: %d, want 400", rec.Code)
	}
	if rec := do(h, http.MethodGet, "/healthz"); rec.Code != http.StatusServiceUnavailable ||
		!strings.Contains(rec.Body.String(), "first tick") {
		t.Errorf("healthz before first tick: %d %q", rec.Code, rec.Body)
	}
	// /metrics works before the first tick: process and Go metrics, no workloads.
	rec = do(h, http.MethodGet, "/metrics")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "ddiskqos_tick_duration_seconds") ||
		strings.Contains(rec.Body.String(), "ddiskqos_workload_level") {
		t.Errorf("metrics before first tick: %d\n%.400s", rec.Code, rec.Body)
	}
}

func TestAPIHealthz(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		interval time.Duration
		age      time.Duration
		wantCode int
		wantBody string
	}{
		{"fresh", time.Second, 500 * time.Millisecond, 200, "ok\n"},
		{"at the limit", time.Second, 4 * time.Second, 200, "ok\n"},
		{"stale", time.Second, 4*time.Second + time.Millisecond, 503, "stale: the daemon loop's last tick (#7) was 4.001s ago; with --interval 1s it must be under 4s\n"},
		{"long interval fresh", 10 * time.Second, 30 * time.Second, 200, "ok\n"},
		{"long interval stale", 10 * time.Second, 45 * time.Second, 503, "stale: the daemon loop's last tick (#7) was 45s ago; with --interval 10s it must be under 31s\n"},
		{"clock behind tick", time.Second, -2 * time.Second, 200, "ok\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			snap := fixture()
			snap.Interval = tt.interval
			rec := do(testHandler(t, snap, t0.Add(tt.age)), http.MethodGet, "/healthz")
			if rec.Code != tt.wantCode || rec.Body.String() != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", rec.Code, rec.Body, tt.wantCode, tt.wantBody)
			}
		})
	}
}

func TestAPIHealthzRealClock(t *testing.T) {
	t.Parallel()
	fresh := fixture()
	fresh.At = time.Now()
	stale := fixture()
	stale.At = time.Now().Add(-time.Hour)
	reg := prometheus.NewRegistry()
	for snap, want := range map[*snapshot.Snapshot]int{fresh: 200, stale: 503} {
		h := NewHandler(snapshot.Fixed(func() *snapshot.Snapshot { return snap }), reg, nil)
		if rec := do(h, http.MethodGet, "/healthz"); rec.Code != want {
			t.Errorf("At %v ago: %d, want %d", time.Since(snap.At).Round(time.Second), rec.Code, want)
		}
	}
}

func TestAPIMetrics(t *testing.T) {
	t.Parallel()
	h := testHandler(t, fixture(), t0)
	rec := do(h, http.MethodGet, "/metrics")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
	for _, want := range []string{
		`ddiskqos_workload_level{id="ccc333",name="backup"} 4`,
		`ddiskqos_workloads_by_level{level="4"} 1`,
		`ddiskqos_device_info{device="loop3",major="7",mechanism="bfq-weight",minor="3",scheduler="bfq",weights_effective="true"} 1`,
		"go_goroutines ",
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestAPIRouting(t *testing.T) {
	t.Parallel()
	h := testHandler(t, fixture(), t0)
	tests := []struct {
		method, target string
		want           int
	}{
		{"GET", "/", 200},
		{"HEAD", "/v1/workloads", 200},
		{"HEAD", "/healthz", 200},
		{"GET", "/nope", 404},
		{"GET", "/v1/workloads/", 404},
		{"GET", "/v1", 404},
		{"GET", "/metrics/x", 404},
		{"POST", "/v1/workloads", 405},
		{"PUT", "/metrics", 405},
		{"DELETE", "/healthz", 405},
		{"POST", "/", 405},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			t.Parallel()
			rec := do(h, tt.method, tt.target)
			if rec.Code != tt.want {
				t.Errorf("status %d, want %d", rec.Code, tt.want)
			}
			if tt.want == 405 && !strings.Contains(rec.Header().Get("Allow"), "GET") {
				t.Errorf("405 without Allow: GET (Allow %q)", rec.Header().Get("Allow"))
			}
		})
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{mu: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.String()
}

func TestAPIServeShutsDownOnCancel(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testkit.Need(t, err == nil, "no loopback listener: %v", err)
	logs := newSyncBuffer()
	logger := slog.New(slog.NewTextHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	var snap atomic.Pointer[snapshot.Snapshot]
	snap.Store(fixture())
	h := NewHandler(snapshot.Fixed(snap.Load), prometheus.NewRegistry(), logger)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, "", ln, h, logger, defaultLimits) }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/v1/workloads")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"api-1"`)) {
		t.Errorf("GET over TCP: %d %.200s", resp.StatusCode, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		t.Error("still serving after shutdown")
	}
	if l := logs.String(); strings.Contains(l, "no authentication") {
		t.Errorf("warned about a loopback address:\n%s", l)
	}
}

func TestAPIServeWarnsBeyondLoopback(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	testkit.Need(t, err == nil, "cannot listen on all interfaces: %v", err)
	logs := newSyncBuffer()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := serve(ctx, "", ln, http.NotFoundHandler(), slog.New(slog.NewTextHandler(logs, nil)), defaultLimits); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "no authentication") {
		t.Errorf("no warning for %s:\n%s", ln.Addr(), logs)
	}
}

func TestAPIServeListenError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testkit.Need(t, err == nil, "no loopback listener: %v", err)
	defer ln.Close()
	addr := ln.Addr().String() // in use
	for _, bad := range []string{addr, "127.0.0.1:99999", "not-an-address"} {
		err := Serve(context.Background(), bad, http.NotFoundHandler(), nil)
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("Serve(%q) = %v, want an error naming the address", bad, err)
		}
	}
}

func TestAPIServeRealAddr(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := Serve(ctx, "127.0.0.1:0", http.NotFoundHandler(), nil)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Serve: %v", err)
	}
}

// TestAPIHealthzStateError: while the state file cannot be saved the
// daemon is not healthy, and /healthz says why.
func TestAPIHealthzStateError(t *testing.T) {
	t.Parallel()
	snap := fixture()
	snap.StateError = "open /run/ddiskqos/.state-1.tmp: read-only file system"
	rec := do(testHandler(t, snap, t0), "GET", "/healthz")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "read-only file system") {
		t.Errorf("healthz with a state error: %d %s, want 503 naming it", rec.Code, rec.Body.String())
	}
}

func TestAPIStale(t *testing.T) {
	t.Parallel()
	if Stale(nil, t0) == "" {
		t.Error("nil snapshot is healthy")
	}
	s := fixture()
	if r := Stale(s, t0.Add(time.Second)); r != "" {
		t.Errorf("1s old with 1s interval: %q", r)
	}
	s.Interval = 0 // still just the slack
	if r := Stale(s, t0.Add(2*time.Second)); r == "" {
		t.Error("2s old with no interval: healthy")
	}
}

func TestAPIDegraded(t *testing.T) {
	t.Parallel()
	if r := Degraded(nil, t0); len(r) != 1 || !strings.Contains(r[0], "not ready") {
		t.Errorf("nil snapshot: %q", r)
	}
	s := fixture()
	if r := Degraded(s, t0); r != nil {
		t.Errorf("healthy snapshot: %q", r)
	}
	s.SourceError = "degraded: the docker engine is unreachable since 2025-03-01T12:00:00Z"
	s.StateError = "rename /run/ddiskqos/state.json: read-only file system"
	r := Degraded(s, t0.Add(time.Hour))
	want := []string{"state file not saved", "source docker: the docker engine is unreachable since"}
	if len(r) != len(want) {
		t.Fatalf("state error and source down: %q, want %d reasons", r, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(r[i], w) {
			t.Errorf("reason %d %q, want it to start with %q", i, r[i], w)
		}
	}
	s.StateError = ""
	if r := Degraded(s, t0.Add(time.Hour)); len(r) != 2 || !strings.HasPrefix(r[0], "stale") {
		t.Errorf("stale and source down: %q", r)
	}
}

// A failing HealthCheck makes /healthz 503 with its reason, even while the
// loop ticks; a passing one leaves it 200.
func TestAPIHealthzChecks(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	snap := fixture()
	current := snapshot.Fixed(func() *snapshot.Snapshot { return snap })
	var reason atomic.Value
	reason.Store("")
	h := newHandler(current, reg, nil, func() time.Time { return t0 }, func() string { return reason.Load().(string) })
	if rec := do(h, http.MethodGet, "/healthz"); rec.Code != 200 {
		t.Fatalf("passing check: %d %s", rec.Code, rec.Body)
	}
	reason.Store("degraded: the docker engine is unreachable")
	rec := do(h, http.MethodGet, "/healthz")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "docker engine is unreachable") {
		t.Fatalf("failing check: %d %q, want 503 with its reason", rec.Code, rec.Body)
	}
	// Stale and degraded: both reasons.
	h = newHandler(current, reg, nil, func() time.Time { return t0.Add(time.Hour) }, func() string { return reason.Load().(string) })
	rec = do(h, http.MethodGet, "/healthz")
	if b := rec.Body.String(); rec.Code != 503 || !strings.Contains(b, "stale") || !strings.Contains(b, "docker") {
		t.Errorf("stale and degraded: %d %q", rec.Code, b)
	}
}

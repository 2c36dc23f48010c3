// Package api is the daemon's HTTP surface: the current snapshot as JSON
// (what `ddiskqos status` reads), Prometheus metrics and a health check.
//
// Every handler reads the immutable snapshot the daemon loop publishes, so
// no request waits for or races the loop; it releases the snapshot when it
// is done (snapshot.Acquirer), so the loop may reuse its records. The API has no authentication:
// it listens on loopback unless told otherwise.
//
//	GET /v1/workloads[?name=SUBSTR][&level=N]  snapshot as JSON; 503 before the first tick
//	GET /metrics                               Prometheus exposition
//	GET /healthz                               200 "ok", or 503 with the reason when the loop
//	                                           has stalled or a HealthCheck fails (degraded)
package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ddiskqos/ddiskqos/internal/metrics"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// WorkloadsPath is where the snapshot is served.
const WorkloadsPath = "/v1/workloads"

// staleSlack is added to 3×interval before /healthz calls the loop stale,
// so a short interval does not flap on one slow tick.
const staleSlack = time.Second

// NewHandler serves the endpoints above. current returns the newest
// snapshot, nil before the first tick, and its release; /metrics exposes gatherer (a
// registry metrics.New registered on) plus the per-workload series of
// current() (see metrics.Handler).
// /healthz also asks every check (say, whether the Docker engine is
// reachable). Unknown paths get 404, other methods than GET (and HEAD) 405.
func NewHandler(current snapshot.Acquirer, gatherer prometheus.Gatherer, logger *slog.Logger, checks ...HealthCheck) http.Handler {
	return newHandler(current, gatherer, logger, time.Now, checks...)
}

// HealthCheck is "" when what it checks is fine, else the reason /healthz
// reports (with 503). It must be safe for concurrent use.
type HealthCheck func() string

// newHandler is NewHandler with the clock /healthz measures age against.
func newHandler(current snapshot.Acquirer, gatherer prometheus.Gatherer, logger *slog.Logger, now func() time.Time, checks ...HealthCheck) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &server{current: current, logger: logger, now: now, checks: checks}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.index)
	mux.HandleFunc("GET "+WorkloadsPath, s.workloads)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.Handle("GET /metrics", metrics.Handler(gatherer, current, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelError),
		// One bad series (say, two workloads with one id) must not blank the
		// whole scrape; the error is logged.
		ErrorHandling: promhttp.ContinueOnError,
		// A scrape of 10,000 workloads is ~100k series: don't let a
		// misconfigured scraper pile them up.
		MaxRequestsInFlight: 4,
		Timeout:             30 * time.Second,
	}))
	return mux
}

type server struct {
	current snapshot.Acquirer
	logger  *slog.Logger
	now     func() time.Time
	checks  []HealthCheck
}

const indexText = `ddiskqos daemon API (unauthenticated; read-only)

GET /v1/workloads   the current snapshot as JSON; filters: ?name=SUBSTR ?level=0..4
GET /metrics        Prometheus metrics
GET /healthz        "ok" while the daemon loop ticks and its source is reachable
`

func (s *server) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, indexText)
}

// workloads serves the snapshot, its Workloads filtered by the query.
// Everything else (Levels, Devices, Errors) stays host-wide.
func (s *server) workloads(w http.ResponseWriter, r *http.Request) {
	f, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		s.jsonError(w, http.StatusBadRequest, err.Error())
		return
	}
	snap, release := s.current()
	defer release()
	if snap == nil {
		w.Header().Set("Retry-After", "1")
		s.jsonError(w, http.StatusServiceUnavailable, "no snapshot yet: the daemon has not finished its first tick")
		return
	}
	out := *snap // a shallow copy: the published snapshot is never modified
	out.Workloads = f.apply(snap.Workloads)
	s.writeJSON(w, http.StatusOK, &out)
}

// filter is the query of GET /v1/workloads.
type filter struct {
	name  string
	level int // -1: any
}

// parseQuery parses and validates the raw query. r.URL.Query() would drop
// what it cannot decode (?name=%ZZ, ?level=1;name=zz) and so answer with
// the unfiltered list; here each such pair is an error naming it.
func parseQuery(raw string) (filter, error) {
	q := map[string][]string{}
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		if strings.Contains(pair, ";") {
			return filter{}, fmt.Errorf("query %q: ';' is not a separator, use '&'", pair)
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return filter{}, fmt.Errorf("query parameter %q: bad escape in its name: %v", k, err)
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return filter{}, fmt.Errorf("query parameter %q: bad escape in its value %q: %v", key, v, err)
		}
		q[key] = append(q[key], val)
	}
	return parseFilter(q)
}

// parseFilter validates the query: unknown parameters, repeated ones and
// bad values are errors naming the parameter, so a typo (?lvl=2) is not
// silently the unfiltered list.
func parseFilter(q map[string][]string) (filter, error) {
	f := filter{level: -1}
	for key, vals := range q {
		if len(vals) != 1 {
			return f, fmt.Errorf("query parameter %q given %d times, want once", key, len(vals))
		}
		v := vals[0]
		switch key {
		case "name":
			f.name = v
		case "level":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 4 {
				return f, fmt.Errorf("query parameter \"level\": %q is not a level (0 exempt, 1..4)", v)
			}
			f.level = n
		default:
			return f, fmt.Errorf("unknown query parameter %q (known: name, level)", key)
		}
	}
	return f, nil
}

func (f filter) apply(ws []*snapshot.Workload) []*snapshot.Workload {
	if f.name == "" && f.level < 0 {
		return ws
	}
	out := make([]*snapshot.Workload, 0, len(ws)/4)
	for i := range ws {
		if f.level >= 0 && ws[i].Level != f.level {
			continue
		}
		if f.name != "" && !strings.Contains(ws[i].Name, f.name) {
			continue
		}
		out = append(out, ws[i])
	}
	return out
}

// healthz is 200 while the loop publishes ticks and every check passes,
// 503 with the reasons once the last tick is older than 3 intervals
// (+1 s) or a check fails.
func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	var reasons []string
	snap, release := s.current()
	reason := Stale(snap, s.now())
	release()
	if reason != "" {
		reasons = append(reasons, reason)
	}
	for _, c := range s.checks {
		if reason := c(); reason != "" {
			reasons = append(reasons, reason)
		}
	}
	if len(reasons) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, strings.Join(reasons, "\n"))
		return
	}
	fmt.Fprintln(w, "ok")
}

// Stale says why the loop that published snap is not healthy at now, or ""
// when it is: a nil snapshot (no tick yet), a state file that cannot be
// saved (new workloads' knobs are then not written), or a last tick older
// than 3×interval + 1 s.
func Stale(snap *snapshot.Snapshot, now time.Time) string {
	if snap == nil {
		return "not ready: the daemon has not finished its first tick"
	}
	if snap.StateError != "" {
		return "state file not saved; knobs whose original it would keep are not written: " + snap.StateError
	}
	limit := 3*snap.Interval + staleSlack
	age := now.Sub(snap.At)
	if age > limit {
		return fmt.Sprintf("stale: the daemon loop's last tick (#%d) was %s ago; with --interval %s it must be under %s",
			snap.Tick, age.Round(time.Millisecond), snap.Interval, limit)
	}
	return ""
}

// Degraded lists why the daemon that published snap is not fully working
// at now, nil when it is: what Stale says (no tick yet, the state file not
// saved, a stalled loop), and a workload source that lost its backend (the
// Docker engine; the daemon keeps running and retries). /healthz answers
// 503 for each of them; `ddiskqos status` and `top` name them.
func Degraded(snap *snapshot.Snapshot, now time.Time) []string {
	var reasons []string
	if r := Stale(snap, now); r != "" {
		reasons = append(reasons, r)
	}
	if snap != nil && snap.SourceError != "" {
		// The docker source's reason starts with "degraded: " itself.
		reasons = append(reasons, "source "+snap.Source+": "+strings.TrimPrefix(snap.SourceError, "degraded: "))
	}
	return reasons
}

type errorBody struct {
	Error string `json:"error"`
}

func (s *server) jsonError(w http.ResponseWriter, code int, msg string) {
	s.writeJSON(w, code, errorBody{Error: msg})
}

// writeJSON encodes v fully before sending, so an encoding failure is a
// clean 500 instead of a truncated 200.
func (s *server) writeJSON(w http.ResponseWriter, code int, v any) {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		s.logger.Error("api: encode json", "err", err)
		code = http.StatusInternalServerError
		b.Reset()
		b.WriteString(`{"error":"internal error encoding the response"}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if _, err := w.Write(b.Bytes()); err != nil {
		s.logger.Debug("api: write response", "err", err)
	}
}

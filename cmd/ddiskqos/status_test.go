package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ddiskqos/ddiskqos/internal/api"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/view"
	"github.com/ddiskqos/ddiskqos/internal/view/viewtest"
)

var statusT0 = viewtest.T0

// statusServer is the daemon's real API serving snap (nil: no tick yet).
func statusServer(t *testing.T, snap *snapshot.Snapshot) (addr string) {
	t.Helper()
	h := api.NewHandler(snapshot.Fixed(func() *snapshot.Snapshot { return snap }), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func runStatusT(t *testing.T, now time.Time, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = statusMain(args, &o, &e, func() time.Time { return now })
	return o.String(), e.String(), code
}

// TestStatusThroughAPI: status asks the daemon's real API with its
// filters, and prints what internal/view renders of the answer (whose
// goldens are there) in the order asked for, naming the filters.
func TestStatusThroughAPI(t *testing.T) {
	t.Parallel()
	addr := statusServer(t, viewtest.Fixture())
	for _, tt := range []struct {
		args           []string
		query, sort    string
		filters, wants string
	}{
		{nil, "", "name", "", "backup  0a1b2c3d4e5f"},
		{[]string{"--sort", "level"}, "", "level", "", "NAME "},
		{[]string{"--sort=rate"}, "", "rate", "", "NAME "},
		{[]string{"--level", "4"}, "level=4", "name", "--level 4", "showing 1 of 5 workloads (--level 4)"},
		{[]string{"--name", "nomatch", "--level", "1"}, "level=1&name=nomatch", "name", `--level 1 --name "nomatch"`, "no workloads"},
	} {
		out, errOut, code := runStatusT(t, statusT0.Add(time.Second), append([]string{"--addr", addr}, tt.args...)...)
		if code != 0 || errOut != "" {
			t.Fatalf("%q: exit %d, stderr %q", tt.args, code, errOut)
		}
		resp, err := http.Get("http://" + addr + "/v1/workloads?" + tt.query)
		if err != nil {
			t.Fatal(err)
		}
		var snap snapshot.Snapshot
		err = json.NewDecoder(resp.Body).Decode(&snap)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var want strings.Builder
		view.Status(&want, &snap, view.Order(snap.Workloads, tt.sort), addr, tt.filters, statusT0.Add(time.Second))
		if out != want.String() || !strings.Contains(out, tt.wants) {
			t.Errorf("status %q:\n%s\nwant (containing %q)\n%s", tt.args, out, tt.wants, want.String())
		}
	}
}

func TestStatusJSONUnchanged(t *testing.T) {
	t.Parallel()
	addr := statusServer(t, viewtest.Fixture())
	resp, err := http.Get("http://" + addr + "/v1/workloads?level=4")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	out, errOut, code := runStatusT(t, statusT0, "--addr", "http://"+addr, "--json", "--level", "4")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if out != string(want) {
		t.Errorf("--json changed the daemon's JSON:\n got %s\nwant %s", out, want)
	}
}

func TestStatusErrors(t *testing.T) {
	t.Parallel()
	// An address nothing listens on: listen, then close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testkit.Need(t, err == nil, "no loopback listener: %v", err)
	dead := ln.Addr().String()
	ln.Close()
	notReady := statusServer(t, nil)
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html>not a daemon</html>")
	}))
	t.Cleanup(garbage.Close)
	notFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)

	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  []string
	}{
		{"unreachable", []string{"--addr", dead}, 1, []string{"daemon not reachable at " + dead, "is `ddiskqos run` running? it listens on --listen"}},
		{"not ready", []string{"--addr", notReady}, 1, []string{"not ready", "first tick", "try again"}},
		{"not ready json", []string{"--addr", notReady, "--json"}, 1, []string{"not ready"}},
		{"not json", []string{"--addr", garbage.Listener.Addr().String()}, 1, []string{"not a ddiskqos snapshot"}},
		{"not found", []string{"--addr", notFound.Listener.Addr().String()}, 1, []string{"404 Not Found", "is it ddiskqos"}},
		{"bad flag", []string{"--bogus"}, 2, []string{"-bogus"}},
		{"bad sort", []string{"--sort", "size"}, 2, []string{`--sort "size"`, "name, level, rate"}},
		{"bad level", []string{"--level", "5"}, 2, []string{`--level "5"`}},
		{"bad level word", []string{"--level", "bulk"}, 2, []string{`--level "bulk"`}},
		{"bad addr", []string{"--addr", "ftp://x"}, 2, []string{`--addr "ftp://x"`}},
		{"bad timeout", []string{"--timeout", "0s"}, 2, []string{"--timeout"}},
		{"argument", []string{"web"}, 2, []string{`unexpected argument "web"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runStatusT(t, statusT0, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.wantCode, errOut)
			}
			if out != "" {
				t.Errorf("stdout not empty on error: %q", out)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut)
				}
			}
		})
	}
}

func TestStatusHelp(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"--help", "-h"} {
		out, errOut, code := runStatusT(t, statusT0, arg)
		if code != 0 || errOut != "" {
			t.Errorf("%s: exit %d, stderr %q", arg, code, errOut)
		}
		for _, want := range []string{"usage: ddiskqos status", "-addr", "-sort", "Columns:", "Exit status:", "Examples:", api.DefaultAddr} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: help lacks %q", arg, want)
			}
		}
	}
}

package main

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ddiskqos/ddiskqos/internal/api"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

var statusT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// statusFixture covers every column's cases: weights and limits, pinned,
// exempt, a label error, an apply error, PSI present and absent, the last
// level without allowance, a name that sorts differently from its rate.
func statusFixture() *snapshot.Snapshot {
	bfq := func(w int) snapshot.Applied {
		return snapshot.Applied{Device: "loop3", Dev: "7:3", Mechanism: "bfq-weight", Weight: w}
	}
	return &snapshot.Snapshot{
		At: statusT0, Tick: 1234, Interval: time.Second, TickDuration: 3210 * time.Microsecond,
		Source: "docker", Actuator: "cgroup", CgroupMode: "v2",
		Workloads: []*snapshot.Workload{
			{
				ID: "0a1b2c3d4e5f67890a1b2c3d4e5f67890a1b2c3d4e5f67890a1b2c3d4e5f6789", Name: "backup",
				Level: 4, BytesInLevel: 3 << 30, Weight: 10,
				ReadBps: 180 << 20, WriteBps: 2 << 20,
				Applied:  []snapshot.Applied{bfq(10), {Device: "sda", Dev: "8:0", Mechanism: "throttle", ReadBps: 10 << 20, WriteBps: 10 << 20, Throttled: true}},
				Pressure: &snapshot.Pressure{SomeAvg10: 42.5, FullAvg10: 30.1},
			},
			{
				ID: "1111111111112222222222223333333333334444444444445555555555556666", Name: "db",
				Level: 1, Pinned: true, BytesInLevel: 1536 << 10, Allowance: 8 << 20, Weight: 1000, DTasks: 2,
				ReadBps: 300 << 10, WriteBps: 120 << 10,
				Applied:  []snapshot.Applied{bfq(1000)},
				Pressure: &snapshot.Pressure{SomeAvg10: 0.25},
			},
			{
				ID: "2222222222223333333333334444444444445555555555556666666666667777", Name: "etl",
				Level: 3, BytesInLevel: 700 << 20, Allowance: 2 << 30, Weight: 100,
				ReadBps: 20 << 20, WriteBps: 40 << 20, LabelError: `ddiskqos.level "fast": want 1..4 or exempt`,
				Applied: []snapshot.Applied{{Device: "sda", Dev: "8:0", Mechanism: "throttle", WriteBps: 20 << 20, Throttled: true, Error: "write io.max: device or resource busy"}},
			},
			{ID: "3333333333334444444444445555555555556666666666667777777777778888", Name: "ssh", Exempt: true},
			{
				ID: "4444444444445555555555556666666666667777777777778888888888889999", Name: "web-1",
				Level: 2, BytesInLevel: 900, Allowance: 64 << 20, Weight: 500, ReadBps: 512,
				Applied: []snapshot.Applied{
					{Device: "sda", Dev: "8:0", Mechanism: "throttle"},
					{Device: "nvme0n1", Dev: "259:0", Mechanism: "iocost-weight", Weight: 500},
					bfq(500),
					{Device: "loop4", Dev: "7:4", Mechanism: "bfq-weight", Weight: 500},
				},
			},
		},
		Devices: []snapshot.Device{
			{Name: "sda", Dev: "8:0", Scheduler: "mq-deadline", Mechanism: "throttle", TopActiveLevel: 3, ReadBps: 20 << 20, WriteBps: 40 << 20},
			{Name: "loop3", Dev: "7:3", Scheduler: "bfq", Mechanism: "bfq-weight", WeightsEffective: true, TopActiveLevel: 1, ReadBps: 180 << 20, WriteBps: 2 << 20},
			{Name: "nvme0n1", Dev: "259:0", Scheduler: "none", Mechanism: "iocost-weight", WeightsEffective: true},
		},
		Levels:       [5]int{1, 1, 1, 1, 1},
		Errors:       []snapshot.ErrorCount{{Cause: "sense", Count: 1}, {Cause: "actuate", Count: 3}},
		HostPressure: &snapshot.Pressure{SomeAvg10: 12.34, FullAvg10: 5.5},
		Health:       statusHealthFixture(),
	}
}

// statusHealthFixture: sda exhausted, nvme0n1 draining with a model and its
// levels 2-4 held to its baseline, 4 blocked tasks, a probe with one write
// hanging.
func statusHealthFixture() *snapshot.Health {
	tte, blocked := 754.0, uint64(4)
	return &snapshot.Health{BlockedTasks: &blocked,
		Devices: []snapshot.DeviceHealth{
			{Name: "nvme0n1", State: "draining", Since: statusT0.Add(-time.Minute),
				Model: &snapshot.BurstModel{Name: "aws-gp2", Balance: 0.42, SecondsToEmpty: &tte},
				Hold: &snapshot.BurstHold{Held: true, Since: statusT0.Add(-20 * time.Second), Reason: "burst balance 49% below 50%",
					Below: 0.5, Release: 0.6, FromLevel: 2, CapIOPS: 300}},
			{Name: "sda", State: "exhausted", Since: statusT0.Add(-30 * time.Second),
				Reason: "throttled by the device (burst credit exhausted?): a steady 300 IOPS"},
		},
		Probe: &snapshot.SyncProbe{Path: "/var/tmp/ddiskqos-probe", Count: 10, Sum: 0.05, Last: 0.004, Pending: 12}}
}

// statusServer is the daemon's real API serving snap (nil: no tick yet).
func statusServer(t *testing.T, snap *snapshot.Snapshot) (addr string) {
	t.Helper()
	h := api.NewHandler(func() *snapshot.Snapshot { return snap }, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
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

// go test ./cmd/ddiskqos/ -run Status -update rewrites testdata/status/*.
func statusGolden(t *testing.T, name, got string) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", "status", name), got)
}

func TestStatusGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		golden string
		snap   func(*snapshot.Snapshot)
		age    time.Duration
		args   []string
	}{
		{golden: "table.golden", age: 1234 * time.Millisecond},
		{golden: "sort-level.golden", age: time.Second, args: []string{"--sort", "level"}},
		{golden: "sort-rate.golden", age: time.Second, args: []string{"--sort=rate"}},
		{golden: "level-4.golden", age: time.Second, args: []string{"--level", "4"}},
		{golden: "name-filter-empty.golden", age: time.Second, args: []string{"--name", "nomatch", "--level", "1"}},
		{golden: "degraded.golden", age: time.Second, snap: func(s *snapshot.Snapshot) {
			s.StateError = "rename /run/ddiskqos/state.json.tmp: read-only file system"
			s.SourceError = "degraded: the docker engine is unreachable since 2025-03-01T11:59:00Z (1m0s ago, 12 attempts): dial unix /var/run/docker.sock: connect: no such file or directory; containers are not discovered or released until it is back"
		}},
		{golden: "stale-dry-run.golden", age: 95 * time.Second, snap: func(s *snapshot.Snapshot) {
			s.DryRun = true
			s.Errors = nil
			s.HostPressure = nil
			s.Devices = nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			t.Parallel()
			snap := statusFixture()
			if tt.snap != nil {
				tt.snap(snap)
			}
			addr := statusServer(t, snap)
			out, errOut, code := runStatusT(t, statusT0.Add(tt.age), append([]string{"--addr", addr}, tt.args...)...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			statusGolden(t, tt.golden, strings.ReplaceAll(out, addr, "ADDR"))
		})
	}
}

// TestStatusColumnsAligned checks every row of the workloads table starts
// each column at the header's offset.
func TestStatusColumnsAligned(t *testing.T) {
	t.Parallel()
	addr := statusServer(t, statusFixture())
	out, _, code := runStatusT(t, statusT0, "--addr", addr)
	if code != 0 {
		t.Fatal(code)
	}
	lines := strings.Split(out, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "NAME ") {
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("no table header:\n%s", out)
	}
	header := lines[start]
	col := strings.Index(header, "LEVEL")
	for _, row := range lines[start+1 : start+6] {
		if r := []rune(row); len(r) <= col || r[col-1] != ' ' || r[col] == ' ' {
			t.Errorf("LEVEL column not at offset %d in %q", col, row)
		}
	}
}

func TestStatusJSONUnchanged(t *testing.T) {
	t.Parallel()
	addr := statusServer(t, statusFixture())
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

func TestStatusHumanBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[uint64]string{
		0: "0", 1: "1B", 1023: "1023B", 1024: "1KiB", 1536: "1.5KiB", 8 << 20: "8MiB",
		1536 << 10: "1.5MiB", 120 << 20: "120MiB", 3 << 30: "3GiB", 1 << 60: "1EiB", ^uint64(0): "16EiB",
	} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

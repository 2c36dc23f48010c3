package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/host/hosttest"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/stats"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// stats asks the daemon at --addr for the cgroup's latency: with a daemon
// that manages it, its p50/p99 and in-flight per disk (table and JSON);
// with none answering, the section says latency needs the daemon; with
// --addr off, no section and no request.
func TestStatsLatencyFromDaemon(t *testing.T) {
	t.Parallel()
	tr := hosttest.New(t)
	// cgroup2 mounted where the tree has it: stats reads the mount table.
	tr.Write("proc/self/mountinfo", "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"+
		"30 22 0:30 / "+tr.Sys+"/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate\n")
	tr.Write("sys/fs/cgroup/cgroup.controllers", "cpu io memory pids\n")
	tr.Write("sys/fs/cgroup/web/io.stat", "254:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n")
	snap := snapshot.Snapshot{Tick: 7, Latency: &snapshot.Latency{Available: true}, Workloads: []*snapshot.Workload{
		{ID: "/web", Name: "web", Cgroup: "/web", Latency: []snapshot.WorkloadLatency{{Device: "vda", Dev: "254:0",
			Read: snapshot.OpLatency{Requests: 40, InFlight: 3, TickRequests: 10, P50: 0.00085, P99: 0.0123}}}}}}
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		json.NewEncoder(w).Encode(&snap)
	}))
	defer srv.Close()
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := statsMain(context.Background(), append([]string{"--path-sys", tr.Sys, "--path-proc", tr.Proc}, args...), &out, &errb); code != 0 {
			t.Fatalf("stats %q: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}

	out := run("--addr", srv.URL, "/web")
	for _, want := range []string{"LATENCY  the daemon at " + srv.URL, "READ-P50", "vda 254:0  850µs     12ms      -          -          3"} {
		if !strings.Contains(out, want) {
			t.Errorf("with the daemon: no %q in\n%s", want, out)
		}
	}
	var s stats.Stats
	if err := json.Unmarshal([]byte(run("--addr", srv.URL, "--json", "/web")), &s); err != nil {
		t.Fatal(err)
	}
	if s.Latency == nil || len(s.Latency.Devices) != 1 || s.Latency.Devices[0].Read.P99 != 0.0123 || s.Latency.Devices[0].Read.InFlight != 3 {
		t.Errorf("--json latency %+v, want the daemon's record of /web", s.Latency)
	}

	none := testkit.FreeAddr(t) // nothing listens there
	if out := run("--addr", none, "/web"); !strings.Contains(out, "LATENCY  latency needs the daemon (ddiskqos run), which measures it; its API at "+none+" did not answer") {
		t.Errorf("without a daemon:\n%s", out)
	}
	before := asked.Load()
	if out := run("--addr", "off", "/web"); strings.Contains(out, "LATENCY") || asked.Load() != before {
		t.Errorf("--addr off: asked the daemon %d times, printed\n%s", asked.Load()-before, out)
	}
}

package stats

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// TestLatencyOf: a cgroup's latency is its daemon workload's, found by
// container id or by cgroup path; every way of having none says why.
func TestLatencyOf(t *testing.T) {
	t.Parallel()
	vda := []snapshot.WorkloadLatency{{Device: "vda", Dev: "254:0", Read: snapshot.OpLatency{Requests: 9, TickRequests: 3, P50: 0.001, P99: 0.004, InFlight: 2}}}
	on := &snapshot.Latency{Available: true}
	snap := func(l *snapshot.Latency) *snapshot.Snapshot {
		return &snapshot.Snapshot{Latency: l, Workloads: []*snapshot.Workload{
			{ID: "4f1c2d", Name: "web", Cgroup: "/docker/4f1c2d", Latency: vda},
			{ID: "/lxc.payload/db", Name: "db", Cgroup: "/lxc.payload/db", Latency: vda},
			{ID: "/lxc.payload/idle", Name: "idle", Cgroup: "/lxc.payload/idle"},
		}}
	}
	refused := &url.Error{Op: "Get", URL: "http://127.0.0.1:9191/v1/workloads", Err: errors.New("dial tcp 127.0.0.1:9191: connect: connection refused")}
	for _, tc := range []struct {
		name    string
		target  Target
		snap    *snapshot.Snapshot
		err     error
		missing string // "" : vda's figures
	}{
		{"container by id", Target{Name: "web", ID: "4f1c2d", Cgroup: "/elsewhere"}, snap(on), nil, ""},
		{"cgroup by path", Target{Name: "/lxc.payload/db", Cgroup: "lxc.payload/db/"}, snap(on), nil, ""},
		{"no daemon", Target{Cgroup: "/lxc.payload/db"}, nil, refused,
			"latency needs the daemon (ddiskqos run), which measures it; its API at 127.0.0.1:9191 did not answer: dial tcp 127.0.0.1:9191: connect: connection refused"},
		{"not a workload", Target{Cgroup: "/system.slice/cron.service"}, snap(on), nil, "not a workload of the daemon at 127.0.0.1:9191"},
		{"nothing timed", Target{Cgroup: "/lxc.payload/idle"}, snap(on), nil, "no request timed since the daemon began tracking it (as idle)"},
		{"sensor off", Target{Cgroup: "/lxc.payload/db"}, snap(&snapshot.Latency{Off: true, Reason: "off by configuration (latency: off)"}), nil,
			"the daemon's latency sensor is off by configuration (latency: off)"},
		{"sensor unavailable", Target{Cgroup: "/lxc.payload/db"}, snap(&snapshot.Latency{Reason: "no BTF: open vmlinux"}), nil,
			"the daemon's latency sensor is unavailable: no BTF: open vmlinux (ddiskqos check: latency.ebpf)"},
		{"no latency stage", Target{Cgroup: "/lxc.payload/db"}, snap(nil), nil, "the daemon at 127.0.0.1:9191 measures no latency"},
	} {
		l := LatencyOf(tc.target, tc.snap, tc.err, "127.0.0.1:9191")
		if l.Daemon != "127.0.0.1:9191" {
			t.Errorf("%s: daemon %q", tc.name, l.Daemon)
		}
		if tc.missing == "" {
			if l.Missing != "" || len(l.Devices) != 1 || l.Devices[0].Read.P99 != 0.004 {
				t.Errorf("%s: %+v, want vda's figures", tc.name, l)
			}
			continue
		}
		if !strings.HasPrefix(l.Missing, tc.missing) || len(l.Devices) != 0 {
			t.Errorf("%s: missing %q, devices %v; want %q and none", tc.name, l.Missing, l.Devices, tc.missing)
		}
	}
}

package view

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/stats"
)

// statsSample is a v2 container reading with pressure and rates, and a v1
// cgroup with a name carrying a terminal escape, missing values and notes.
func statsSample() []*stats.Stats {
	at := time.Date(2026, 11, 23, 12, 0, 1, 0, time.UTC)
	psi := &stats.Pressure{Some: stats.PSI{Avg10: 12.5, TotalUs: 2256196}, Full: &stats.PSI{Avg10: 10, TotalUs: 2134438}}
	return []*stats.Stats{
		{Name: "web", ID: "4f1c2d3e4f5a6b7c8d9e", Cgroup: "/system.slice/docker-4f1c2d3e4f5a6b7c8d9e.scope", Time: at, CgroupVersion: 2,
			CPU: &stats.CPU{UsageNs: 1203040000, UserNs: 901243000, SystemNs: 301797000,
				Throttling: &stats.Throttling{Periods: 51, Throttled: 12, ThrottledNs: 604553000}, Pressure: psi},
			Memory: &stats.Memory{UsageBytes: 27992064, PeakBytes: 29020160, LimitBytes: 512 << 20, CacheBytes: 22278144, AnonBytes: 4460544,
				PgFault: 94783, PgMajFault: 25, OOMKills: 1},
			IO: &stats.IO{File: "io.stat", Pressure: psi, Devices: []stats.Device{
				{Dev: "254:0", Name: "vda", ReadBytes: 90 << 20, WriteBytes: 1 << 20, ReadOps: 8950, WriteOps: 12},
				{Dev: "7:3", Name: "loop3", ReadBytes: 64 << 20, ReadOps: 64, Lowers: []string{"254:0"}}}},
			Pids: &stats.Pids{Current: 3, Limit: 100},
			Net: &stats.Net{Pid: 4242, Netns: "net:[4026532301]", Interfaces: []stats.Interface{
				{Name: "eth0", RxBytes: 180568, RxPackets: 89, TxBytes: 28316, TxPackets: 92, RxDropped: 1}, {Name: "lo"}}},
			Rates: &stats.Rates{Seconds: 1, CPUPercent: 45.2, CPUThrottledPercent: 20, ReadBps: 12 << 20, ReadIOPS: 120, RxBps: 2048, PgFaultsPerSec: 10},
			Latency: &stats.Latency{Daemon: "127.0.0.1:9191", Devices: []snapshot.WorkloadLatency{
				{Device: "loop3", Dev: "7:3", Read: snapshot.OpLatency{Requests: 64, Bytes: 64 << 20, InFlight: 2, TickRequests: 12, P50: 0.00085, P99: 0.0123}},
				{Device: "vda", Dev: "254:0", Read: snapshot.OpLatency{Requests: 8950, Bytes: 90 << 20, InFlight: 1, TickRequests: 120, P50: 0.000212, P99: 0.0021},
					Write: snapshot.OpLatency{Requests: 12, Bytes: 1 << 20}}}}},
		{Name: "/evil\x1b]0;x\a", Cgroup: "/evil\x1b]0;x\a", Time: at, CgroupVersion: 1,
			CPU: &stats.CPU{UsageNs: 5e9, UserNs: 3e9, SystemNs: 2e9},
			IO:  &stats.IO{File: "blkio.throttle.io_service_bytes_recursive", Devices: []stats.Device{{Dev: "7:0"}}},
			Net: &stats.Net{Pid: 77, Netns: "net:[4026531833]", SharedWith: "pid 1", Interfaces: []stats.Interface{{Name: "eth0", RxBytes: 1 << 30}}},
			Latency: &stats.Latency{Daemon: "127.0.0.1:9191", Missing: "latency needs the daemon (ddiskqos run), which measures it; its API at 127.0.0.1:9191 did not answer: " +
				"dial tcp 127.0.0.1:9191: connect: connection refused"},
			Missing: []string{"memory: cgroup not in memory hierarchy /sys/fs/cgroup/memory"},
			Notes:   []string{"v1 charges buffered writes to the kernel's flusher"}},
	}
}

func TestStatsGolden(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		json, watch bool
		first       bool
	}{
		{"table.golden", false, false, true},
		{"watch.golden", false, true, false},
		{"json.golden", true, false, true},
	} {
		var b bytes.Buffer
		if err := Stats(&b, statsSample(), tt.json, tt.watch, tt.first); err != nil {
			t.Fatal(err)
		}
		if strings.ContainsRune(b.String(), 0x1b) && !tt.json {
			t.Errorf("%s: a terminal escape reached the table", tt.name)
		}
		golden(t, "stats/"+tt.name, b.String())
	}
}

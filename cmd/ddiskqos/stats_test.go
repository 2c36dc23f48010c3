package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/dockertest"
	"github.com/ddiskqos/ddiskqos/internal/stats"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// Bad input: a usage error is 2 and names the flag; a cgroup or container
// that does not exist is 1 and names it.
func TestStatsBadInput(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "name at least one container or cgroup"},
		{[]string{"--interval", "0s", "/x"}, 2, "--interval 0s"},
		{[]string{"--count", "3", "/x"}, 2, "--count 3: only with --watch"},
		{[]string{"--bogus"}, 2, "bogus"},
		{[]string{"/ddiskqos-no-such-cgroup-here"}, 1, "cgroup /ddiskqos-no-such-cgroup-here: no such cgroup"},
		{[]string{"--docker-host", "unix:///nonexistent/docker.sock", "web"}, 1, `container "web"`},
	} {
		var out, errb bytes.Buffer
		code := statsMain(context.Background(), tt.args, &out, &errb)
		if code != tt.code || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("stats %q: exit %d, stderr %q; want exit %d naming %q", tt.args, code, errb.String(), tt.code, tt.want)
		}
		if out.Len() != 0 {
			t.Errorf("stats %q: printed %q on stdout", tt.args, out.String())
		}
	}
}

// A real container on the machine's engine, named on the command line,
// doing O_DIRECT reads of a loop device: the JSON readings of --watch show
// its I/O, CPU, pids and the interfaces of its own network namespace.
func TestRealStatsDockerContainer(t *testing.T) {
	if testkit.InVM() {
		t.Skip("the Docker engine tests run on the host")
	}
	testkit.NeedRoot(t)
	c := dockertest.Client(t)
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.IOHierarchy()
	if err != nil {
		t.Fatal(err)
	}
	image := dockertest.BuildImage(t, dockertest.UniqueTag("stats"), dockertest.Remove())
	loop := testkit.LoopDevice(t, 256)
	testkit.SetScheduler(t, loop.Name, "none")
	// Paced, so the container is still reading while stats watches it.
	ctr := dockertest.RunContainer(t, c, dockertest.RunOptions{Image: image,
		Args:    []string{"workload", "--direct", "--loop", "--rate", "40MiB", "--duration", "30s", "read", loop.Path},
		Devices: []dockertest.Device{{Host: loop.Path}}})
	dockertest.WaitRunning(t, c, ctr.ID, 30*time.Second)
	if err := h.EnableV1Accounting(cgroupfs.Dev{Major: loop.Major, Minor: loop.Minor}); err != nil {
		t.Fatal(err)
	}

	var out, errb bytes.Buffer
	code := statsMain(context.Background(), []string{"--json", "--interval", "700ms", "--count", "3", ctr.Name}, &out, &errb)
	if code != 0 {
		t.Fatalf("stats %s: exit %d: %s", ctr.Name, code, errb.String())
	}
	var readings []stats.Stats
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s stats.Stats
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		readings = append(readings, s)
	}
	if len(readings) != 3 {
		t.Fatalf("%d readings, want 3:\n%s", len(readings), out.String())
	}
	first, last := readings[0], readings[2]
	if last.ID != ctr.ID || last.Name != ctr.Name || !strings.Contains(last.Cgroup, ctr.ID) {
		t.Errorf("reading names %q %q %q, want container %s %s", last.Name, last.ID, last.Cgroup, ctr.Name, ctr.ID)
	}
	dev := fmt.Sprintf("%d:%d", loop.Major, loop.Minor)
	var d0, d2 stats.Device
	for _, d := range first.IO.Devices {
		if d.Dev == dev {
			d0 = d
		}
	}
	for _, d := range last.IO.Devices {
		if d.Dev == dev {
			d2 = d
		}
	}
	// 1.4 s at 40 MiB/s: about 56 MiB; at least a quarter of it on a busy host.
	if d2.ReadBytes < d0.ReadBytes+14<<20 || d2.ReadOps <= d0.ReadOps {
		t.Errorf("container's reads on %s (%s): %+v -> %+v", loop.Name, dev, d0, d2)
	}
	if last.Rates == nil || last.Rates.ReadBps < 10<<20 || last.Rates.ReadBps > 60<<20 {
		t.Errorf("read rate of a 40 MiB/s reader: %+v", last.Rates)
	}
	if last.CPU == nil || last.CPU.UsageNs <= first.CPU.UsageNs {
		t.Errorf("cpu did not grow: %+v -> %+v", first.CPU, last.CPU)
	}
	if last.Pids == nil || last.Pids.Current < 1 {
		t.Errorf("pids: %+v", last.Pids)
	}
	// --network none: the container's namespace has loopback only, and is
	// not the one this test runs in.
	if n := last.Net; n == nil || len(n.Interfaces) != 1 || n.Interfaces[0].Name != "lo" || n.SharedWith != "" {
		t.Errorf("net of a --network none container: %+v (missing %q)", last.Net, last.Missing)
	}
	self, _ := os.Readlink("/proc/self/ns/net")
	if last.Net != nil && last.Net.Netns == self {
		t.Errorf("read the test's own network namespace %s, not the container's", self)
	}

	// The table names the container and its disk.
	out.Reset()
	if code := statsMain(context.Background(), []string{ctr.ID[:12]}, &out, &errb); code != 0 {
		t.Fatalf("stats %.12s: exit %d: %s", ctr.ID, code, errb.String())
	}
	for _, w := range []string{ctr.Name, "container " + ctr.ID[:12], loop.Name + " " + dev, "  CPU", "  MEMORY", "  PIDS", "  NET", "lo"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, out.String())
		}
	}
	// Its cgroup directory, as a path under the mount, reads the same cgroup.
	out.Reset()
	if code := statsMain(context.Background(), []string{"--json", filepath.Join(h.Mount, last.Cgroup)}, &out, &errb); code != 0 {
		t.Fatalf("stats by directory: exit %d: %s", code, errb.String())
	}
	var byDir stats.Stats
	if err := json.Unmarshal(out.Bytes(), &byDir); err != nil || byDir.Cgroup != last.Cgroup {
		t.Errorf("by directory: cgroup %q (%v), want %q", byDir.Cgroup, err, last.Cgroup)
	}
	t.Logf("last reading: io %+v, rates %+v", last.IO.Devices, *last.Rates)
}

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
			Rates: &stats.Rates{Seconds: 1, CPUPercent: 45.2, CPUThrottledPercent: 20, ReadBps: 12 << 20, ReadIOPS: 120, RxBps: 2048, PgFaultsPerSec: 10}},
		{Name: "/evil\x1b]0;x\a", Cgroup: "/evil\x1b]0;x\a", Time: at, CgroupVersion: 1,
			CPU:     &stats.CPU{UsageNs: 5e9, UserNs: 3e9, SystemNs: 2e9},
			IO:      &stats.IO{File: "blkio.throttle.io_service_bytes_recursive", Devices: []stats.Device{{Dev: "7:0"}}},
			Net:     &stats.Net{Pid: 77, Netns: "net:[4026531833]", SharedWith: "pid 1", Interfaces: []stats.Interface{{Name: "eth0", RxBytes: 1 << 30}}},
			Missing: []string{"memory: cgroup not in memory hierarchy /sys/fs/cgroup/memory"},
			Notes:   []string{"v1 charges buffered writes to the kernel's flusher"}},
	}
}

func statsGolden(t *testing.T, name, got string) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", "stats", name), got)
}

// go test ./cmd/ddiskqos/ -run StatsGolden -update rewrites testdata/stats/*.
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
		if err := writeStats(&b, statsSample(), tt.json, tt.watch, tt.first); err != nil {
			t.Fatal(err)
		}
		if strings.ContainsRune(b.String(), 0x1b) && !tt.json {
			t.Errorf("%s: a terminal escape reached the table", tt.name)
		}
		statsGolden(t, tt.name, b.String())
	}
}

// The command end to end on cgroup v2 (in the VM): a cgroup named by its
// directory, an O_DIRECT reader in it; the JSON reading shows the bytes
// and io.pressure.
func TestRealV2StatsCLI(t *testing.T) {
	if !testkit.InVM() {
		t.Skip("cgroup v2 tests run inside the test VM: make test-v2")
	}
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Need(t, l.Mode == cgroupfs.ModeV2, "the VM should mount cgroup2 only, layout is %s", l.Mode)
	disk := testkit.VMDisk(t).Path
	dir := testkit.Cgroup(t, filepath.Join(l.Unified, fmt.Sprintf("ddiskqos-test-stats-cli-%d", os.Getpid())))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := workload.Start(ctx, os.Args[0], []string{workload.EnvMain + "=1"},
		[]string{"--wait-stdin", "--json", "--direct", "--bytes", "16MiB", "read", disk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(); p.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(p.Pid())), 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Go(); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := statsMain(context.Background(), []string{"--json", dir}, &out, &errb); code != 0 {
		t.Fatalf("stats %s: exit %d: %s", dir, code, errb.String())
	}
	var s stats.Stats
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("%q: %v", out.String(), err)
	}
	if s.CgroupVersion != 2 || s.Cgroup != "/"+filepath.Base(dir) {
		t.Errorf("version %d, cgroup %q", s.CgroupVersion, s.Cgroup)
	}
	if s.IO == nil || s.IO.Pressure == nil || s.IO.Pressure.Some.TotalUs == 0 || s.IOTotal().ReadBytes < uint64(res.Bytes) {
		t.Errorf("after reading %d bytes: io %+v, missing %q", res.Bytes, s.IO, s.Missing)
	}
}

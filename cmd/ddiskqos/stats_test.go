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

// The command end to end on cgroup v2 (in the VM): a cgroup named by its
// directory, an O_DIRECT reader in it; the JSON reading shows the bytes
// and io.pressure.
func TestRealV2StatsCLI(t *testing.T) {
	testkit.VMOnly(t)
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

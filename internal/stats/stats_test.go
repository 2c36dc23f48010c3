package stats

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// writeTree writes files (path relative to root → content) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A v2 cgroup as the test VM's kernel (6.1) shows it; the values map to
// the fields in the units the fields name.
func TestReadV2Tree(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	cg := filepath.Join(root, "cg", "app")
	writeTree(t, cg, map[string]string{
		"cpu.stat":        "usage_usec 1203040\nuser_usec 901243\nsystem_usec 301797\nnr_periods 51\nnr_throttled 12\nthrottled_usec 604553\n",
		"cpu.pressure":    "some avg10=1.00 avg60=0.50 avg300=0.20 total=99\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"memory.current":  "27992064\n",
		"memory.max":      "max\n",
		"memory.stat":     "anon 4460544\nfile 22278144\npgfault 94783\npgmajfault 25\n",
		"memory.events":   "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n",
		"io.stat":         "7:3 rbytes=1048576 wbytes=4096 rios=256 wios=1 dbytes=0 dios=0\n",
		"io.pressure":     "some avg10=12.50 avg60=3.00 avg300=1.00 total=2256196\nfull avg10=10.00 avg60=2.00 avg300=0.50 total=2134438\n",
		"pids.current":    "3\n",
		"pids.max":        "100\n",
		"cgroup.procs":    "",
		"memory.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
	})
	sys := t.TempDir()
	if err := os.MkdirAll(filepath.Join(sys, "dev", "block"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../devices/virtual/block/loop3", filepath.Join(sys, "dev", "block", "7:3")); err != nil {
		t.Fatal(err)
	}
	r := &Reader{Layout: cgroupfs.Layout{Mode: cgroupfs.ModeV2, Unified: root, UnifiedRoot: "/"}, ProcFS: t.TempDir(), SysFS: sys}
	s, err := r.Read(Target{Name: "app", Cgroup: "/cg/app"})
	if err != nil {
		t.Fatal(err)
	}
	if s.CgroupVersion != 2 || s.Cgroup != "/cg/app" {
		t.Errorf("version %d cgroup %q", s.CgroupVersion, s.Cgroup)
	}
	if c := s.CPU; c == nil || c.UsageNs != 1203040000 || c.UserNs != 901243000 || c.SystemNs != 301797000 ||
		c.Throttling == nil || *c.Throttling != (Throttling{51, 12, 604553000}) || c.Pressure == nil || c.Pressure.Some.TotalUs != 99 {
		t.Errorf("cpu = %+v", s.CPU)
	}
	if m := s.Memory; m == nil || m.UsageBytes != 27992064 || m.LimitBytes != 0 || m.CacheBytes != 22278144 || m.AnonBytes != 4460544 ||
		m.PgFault != 94783 || m.PgMajFault != 25 || m.OOMKills != 1 {
		t.Errorf("memory = %+v", s.Memory)
	}
	want := Device{Dev: "7:3", Name: "loop3", ReadBytes: 1 << 20, WriteBytes: 4096, ReadOps: 256, WriteOps: 1}
	if io := s.IO; io == nil || len(io.Devices) != 1 || !reflect.DeepEqual(io.Devices[0], want) || io.File != "io.stat" ||
		io.Pressure == nil || io.Pressure.Full == nil || io.Pressure.Full.TotalUs != 2134438 || io.Pressure.Some.Avg10 != 12.5 {
		t.Errorf("io = %+v", s.IO)
	}
	if p := s.Pids; p == nil || *p != (Pids{Current: 3, Limit: 100}) {
		t.Errorf("pids = %+v", s.Pids)
	}
	// Absent, and said so: memory.peak (kernels before 5.19), the network
	// (no task).
	for _, w := range []string{"memory peak", "net: no task"} {
		if !strings.Contains(strings.Join(s.Missing, "\n"), w) {
			t.Errorf("missing %q not reported: %q", w, s.Missing)
		}
	}
	if s.Net != nil {
		t.Errorf("net read without a task: %+v", s.Net)
	}
}

// A v1 cgroup in only some hierarchies: what is there is read, the rest is
// missing and named; an unlimited v1 limit is no limit.
func TestReadV1TreePartial(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	l := cgroupfs.Layout{Mode: cgroupfs.ModeHybrid, Unified: filepath.Join(root, "unified"), UnifiedRoot: "/"}
	for _, c := range []string{"cpu", "cpuacct", "memory", "blkio", "pids"} {
		l.V1 = append(l.V1, cgroupfs.V1Mount{Mountpoint: filepath.Join(root, c), Root: "/", Controllers: []string{c}})
	}
	writeTree(t, root, map[string]string{
		"cpuacct/x/cpuacct.stat":                            "user 150\nsystem 50\n", // kernels before 4.6: no usage_user
		"cpuacct/x/cpuacct.usage":                           "2000000000\n",
		"memory/x/memory.usage_in_bytes":                    "8192\n",
		"memory/x/memory.limit_in_bytes":                    "9223372036854771712\n",
		"memory/x/memory.stat":                              "cache 1\nrss 2\ntotal_cache 4096\ntotal_rss 8192\ntotal_pgfault 7\ntotal_pgmajfault 1\n",
		"blkio/x/blkio.throttle.io_service_bytes_recursive": "7:3 Read 65536\n7:3 Write 0\n7:3 Total 65536\nTotal 65536\n",
		"blkio/x/blkio.throttle.io_serviced_recursive":      "7:3 Read 16\n7:3 Write 0\n7:3 Total 16\nTotal 16\n",
	})
	r := &Reader{Layout: l, ProcFS: t.TempDir(), SysFS: t.TempDir()}
	s, err := r.Read(Target{Name: "x", Cgroup: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if c := s.CPU; c == nil || c.UsageNs != 2e9 || c.UserNs != 1.5e9 || c.SystemNs != 0.5e9 || c.Throttling != nil {
		t.Errorf("cpu = %+v", s.CPU)
	}
	if m := s.Memory; m == nil || m.LimitBytes != 0 || m.CacheBytes != 4096 || m.AnonBytes != 8192 || m.PgFault != 7 {
		t.Errorf("memory = %+v", s.Memory)
	}
	if io := s.IO; io == nil || len(io.Devices) != 1 || io.Devices[0].ReadBytes != 65536 || io.Devices[0].ReadOps != 16 ||
		io.File != "blkio.throttle.io_service_bytes_recursive" || io.Pressure != nil {
		t.Errorf("io = %+v", s.IO)
	}
	if s.Pids != nil {
		t.Errorf("pids read from a hierarchy without the cgroup: %+v", s.Pids)
	}
	all := strings.Join(s.Missing, "\n")
	for _, w := range []string{"cpu throttling: cgroup not in cpu hierarchy", "pids: cgroup not in pids hierarchy"} {
		if !strings.Contains(all, w) {
			t.Errorf("missing %q not reported: %q", w, s.Missing)
		}
	}
}

func TestReadNoCgroup(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	r := &Reader{Layout: cgroupfs.Layout{Mode: cgroupfs.ModeV2, Unified: root, UnifiedRoot: "/"}}
	_, err := r.Read(Target{Name: "/gone", Cgroup: "/gone"})
	if !errors.Is(err, ErrNoCgroup) || !strings.Contains(err.Error(), "/gone") {
		t.Fatalf("err = %v, want ErrNoCgroup naming /gone", err)
	}
	// No walking out of the hierarchy: ../ stays inside.
	if _, err := r.Read(Target{Cgroup: "../../etc"}); !errors.Is(err, ErrNoCgroup) {
		t.Fatalf("../../etc: err = %v", err)
	}
}

func TestCgroupPath(t *testing.T) {
	t.Parallel()
	r := &Reader{Layout: cgroupfs.Layout{Mode: cgroupfs.ModeHybrid, Unified: "/sys/fs/cgroup/unified",
		V1: []cgroupfs.V1Mount{{Mountpoint: "/sys/fs/cgroup/blkio"}, {Mountpoint: "/sys/fs/cgroup/cpu,cpuacct"}}}}
	for in, want := range map[string]string{
		"/docker/abc":                          "/docker/abc",
		"/sys/fs/cgroup/blkio/docker/abc":      "/docker/abc",
		"/sys/fs/cgroup/cpu,cpuacct/docker/a/": "/docker/a",
		"/sys/fs/cgroup/blkio":                 "/",
		"/sys/fs/cgroup/unified/x.slice":       "/x.slice",
		"/sys/fs/cgroup/blkiox/y":              "/sys/fs/cgroup/blkiox/y",
		"docker/../../x":                       "/x",
	} {
		if got := r.CgroupPath(in); got != want {
			t.Errorf("CgroupPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRate(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	prev := &Stats{Time: t0,
		CPU:    &CPU{UsageNs: 1e9, Throttling: &Throttling{Periods: 10, Throttled: 1}},
		IO:     &IO{Devices: []Device{{ReadBytes: 1 << 20, ReadOps: 10}, {WriteBytes: 100}}},
		Net:    &Net{Netns: "n", Interfaces: []Interface{{Name: "lo", RxBytes: 5}, {Name: "eth0", RxBytes: 100, TxBytes: 10}}},
		Memory: &Memory{PgFault: 100}}
	cur := &Stats{Time: t0.Add(2 * time.Second),
		CPU:    &CPU{UsageNs: 2e9, Throttling: &Throttling{Periods: 30, Throttled: 11}},
		IO:     &IO{Devices: []Device{{ReadBytes: 5 << 20, ReadOps: 30}, {WriteBytes: 50}}}, // second device went backwards
		Net:    &Net{Netns: "n", Interfaces: []Interface{{Name: "lo", RxBytes: 1e6}, {Name: "eth0", RxBytes: 300, TxBytes: 10}}},
		Memory: &Memory{PgFault: 300}}
	Rate(prev, cur)
	r := cur.Rates
	if r == nil {
		t.Fatal("no rates")
	}
	want := Rates{Seconds: 2, CPUPercent: 50, CPUThrottledPercent: 50, ReadBps: 2 << 20, ReadIOPS: 10, WriteBps: 0,
		RxBps: 100, TxBps: 0, PgFaultsPerSec: 100}
	if *r != want {
		t.Errorf("rates = %+v\nwant    %+v", *r, want)
	}
	// A loop device (7:3) over vda (254:0): its 8 MiB are charged to
	// vda too, and count once; vda's own 1 MiB counts.
	st := &Stats{IO: &IO{Devices: []Device{
		{Dev: "254:0", ReadBytes: 9 << 20, ReadOps: 20},
		{Dev: "7:3", ReadBytes: 8 << 20, ReadOps: 8, Lowers: []string{"254:0"}}}}}
	if tot := st.IOTotal(); tot.ReadBytes != 9<<20 || tot.ReadOps != 20 {
		t.Errorf("stacked total = %+v, want 9 MiB in 20 ops", tot)
	}
	// Not earlier: no rates.
	again := &Stats{Time: t0}
	Rate(prev, again)
	if again.Rates != nil {
		t.Errorf("rates over no time: %+v", again.Rates)
	}
}

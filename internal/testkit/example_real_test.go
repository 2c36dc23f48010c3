package testkit_test

// The complete example of TESTING.md: a real cgroup on a real disk.

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// The test binary doubles as the load generator: started again with
// DDISKQOS_WORKLOAD_MAIN=1, it runs `ddiskqos workload` instead of the tests.
func TestMain(m *testing.M) { testkit.Main(m, workload.MaybeRunFromEnv) }

// TestRealV1ExampleReaderCharged: 8 MiB read with O_DIRECT by a process in
// a new v1 blkio cgroup are charged to that cgroup on that loop device.
func TestRealV1ExampleReaderCharged(t *testing.T) {
	if testkit.InVM() {
		t.Skip("a host test: the VM has no v1 blkio hierarchy")
	}
	testkit.NeedRoot(t) // a skip, or a failure under DDISKQOS_REQUIRE_REAL=1
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	m, ok := l.V1Controller("blkio")
	testkit.Need(t, ok, "cgroup v1 blkio hierarchy not mounted (layout %s)", l.Mode)
	h := cgroupfs.Hierarchy{Version: 1, Mount: m.Mountpoint}

	loop := testkit.LoopDevice(t, 64) // detached when the test ends
	dev := cgroupfs.Dev{Major: loop.Major, Minor: loop.Minor}
	if err := h.EnableV1Accounting(dev); err != nil { // v1 counts a disk only once a rule was written
		t.Fatal(err)
	}
	rel := fmt.Sprintf("/ddiskqos-test-example-%d", os.Getpid())
	dir, _ := h.Path(rel)
	testkit.Cgroup(t, dir) // made now, removed when the test ends

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := workload.RunIn(ctx, os.Args[0], []string{workload.EnvMain + "=1"},
		[]string{"--wait-stdin", "--json", "--direct", "--bytes", "8MiB", "read", loop.Path},
		func(pid int) error { return h.AddProcess(rel, pid) }) // in the cgroup before its first read
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.Open(rel)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.ReadIO()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := st.Device(dev)
	if res.Bytes != 8<<20 || got.RBytes != 8<<20 {
		t.Fatalf("the reader read %d bytes, its cgroup was charged %d on %s; want 8 MiB both", res.Bytes, got.RBytes, loop.Name)
	}
}

package testkit_test

// The complete example of TESTING.md: a real cgroup on a real disk, on the
// host (cgroup v1, a loop device) and in the test VM (cgroup v2, its disk).

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/testkit/realcg"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// The test binary doubles as the load generator: started again with
// DDISKQOS_WORKLOAD_MAIN=1, it runs `ddiskqos workload` instead of the tests.
func TestMain(m *testing.M) { testkit.Main(m, workload.MaybeRunFromEnv) }

// TestRealV1ExampleReaderCharged: 8 MiB read with O_DIRECT by a process in
// a new v1 blkio cgroup are charged to that cgroup on that loop device.
func TestRealV1ExampleReaderCharged(t *testing.T) {
	if testkit.InVM() {
		t.Skip("a host test: in the VM TestRealV2ExampleReaderCharged runs")
	}
	readerCharged(t)
}

// TestRealV2ExampleReaderCharged is the same on cgroup v2 in the test VM
// (make test-v2 runs every TestRealV2… there).
func TestRealV2ExampleReaderCharged(t *testing.T) {
	testkit.VMOnly(t)
	readerCharged(t)
}

func readerCharged(t *testing.T) {
	// Root, the I/O hierarchy and a disk of the test's own (a skip, or a
	// failure under DDISKQOS_REQUIRE_REAL=1, when one is missing); all of
	// it undone when the test ends.
	r := realcg.New(t, realcg.Options{LoopMiB: 64})
	cg := r.Child(t, "reader")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := workload.RunIn(ctx, os.Args[0], []string{workload.EnvMain + "=1"},
		[]string{"--wait-stdin", "--json", "--direct", "--bytes", "8MiB", "read", r.Disk.Path},
		func(pid int) error { return r.H.AddProcess(cg, pid) }) // in the cgroup before its first read
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.H.Open(cg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.ReadIO()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := st.Device(r.Dev)
	if res.Bytes != 8<<20 || got.RBytes != 8<<20 {
		t.Fatalf("the reader read %d bytes, its cgroup was charged %d on %s; want 8 MiB both", res.Bytes, got.RBytes, r.Disk.Name)
	}
}

package workload_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// TestRealV1ThreadsChargeTheirCgroups runs `ddiskqos workload
// --threads-from` on a loop device with three v1 blkio cgroups listed: each
// copy's reads must be charged to its own cgroup (its thread joined it),
// none to the others, and the result must add the copies up.
func TestRealV1ThreadsChargeTheirCgroups(t *testing.T) {
	testkit.NeedRoot(t)
	const mount = "/sys/fs/cgroup/blkio"
	_, err := os.Stat(filepath.Join(mount, "blkio.throttle.io_service_bytes"))
	testkit.Need(t, err == nil, "cgroup v1 blkio not mounted at %s: %v", mount, err)
	loop := testkit.LoopDevice(t, 16)
	dev := cgroupfs.Dev{Major: loop.Major, Minor: loop.Minor}
	h := cgroupfs.Hierarchy{Version: 1, Mount: mount}
	if err := h.EnableV1Accounting(dev); err != nil {
		t.Fatal(err)
	}
	parent := testkit.Cgroup(t, filepath.Join(mount, "ddiskqos-test-threads-"+strconv.Itoa(os.Getpid())))
	var tasks []string
	const copies, each = 3, 1 << 20
	for i := range copies {
		dir := testkit.Cgroup(t, filepath.Join(parent, fmt.Sprintf("c%d", i)))
		tasks = append(tasks, filepath.Join(dir, "tasks"))
	}
	list := filepath.Join(t.TempDir(), "tasks.list")
	if err := os.WriteFile(list, []byte(strings.Join(tasks, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := workload.Start(t.Context(), os.Args[0], childEnv, []string{"--wait-stdin", "--json", "--direct",
		"--threads-from", list, "--bs", "64k", "--span", "4MiB", "--bytes", strconv.Itoa(each), "read", loop.Path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	if err := p.Go(); err != nil {
		t.Fatal(err)
	}
	r, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if r.Bytes != copies*each || r.Ops != copies*each/(64<<10) {
		t.Errorf("result: %d bytes in %d reads, want %d in %d", r.Bytes, r.Ops, copies*each, copies*each/(64<<10))
	}
	for _, f := range tasks {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(f), "blkio.throttle.io_service_bytes"))
		if err != nil {
			t.Fatal(err)
		}
		ios, err := cgroupfs.ParseBlkioRWStat(b, "blkio.throttle.io_service_bytes", false, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got uint64
		for _, d := range ios {
			if d.Dev == dev {
				got = d.RBytes
			}
		}
		// Exactly its own copy's bytes: a thread's reads went elsewhere, or
		// another copy's came here, if it is not.
		if got != each {
			t.Errorf("%s: %d bytes read from %s charged, want %d (%s)", filepath.Dir(f), got, loop.Name, each, strings.TrimSpace(string(b)))
		}
	}
}

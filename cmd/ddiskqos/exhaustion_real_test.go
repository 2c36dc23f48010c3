package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// TestRealV1NoFalseExhaustion: the daemon as users run it (defaults, the
// health tracker on), watching a loop device over a file on the machine's
// own disk and that disk too, beside the host scenario's tenants for 40 s:
// a QD32 1 MiB O_DIRECT streamer all along, a 4 KiB reader at 100/s and
// eight at 5/s, each in its own cgroup. Neither device is ever judged
// exhausted (a burst balance run dry): the loop's steady rate is the
// daemon's own cap on the streamer or the disk below it (a stacked device
// is not judged: devhealth.Tracker.StackedOn), the disk's is the loop's
// traffic stacked on it (a cap holding a workload on the loop counts as
// held on the disk), judged when that traffic is nearly all the disk
// carried. Measured before the stacked rule, in make test beside the other
// packages' tests: loop "throttled by the device (burst credit
// exhausted?): a steady 235 IOPS, 50508806 B/s while busy (peak 2434 IOPS,
// 1276030153 B/s; a request waits 10.1x longer)"; with the held-by-caps
// exclusion removed, on a quieter machine, the same for the daemon's own
// cap (a steady 326 IOPS, 98 MB/s).
func TestRealV1NoFalseExhaustion(t *testing.T) {
	r := newRunRig(t) // skips in the VM
	testkit.SetScheduler(t, r.loop.Name, "none")
	lower := host.LowerOf(host.DefaultRoots(), r.loop.Name)
	if len(lower) != 1 {
		t.Fatalf("the disk under %s (its file %s): %v, want one", r.loop.Name, r.loop.File, lower)
	}
	disk := lower[0]
	d, logs := r.launch(t, "run", "--source", "cgroup", "--cgroup-parent", r.parent, "--devices", r.loop.Name+","+disk,
		"--listen", r.addr, "--state-file", filepath.Join(t.TempDir(), "state.json"))
	deadline := time.Now().Add(30 * time.Second)
	for _, err := r.snapshot(); err != nil; _, err = r.snapshot() {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's API did not answer within 30 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	loop0, disk0 := sectors(t, r.loop.Name), sectors(t, disk)
	streamer, web := effectSpecs(r.loop.Path, 384<<20, 32, 100, 40*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startIn(t, ctx, r, r.child(t, "bulk"), streamer.Args()...)
	time.Sleep(5 * time.Second)
	victims := []*workload.Proc{startIn(t, ctx, r, r.child(t, "web"), web.Args()...)}
	for i := range 8 {
		light := web
		light.IOPS = 5
		light.Offset += int64(i+1) * (4 << 20)
		light.Span = 4 << 20
		victims = append(victims, startIn(t, ctx, r, r.child(t, fmt.Sprintf("light-%d", i)), light.Args()...))
	}
	for _, v := range victims {
		if _, err := v.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	s.Stop()
	if _, err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	if code := term(t, d); code != 0 {
		t.Fatalf("the daemon exited %d after SIGTERM", code)
	}
	// The disk below also carries whatever else the machine does (in
	// make test, the other packages' tests): a steady low rate of its own
	// there may be real. It is judged only when the loop's traffic is
	// nearly all it carried.
	loopMiB, diskMiB := (sectors(t, r.loop.Name)-loop0)>>11, (sectors(t, disk)-disk0)>>11
	judgeDisk := diskMiB <= loopMiB+loopMiB/5+64
	var bad []string
	changes := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "device state change") {
			changes++
			if strings.Contains(line, "to=exhausted") && (judgeDisk || !strings.Contains(line, "device="+disk+" ")) {
				bad = append(bad, line)
			}
		}
	}
	t.Logf("watched %s (%d MiB moved) and %s, the disk under it (%d MiB moved; judged: %v), for 45 s: %d device state changes",
		r.loop.Name, loopMiB, disk, diskMiB, judgeDisk, changes)
	if len(bad) > 0 {
		t.Errorf("a device judged exhausted under the daemon's own caps or a stacked device's traffic:\n%s", strings.Join(bad, "\n"))
	}
}

// sectors is what the block device name moved so far, read and written,
// in 512-byte sectors (/sys/block/NAME/stat).
func sectors(t *testing.T, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/block", name, "stat"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := cgroupfs.ParseBlockStat(b)
	if err != nil {
		t.Fatalf("%s's stat: %v", name, err)
	}
	return st.ReadSectors + st.WriteSectors
}

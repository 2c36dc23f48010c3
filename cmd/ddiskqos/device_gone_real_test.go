package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/loopdev"
)

// TestRealRunDeviceRemoved: the device the daemon actuates on is detached
// and removed while it runs (a loop device's file unmounted, a disk
// unplugged) with weights and caps of its in force, and new cgroups appear
// after. The daemon stays up and serving (/healthz, /metrics), and SIGTERM
// ends it cleanly: the kernel dropped every per-device setting with the
// device, so there is nothing left to restore and nothing to fail on; the
// state file is left without originals.
func TestRealRunDeviceRemoved(t *testing.T) {
	r := newRunRig(t)
	reader, weighted := r.child(t, "reader"), r.child(t, "weighted")
	wp, _ := r.h.Path(weighted)
	if err := r.ownWeight(wp, 300); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wp, "blkio.throttle.read_bps_device"), []byte(r.loop.Dev()+" 734003200"), 0); err != nil {
		t.Fatal(err)
	}
	d, logs := r.launch(t, "run", "--source", "cgroup", "--cgroup-parent", r.parent, "--interval", "100ms",
		"--listen", r.addr, "--state-file", r.state, "--devices", r.loop.Name)
	r.waitLevel(t, "weighted", 1)
	r.read(t, reader, 3<<20, 0)
	r.waitLevel(t, "reader", 2)
	if !r.noBFQ { // without bfq, the caps alone: none while nobody is contended
		if v, _ := r.weight(t, reader); v != 500 {
			t.Fatalf("reader's level-2 weight is %d, want 500", v)
		}
	}

	idx, err := strconv.Atoi(strings.TrimPrefix(r.loop.Name, "loop"))
	if err != nil {
		t.Fatal(err)
	}
	if err := (&loopdev.Device{Path: r.loop.Path, Name: r.loop.Name, Index: idx}).Detach(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("/sys/block", r.loop.Name)); err == nil {
		t.Fatalf("%s still there after its removal", r.loop.Name)
	}
	t.Logf("%s detached and removed while the daemon ran", r.loop.Name)
	for i := range 5 {
		r.child(t, "after-"+strconv.Itoa(i))
	}
	base := "http://" + r.addr
	for range 20 {
		time.Sleep(250 * time.Millisecond)
		if d.ProcessState != nil {
			t.Fatalf("daemon exited after the device went: %v", d.ProcessState)
		}
		if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK {
			t.Fatalf("/healthz %d %q after the device went", code, body)
		}
		if code, _ := httpGet(t, base+"/metrics"); code != http.StatusOK {
			t.Fatalf("/metrics %d after the device went", code)
		}
	}
	waitFor(t, "the new cgroups tracked", func() bool {
		s, err := r.snapshot()
		return err == nil && len(s.Workloads) == 7
	})
	if code := term(t, d); code != 0 {
		t.Errorf("SIGTERM after the device went: exit %d, want 0", code)
	}
	if st := readFile(t, r.state); !strings.Contains(st, `"originals": []`) {
		t.Errorf("state file after SIGTERM still holds originals:\n%s", st)
	}
	// The kernel names a removed device "(unknown)" in the counters of
	// every cgroup that did I/O on it until their per-device state goes:
	// that is no reason to fail reading a workload's counters (it did,
	// once for each such workload, in this test's first run).
	var n int
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			n++
			if n <= 20 {
				t.Logf("log: %s", line)
			}
			if strings.Contains(line, `msg="read counters"`) {
				t.Errorf("a workload's counters failed to read after the device went: %s", line)
			}
		}
	}
	t.Logf("%d WARN/ERROR lines in all", n)
}

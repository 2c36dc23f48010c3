package cgroupfs

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/loopdev"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestRealV1KnobRemovedAfterOpen: a cgroup removed between the open of one
// of its knob files and the read (a container ending while the actuator
// reads its original, ~8 times in a 2-minute churn soak) is ErrCgroupGone,
// not an I/O error of the actuator.
func TestRealV1KnobRemovedAfterOpen(t *testing.T) {
	if testkit.InVM() {
		t.Skip("host v1 test")
	}
	testkit.NeedRoot(t)
	l, err := DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	m, ok := l.V1Controller("blkio")
	testkit.Need(t, ok, "cgroup v1 blkio hierarchy not mounted (layout %s)", l.Mode)
	dir := filepath.Join(m.Mountpoint, testCgroupName(t))
	testkit.Cgroup(t, dir)
	path := filepath.Join(dir, "blkio.throttle.read_bps_device")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	var buf []byte
	_, err = readOpenKnob(int(f.Fd()), path, &buf)
	if !errors.Is(err, ErrCgroupGone) {
		t.Fatalf("read of a knob whose cgroup was removed after the open: %v, want ErrCgroupGone", err)
	}
	t.Logf("%v", err)
}

// TestRealV1AccountingDeviceGone: enabling v1 accounting on a device
// removed since it was listed (another process's loop device, detached
// while the daemon started: seen in a churn soak beside other tests) is
// ErrDeviceGone, not the ErrCgroupGone of the root cgroup's ENODEV.
func TestRealV1AccountingDeviceGone(t *testing.T) {
	if testkit.InVM() {
		t.Skip("host v1 test")
	}
	e := newV1Env(t, 16)
	ld := &loopdev.Device{Path: e.devPath, Name: e.devName}
	idx, err := strconv.Atoi(strings.TrimPrefix(e.devName, "loop"))
	if err != nil {
		t.Fatal(err)
	}
	ld.Index = idx
	if err := ld.Detach(); err != nil {
		t.Fatal(err)
	}
	err = e.h.EnableV1Accounting(e.dev)
	if !errors.Is(err, ErrDeviceGone) || errors.Is(err, ErrCgroupGone) {
		t.Fatalf("EnableV1Accounting on removed %s: %v, want ErrDeviceGone", e.devName, err)
	}
	t.Logf("%v", err)
}

package cgroupfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

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
	_, err = readOpenKnob(f, path)
	if !errors.Is(err, ErrCgroupGone) {
		t.Fatalf("read of a knob whose cgroup was removed after the open: %v, want ErrCgroupGone", err)
	}
	t.Logf("%v", err)
}

package loopdev_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/loopdev"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// devices lists the loop devices from loopdev.FirstIndex up that exist now.
func devices(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/sys/block")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "loop"))
		if strings.HasPrefix(e.Name(), "loop") && err == nil && n >= loopdev.FirstIndex {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestRealAttachDetach(t *testing.T) {
	if testkit.InVM() {
		t.Skip("loop devices are tested on the host")
	}
	testkit.NeedRoot(t)
	dir, err := os.MkdirTemp("/var/tmp", "ddiskqos-loopdev-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	file := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(file, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	before := devices(t)
	d, err := loopdev.Attach(file, true)
	if err != nil {
		t.Fatal(err)
	}
	detached := false
	t.Cleanup(func() {
		if !detached {
			d.Detach()
		}
	})
	if d.Index < loopdev.FirstIndex || d.Path != "/dev/"+d.Name {
		t.Errorf("device %+v, want an index from %d", d, loopdev.FirstIndex)
	}
	sys := filepath.Join("/sys/block", d.Name)
	b, err := os.ReadFile(filepath.Join(sys, "loop", "backing_file"))
	if err != nil || strings.TrimSpace(string(b)) != file {
		t.Errorf("backing file %q (%v), want %s", b, err, file)
	}
	if !d.Direct {
		t.Errorf("no direct I/O over a file in /var/tmp")
	}
	// A brand-new queue: the kernel's default scheduler for loop devices.
	if b, err := os.ReadFile(filepath.Join(sys, "queue", "scheduler")); err != nil || testkit.ActiveScheduler(string(b)) != "none" {
		t.Errorf("scheduler of a new device: %q (%v), want none", b, err)
	}
	if err := d.Detach(); err != nil {
		t.Fatal(err)
	}
	detached = true
	if _, err := os.Stat(sys); err == nil {
		t.Errorf("%s still exists after Detach", sys)
	}
	if after := devices(t); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("loop devices from %d: %v before, %v after", loopdev.FirstIndex, before, after)
	}
}

// TestRealAttachMissingFile: a file that is not there is an error naming
// it, and no device is left.
func TestRealAttachMissingFile(t *testing.T) {
	if testkit.InVM() {
		t.Skip("loop devices are tested on the host")
	}
	testkit.NeedRoot(t)
	before := devices(t)
	missing := filepath.Join(t.TempDir(), "nope.img")
	d, err := loopdev.Attach(missing, true)
	if err == nil {
		d.Detach()
		t.Fatalf("Attach(%s) = %+v, want an error", missing, d)
	}
	if !strings.Contains(err.Error(), missing) {
		t.Errorf("error %q does not name %s", err, missing)
	}
	if after := devices(t); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("loop devices from %d: %v before, %v after a failed Attach", loopdev.FirstIndex, before, after)
	}
}

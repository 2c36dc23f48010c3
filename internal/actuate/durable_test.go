package actuate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// fakeBFQ is a v1 cgroup "c" in a temporary tree with a BFQ weight file.
func fakeBFQ(t *testing.T, content string) (cgroupfs.Hierarchy, string) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "c")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "blkio.bfq.weight_device")
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return cgroupfs.Hierarchy{Version: 1, Mount: root}, file
}

var loop0 = []Device{{Name: "loop0", Dev: cgroupfs.Dev{Major: 7}, Mech: host.MechBFQWeight}}

// TestKnobWaitsForDurableOriginal: no knob is written before Persist has
// stored its original; a failed Persist leaves the knob untouched and is
// tried again at the next Apply.
func TestKnobWaitsForDurableOriginal(t *testing.T) {
	t.Parallel()
	h, file := fakeBFQ(t, "default 100\n")
	var saved [][]Original
	fail := true
	a, err := New(Config{Hierarchy: h, Devices: loop0, Persist: func(o []Original) error {
		// The knob must still hold its original while it is being saved.
		if got, _ := os.ReadFile(file); string(got) != "default 100\n" {
			t.Errorf("knob written before its original was saved: %q", got)
		}
		if fail {
			return errors.New("disk full")
		}
		saved = append(saved, o)
		return nil
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tg := []Target{{ID: "c", Cgroup: "/c", Level: 4, Weight: 100}}
	if _, err := a.Apply(time.Unix(1, 0), tg); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Apply with a failing Persist: %v, want its error", err)
	}
	if got, _ := os.ReadFile(file); string(got) != "default 100\n" {
		t.Fatalf("knob written although its original is not durable: %q", got)
	}
	if ap := a.Applied("c"); len(ap) != 1 || ap[0].Err == nil {
		t.Fatalf("Applied %+v: want an error for the unwritten knob", ap)
	}
	fail = false
	if _, err := a.Apply(time.Unix(2, 0), tg); err != nil {
		t.Fatal(err)
	}
	if len(saved) != 1 || len(saved[0]) != 1 || saved[0][0].Value != "" {
		t.Fatalf("saved %+v: want one original, no per-device weight", saved)
	}
	got, _ := os.ReadFile(file)
	// A plain file keeps only the last write: the per-device line.
	if !strings.Contains(string(got), "7:0 100") {
		t.Fatalf("knob %q after a durable original, want 7:0 100", got)
	}
	if _, err := a.Apply(time.Unix(3, 0), tg); err != nil || len(saved) != 1 {
		t.Fatalf("unchanged target: err %v, Persist called %d times, want once", err, len(saved))
	}
}

// TestSwallowedWriteIsAnError: a knob that takes writes but does not keep
// them (here /dev/null in its place) is reported, never taken as applied.
func TestSwallowedWriteIsAnError(t *testing.T) {
	t.Parallel()
	h, file := fakeBFQ(t, "")
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/null", file); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Hierarchy: h, Devices: loop0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Apply(time.Unix(1, 0), []Target{{ID: "c", Cgroup: "/c", Level: 2, Weight: 500}})
	if err == nil || !strings.Contains(err.Error(), "did not take the value written") {
		t.Fatalf("Apply on a knob that swallows writes: %v", err)
	}
	if ap := a.Applied("c"); len(ap) != 1 || ap[0].Err == nil {
		t.Fatalf("Applied %+v: the swallowed weight must carry its error", ap)
	}
}

// TestThrottleMemberDurable: the throttle may write a member's cap only
// once its original is durable; a workload whose original was never
// recorded (never demoted) is not durable and costs no look-up.
func TestThrottleMemberDurable(t *testing.T) {
	t.Parallel()
	f := newFakeV1Tree(t, "/p/a", "/p/b")
	fail := true
	a, err := New(Config{Hierarchy: f.h, SysRoot: f.sys,
		Devices: []Device{{Name: "loop0", Dev: fakeDev, Mech: host.MechThrottle}},
		Persist: func([]Original) error {
			if fail {
				return errors.New("disk full")
			}
			return nil
		}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.RestoreAll() })
	tg := []Target{{ID: "a", Cgroup: "/p/a", Level: 4}, {ID: "b", Cgroup: "/p/b", Level: 1}}
	// What the last Apply told the throttle (its Update's members).
	durable := func() map[string]bool {
		out := map[string]bool{}
		for _, m := range a.members[0] {
			out[m.Cgroup] = m.Durable
		}
		return out
	}
	a.Apply(time.Unix(1, 0), tg)
	if got := durable(); got["/p/a"] || got["/p/b"] || len(got) != 2 {
		t.Fatalf("with the original not saved: durable %v, want both members, neither durable", got)
	}
	fail = false
	if _, err := a.Apply(time.Unix(2, 0), tg); err != nil {
		t.Fatal(err)
	}
	if got := durable(); !got["/p/a"] || got["/p/b"] {
		t.Fatalf("after the original was saved: durable %v, want /p/a only", got)
	}
	// Promoted with its original kept: still durable (a cap in force can
	// be lifted).
	tg[0].Level = 1
	if _, err := a.Apply(time.Unix(3, 0), tg); err != nil {
		t.Fatal(err)
	}
	if got := durable(); !got["/p/a"] {
		t.Fatalf("after a promotion: durable %v, want /p/a still", got)
	}
}

// fakeV1Tree is a v1 blkio tree in a temporary directory, "/p" and the
// given cgroups with empty counters and limits, and a sysfs with loop0's
// stat file: enough for a throttle to run on (its fast loop's rules are
// tested in internal/throttle, on a tree it moves by hand).
type fakeV1Tree struct {
	h   cgroupfs.Hierarchy
	sys string
}

var fakeDev = cgroupfs.Dev{Major: 7, Minor: 0}

func newFakeV1Tree(t *testing.T, cgroups ...string) fakeV1Tree {
	t.Helper()
	mount, sys := testkit.FakeV1Throttle(t, cgroups...)
	return fakeV1Tree{h: cgroupfs.Hierarchy{Version: 1, Mount: mount}, sys: sys}
}

package main

// The fault matrix of the daemon's state and persistence (issue 8 item 5),
// on the real kernel: the real binary, real v1 blkio cgroups on a loop
// device with BFQ, signals. Each test asserts what was restored or refused.

import (
	"bytes"

	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// waitFor polls cond until it holds or 20 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// readOnlyDir returns a directory that even root cannot write (a read-only
// bind mount of a temp dir onto itself) and a func that makes it writable.
func readOnlyDir(t *testing.T) (dir string, writable func()) {
	t.Helper()
	dir = t.TempDir()
	mount := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			t.Fatalf("mount %q: %v %s", args, err, out)
		}
	}
	mount("--bind", dir, dir)
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	mount("-o", "remount,bind,ro", dir)
	if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o600); err == nil {
		t.Fatalf("%s is still writable after a read-only remount", dir)
	}
	return dir, func() { mount("-o", "remount,bind,rw", dir) }
}

// TestRealFaultStateDirReadOnly: while the state file cannot be saved, no
// knob is written, the failure is counted and shown; once the directory is
// writable the next tick saves the original and only then writes.
func TestRealFaultStateDirReadOnly(t *testing.T) {
	r := newRunRig(t)
	small := r.child(t, "small")
	if err := r.h.SetNativeDeviceWeight(small, cgroupfs.WeightBFQ, r.dev, 300); err != nil {
		t.Fatal(err)
	}
	dir, writable := readOnlyDir(t)
	r.state = filepath.Join(dir, "state.json")
	d := r.start(t)
	var stateErrs uint64
	waitFor(t, "a state save failure in the snapshot", func() bool {
		s, err := r.snapshot()
		if err != nil || s.StateError == "" {
			return false
		}
		for _, e := range s.Errors {
			if e.Cause == "state" {
				stateErrs = e.Count
			}
		}
		return stateErrs >= 3 // retried tick after tick
	})
	if v, ok := r.weight(t, small); !ok || v != 300 {
		t.Fatalf("with the state dir read-only small's weight became %d (set %v); want 300 untouched", v, ok)
	}
	t.Logf("read-only state dir: %d state errors counted, weight still 300", stateErrs)

	writable()
	waitFor(t, "small's level-1 weight once the state is saved", func() bool {
		v, _ := r.weight(t, small)
		return v == 1000
	})
	data, err := os.ReadFile(r.state)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"native": 300`)) {
		t.Fatalf("state file lacks the original 300:\n%s", data)
	}
	s, err := r.snapshot()
	if err != nil || s.StateError != "" {
		t.Fatalf("state error after a successful save: %v %q", err, s.StateError)
	}
	stopWith(t, d, syscall.SIGTERM)
	if v, ok := r.weight(t, small); !ok || v != 300 {
		t.Fatalf("after SIGTERM small weight %d (set %v), want 300", v, ok)
	}
}

package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/loopdev"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestRealDaemonStartsBesideGoneDevice: a sensed device removed between
// the host's listing and the daemon's start (another test's or a snap's
// loop device detached; in a churn soak beside other tests the start
// failed with "enable v1 I/O accounting on 7:609: ... cgroup gone" and
// exit 1) is skipped with a warning: the daemon starts, runs and restores.
func TestRealDaemonStartsBesideGoneDevice(t *testing.T) {
	if testkit.InVM() {
		t.Skip("host v1 test")
	}
	r := newRig(t, "bfq", host.MechBFQWeight)
	small := r.child(t, "small")
	gone := testkit.LoopDevice(t, 16)
	idx, err := strconv.Atoi(strings.TrimPrefix(gone.Name, "loop"))
	if err != nil {
		t.Fatal(err)
	}
	if err := (&loopdev.Device{Path: gone.Path, Name: gone.Name, Index: idx}).Detach(); err != nil {
		t.Fatal(err)
	}
	opts := r.options(t, filepath.Join(t.TempDir(), "state.json"))
	opts.SenseDevices = []cgroupfs.Dev{{Major: gone.Major, Minor: gone.Minor}}
	logs := &testkit.SyncBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	d, err := New(opts)
	if err != nil {
		t.Fatalf("New with a sensed device removed since it was listed: %v", err)
	}
	if !strings.Contains(logs.String(), "device gone while starting") {
		t.Errorf("no warning about %s:\n%s", gone.Dev(), logs.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	waitFor(t, d, "small at level 1", levelIs("small", 1))
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if v, ok := r.weight(t, small); ok {
		t.Fatalf("small's weight %d left after the shutdown", v)
	}
}

package actuate

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/throttle"
)

// deepUntilArmed says the demoted workload holds a deep queue (so it is
// heavy and capped) and, once armed, panics in the throttle's loop.
type deepUntilArmed struct{ armed chan struct{} }

type throttleBug struct{}

func (d deepUntilArmed) InFlight(string, cgroupfs.Dev) (float64, bool) {
	select {
	case <-d.armed:
		panic(throttleBug{})
	default:
		return 8, true
	}
}

// writeInPlace writes b over the start of file without truncating it (the
// fast loop keeps its counter files open and reads them meanwhile; the
// numbers are written at a fixed width).
func writeInPlace(t *testing.T, file, b string) {
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(b), 0); err != nil {
		t.Error(err)
	}
}

// TestThrottlePanicRestores: a panic in a throttle's loop, with its cap in
// force on a cgroup whose limit had an original of its own, is handed to
// Config.OnPanic (the daemon's Run then restores everything), and
// RestoreAll puts the original back over the cap. Without the loop's
// recover the test binary dies of the panic with the cap in the cgroup.
func TestThrottlePanicRestores(t *testing.T) {
	t.Parallel()
	f := newFakeV1Tree(t, "/p/a")
	const original = 1 << 40 // rbps the operator set on /p/a before the daemon
	bps := filepath.Join(f.h.Mount, "/p/a", "blkio.throttle.read_bps_device")
	if err := os.WriteFile(bps, []byte(fmt.Sprintf("7:0 %d\n", uint64(original))), 0o644); err != nil {
		t.Fatal(err)
	}
	counters := func(dir string) string {
		return filepath.Join(f.h.Mount, dir, "blkio.throttle.io_service_bytes_recursive")
	}
	stat := filepath.Join(f.sys, "class", "block", "loop0", "stat")
	// Fixed-width counters: the parent's and the device's grow (a better
	// level reads, 1 MiB every 2 ms), the demoted workload's do not.
	line := func(n uint64) string {
		return fmt.Sprintf("7:0 Read %020d\n7:0 Write 0\n7:0 Total %020d\nTotal %020d\n", n, n, n)
	}
	for _, dir := range []string{"/p", "/p/a"} {
		if err := os.WriteFile(counters(dir), []byte(line(0)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	devLine := func(sectors, ios, ms uint64) string {
		return fmt.Sprintf("%020d 0 %020d 0 0 0 0 0 0 %020d %020d 0 0 0 0 0 0\n", ios, sectors, ms, ms)
	}
	if err := os.WriteFile(stat, []byte(devLine(0, 0, 0)), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		var n, i uint64
		start := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			n, i = n+1<<20, i+1
			writeInPlace(t, counters("/p"), line(n))
			writeInPlace(t, stat, devLine(n/512, i, uint64(time.Since(start).Milliseconds())))
		}
	}()
	defer func() { close(stop); <-fed }()

	panicked := make(chan any, 1)
	inf := deepUntilArmed{armed: make(chan struct{})}
	a, err := New(Config{Hierarchy: f.h, SysRoot: f.sys,
		Devices:  []Device{{Name: "loop0", Dev: fakeDev, Mech: host.MechThrottle}},
		Throttle: throttle.Config{Min: 1 << 20, InFlight: inf},
		OnPanic:  func(v any, _ []byte) { panicked <- v }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(time.Now(), []Target{{ID: "a", Cgroup: "/p/a", Level: 4}}); err != nil {
		t.Fatal(err)
	}
	limits := func() cgroupfs.Limits {
		l, err := f.h.ReadLimits("/p/a", fakeDev)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	deadline := time.Now().Add(10 * time.Second)
	for l := limits(); l.RBps == original || l.RBps == 0; l = limits() {
		if time.Now().After(deadline) {
			t.Fatal("the throttle never capped /p/a beside the better level's reads")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("capped: %+v", limits())
	close(inf.armed)
	select {
	case v := <-panicked:
		if _, ok := v.(throttleBug); !ok {
			t.Fatalf("OnPanic got %v (%T), want the throttle's panic", v, v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnPanic not called within 10 s of the panic being armed")
	}
	if err := a.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	if got := limits(); got != (cgroupfs.Limits{RBps: original}) {
		t.Fatalf("after the panic and RestoreAll /p/a's limits are %+v, want the original rbps %d alone", got, uint64(original))
	}
}

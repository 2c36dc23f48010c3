package daemon

import (
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/control"
	"github.com/ddiskqos/ddiskqos/internal/iolat"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/sensor/latency"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/throttle"
)

// steerActuator has one throttled device whose caps are always in force
// and holding a workload back; capped names the workloads it caps. It
// records the shares steered.
type steerActuator struct {
	nullActuator
	dev    actuate.Device
	now    *time.Time
	capped map[string]bool
	steers []float64
}

func (a *steerActuator) Devices() []actuate.Device { return []actuate.Device{a.dev} }
func (a *steerActuator) Apply(time.Time, []actuate.Target) ([]actuate.DeviceStatus, error) {
	return []actuate.DeviceStatus{{Device: a.dev, Capping: true, CappedAt: *a.now, HeldAt: *a.now, ContendedAt: *a.now, Used: 0.5}}, nil
}
func (a *steerActuator) Applied(id string) []actuate.Applied {
	ap := actuate.Applied{Device: a.dev}
	if a.capped[id] {
		ap.Limits = cgroupfs.Limits{RBps: 1 << 20, WBps: 1 << 20}
	}
	return []actuate.Applied{ap}
}
func (a *steerActuator) Steer(_ cgroupfs.Dev, share float64) error {
	a.steers = append(a.steers, share)
	return nil
}

// TestControlSteers: the protected requests are the small ones of the
// workloads no cap holds — a capped 4 KiB flood and a 1 MiB stream do not
// count; with caps on from the start the controller probes at the floor,
// learns its target (2× the probe's p99, at least 500 µs), then raises the share while the protected
// p99 is far below it; the snapshot and the steered shares say so. With
// latency_target off nothing is steered. Work-conserving (the default),
// the same victims far inside their target lift the caps after the probe.
func TestControlSteers(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"capping", "off", "conserving"} {
		off, conserve := mode == "off", mode == "conserving"
		mount := t.TempDir()
		inos := map[string]uint64{}
		for _, n := range []string{"web", "bulk", "flood"} {
			dir := filepath.Join(mount, n)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "io.stat"), []byte("8:0 rbytes=0 wbytes=0 rios=0 wios=0 dbytes=0 dios=0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			fi, _ := os.Stat(dir)
			inos[n] = fi.Sys().(*syscall.Stat_t).Ino
		}
		sda := cgroupfs.Dev{Major: 8}
		batch := []iolat.Delta{
			delta(inos["web"], sda, iolat.Read, 100, 200_000, 4096, 1),
			delta(inos["bulk"], sda, iolat.Read, 50, 8_000_000, 1<<20, 4),
			delta(inos["flood"], sda, iolat.Read, 100, 50_000_000, 4096, 32),
		}
		ticks := 13
		if conserve {
			ticks = 21
		}
		next := [][]iolat.Delta{nil}
		for range ticks - 1 {
			next = append(next, batch)
		}
		fake := &fakeLatency{next: next}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		act := &steerActuator{dev: actuate.Device{Name: "sda", Dev: sda, Mech: mech.Throttle}, now: &now,
			capped: map[string]bool{"flood": true, "bulk": true}}
		d, err := New(Options{
			Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: mount}, Source: idleSource{}, Policy: policy.DefaultConfig(),
			NewActuator: func(actuate.Config, []actuate.Original) (Actuator, error) { return act, nil },
			Interval:    time.Second, Now: func() time.Time { return now }, NoFile: 1 << 20,
			Actuator: actuate.Config{Throttle: throttle.Config{MaxBurst: throttle.DefaultBurst}},
			Latency:  latency.Options{SysRoot: t.TempDir(), Open: func() (latency.Sensor, error) { return fake, nil }, NoControl: off, NoConserve: !conserve},
		})
		if err != nil {
			t.Fatal(err)
		}
		d.started, d.noFile = now, 1<<20
		for _, n := range []string{"web", "bulk", "flood"} {
			d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: n, Name: n, Cgroup: "/" + n}})
		}
		for range ticks {
			d.step()
			now = now.Add(time.Second)
		}
		if off {
			if len(act.steers) != 0 {
				t.Errorf("latency_target off: steered %v", act.steers)
			}
			if dv := d.Snapshot().Devices; len(dv) != 1 || dv[0].CappedShare != 0 || dv[0].LatencyTarget != 0 {
				t.Errorf("latency_target off: devices %+v, want no controller", dv)
			}
			continue
		}
		// Tick 1: caps, no baseline: the probe at a tenth of the floor; ticks 2 and
		// 3: its two measures, the lower p99 (web's 200 µs) learned, the
		// share back to 5 %; ticks 4-8 and 9-13: windows of 100 protected
		// requests a tick, each full after WindowTicks (5) ticks of 100 or
		// Window (500) requests, its p99 far below the target: ×1.25 each.
		want := []float64{0.002, 0.002, 0.05, 0.05, 0.05, 0.05, 0.05, 0.0625, 0.0625, 0.0625, 0.0625, 0.0625, 0.078125}
		if conserve {
			// The probe, its share back at 5 %, then (the fake's caps
			// hold their workloads back) doubled every two ticks (a
			// raise needs two ticks pooled at its share) to 25 %
			// (control's slowStartEnd), a quarter more every two ticks to
			// the levels' most (60 %), held there two ticks, and lifted (1)
			// for good: the victims' p99 stays well within the target.
			want = []float64{0.002, 0.002, 0.05, 0.05, 0.1, 0.1, 0.2, 0.2, 0.25, 0.25, 0.3125, 0.3125, 0.390625, 0.390625, 0.48828125, 0.48828125, 0.6, 0.6, 1, 1, 1}
		}
		if len(act.steers) != len(want) {
			t.Fatalf("steered %v, want %v", act.steers, want)
		}
		for i := range want {
			if math.Abs(act.steers[i]-want[i]) > 1e-6 {
				t.Fatalf("steered %v, want %v", act.steers, want)
			}
		}
		dv := d.Snapshot().Devices
		if len(dv) != 1 {
			t.Fatalf("devices %+v", dv)
		}
		lo, hi := iolat.Bounds(iolat.Bucket(200_000))
		if p := dv[0].ProtectedP99 * 1e9; p < lo || p >= hi {
			t.Errorf("protected p99 %g s, want web's bucket [%g, %g) ns (the flood and the stream do not count)", dv[0].ProtectedP99, lo, hi)
		}
		// The learned target: 2× (control.DefaultMultiple) the probe's
		// p99 (web's), at least control.DefaultMinTarget (500 µs).
		if tg, wantTg := dv[0].LatencyTarget, max(control.DefaultMultiple*dv[0].ProtectedP99, control.DefaultMinTarget.Seconds()); math.Abs(tg-wantTg) > 0.1*wantTg {
			t.Errorf("target %g s, want ~%g s (2× the protected p99 %g s, at least 500 µs)", tg, wantTg, dv[0].ProtectedP99)
		}
		if math.Abs(dv[0].CappedShare-want[len(want)-1]) > 1e-6 {
			t.Errorf("%s: snapshot share %g, want %g", mode, dv[0].CappedShare, want[len(want)-1])
		}
	}
}

package sensor

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

const mib = 1 << 20

func readOn(dev cgroupfs.Dev, bytes, ios uint64) cgroupfs.DeviceIO {
	return cgroupfs.DeviceIO{Dev: dev, RBytes: bytes, RIOs: ios}
}

// TestTakeKernelReconciles: readings from the kernel's maps charge at once;
// the next file reading charges only what the files show beyond them, so
// that the totals are the files' at each file reading — whether the maps
// missed requests or counted requests the files had not yet.
func TestTakeKernelReconciles(t *testing.T) {
	t.Parallel()
	s := &Sensor{Devices: []cgroupfs.Dev{devA}, MaxPeriod: 4}
	t0 := time.Unix(100, 0)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	c := s.NewCounters(0, false)
	s.BeginTick()
	s.Take(c, at(0), 1, cgroupfs.IOStat{Devices: []cgroupfs.DeviceIO{readOn(devA, 10*mib, 100)}})
	s.EndTick()
	var devTotal uint64
	// Three ticks of 1 MiB in 16 requests each, from the maps.
	for i := 1; i <= 3; i++ {
		s.BeginTick()
		rd := s.TakeKernel(c, at(i), 1, []KernelIO{{Dev: devA, RBytes: mib, RIOs: 16}})
		devTotal += s.EndTick()[0].Bytes
		if rd.Delta != mib || !rd.Busy || rd.PressureDue || !c.Active[0] || c.RBps != mib {
			t.Fatalf("kernel reading %d: %+v active %v rate %.0f, want 1 MiB charged, busy, no pressure due", i, rd, c.Active, c.RBps)
		}
	}
	if c.RBytes != 3*mib || c.RIOs != 48 || c.KernelTakes() != 3 {
		t.Fatalf("after the maps' readings: %d bytes %d requests %d takes, want 3 MiB, 48, 3", c.RBytes, c.RIOs, c.KernelTakes())
	}
	// The files show 3.5 MiB in 60 requests since: the maps missed some.
	s.BeginTick()
	rd := s.Take(c, at(4), 1, cgroupfs.IOStat{Devices: []cgroupfs.DeviceIO{readOn(devA, 13*mib+mib/2, 160)}})
	devTotal += s.EndTick()[0].Bytes
	if rd.Delta != mib/2 || c.RBytes != 3*mib+mib/2 || c.RIOs != 60 {
		t.Fatalf("file reading: %+v, %d bytes %d requests, want 0.5 MiB charged, the files' 3.5 MiB in 60", rd, c.RBytes, c.RIOs)
	}
	if !rd.Busy || !rd.PressureDue || devTotal != 3*mib+mib/2 {
		t.Fatalf("file reading: %+v, device bytes %d, want busy, pressure due, the files' 3.5 MiB on the device", rd, devTotal)
	}
	// The maps count ahead of the files (a request completes after the
	// reading the files would have shown it in): charged once.
	s.BeginTick()
	s.TakeKernel(c, at(5), 1, []KernelIO{{Dev: devA, RBytes: 2 * mib, RIOs: 2}})
	s.EndTick()
	s.BeginTick()
	rd = s.Take(c, at(6), 1, cgroupfs.IOStat{Devices: []cgroupfs.DeviceIO{readOn(devA, 14*mib+mib/2, 161)}})
	s.EndTick()
	if rd.Delta != 0 || !rd.Busy || c.period != 1 || c.RBytes != 5*mib+mib/2 {
		t.Fatalf("maps ahead: %+v period %d total %d, want nothing more charged, still busy (the files moved)", rd, c.period, c.RBytes)
	}
	s.BeginTick()
	rd = s.Take(c, at(7), 1, cgroupfs.IOStat{Devices: []cgroupfs.DeviceIO{readOn(devA, 16*mib+mib/2, 163)}})
	s.EndTick()
	if rd.Delta != mib || c.RBytes != 6*mib+mib/2 || c.RIOs != 63 {
		t.Fatalf("files catch up: %+v, total %d bytes %d requests, want 1 MiB (2 less the 1 charged ahead), 6.5 MiB, 63", rd, c.RBytes, c.RIOs)
	}
	if len(c.ahead) != 0 {
		t.Fatalf("nothing is ahead once the files caught up, have %+v", c.ahead)
	}
}

// TestTakeKernelStacked: a loop device over a disk. Whether the maps charge
// the loop's requests to the disk to the reader (the cgroup-aware loop
// worker) or not (the root), and whether a tick's boundary falls between
// the disk's completions and the loop's, the bytes are charged once: the
// maps' readings count the loop's, and the files' reading the rest.
func TestTakeKernelStacked(t *testing.T) {
	t.Parallel()
	loop, vda := cgroupfs.Dev{Major: 7, Minor: 3}, cgroupfs.Dev{Major: 254, Minor: 0}
	for _, tc := range []struct {
		name string
		kio  []KernelIO
	}{
		{"lower charged to the root", []KernelIO{{Dev: loop, RBytes: mib, RIOs: 16}}},
		{"lower charged to the reader", []KernelIO{{Dev: loop, RBytes: mib, RIOs: 16}, {Dev: vda, RBytes: mib, RIOs: 8}}},
		{"the lower's completions ahead of the loop's", []KernelIO{{Dev: loop, RBytes: mib, RIOs: 16}, {Dev: vda, RBytes: mib + 8192, RIOs: 9}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &Sensor{Devices: []cgroupfs.Dev{loop, vda}, Stacked: map[cgroupfs.Dev][]cgroupfs.Dev{loop: {vda}}, MaxPeriod: 4}
			t0 := time.Unix(100, 0)
			c := s.NewCounters(0, false)
			files := func(b, ios uint64) cgroupfs.IOStat {
				return cgroupfs.IOStat{Devices: []cgroupfs.DeviceIO{readOn(loop, b, ios), readOn(vda, b, ios/2)}}
			}
			s.BeginTick()
			s.Take(c, t0, 1, files(0, 0))
			s.EndTick()
			s.BeginTick()
			if rd := s.TakeKernel(c, t0.Add(time.Second), 1, tc.kio); rd.Delta != mib || c.RIOs != 16 {
				t.Fatalf("maps: %+v, %d requests, want 1 MiB and the loop's 16", rd, c.RIOs)
			}
			k := slices.Clone(s.EndTick()) // EndTick's slice is the sensor's
			s.BeginTick()
			rd := s.Take(c, t0.Add(2*time.Second), 1, files(mib, 16))
			f := s.EndTick()
			if rd.Delta != 0 || c.RBytes != mib || c.RIOs != 16 {
				t.Fatalf("files: %+v, total %d bytes %d requests, want nothing more: 1 MiB in 16", rd, c.RBytes, c.RIOs)
			}
			if k[0].Bytes+f[0].Bytes != mib || k[1].Bytes+f[1].Bytes != mib {
				t.Fatalf("device bytes loop %d+%d vda %d+%d, want 1 MiB on each (as the files show them)",
					k[0].Bytes, f[0].Bytes, k[1].Bytes, f[1].Bytes)
			}
		})
	}
}

// TestTakeKernelKnownDevicesOnly: the maps' bytes on a device the files
// have not shown for the workload wait for its file reading (the files'
// view of where it does I/O is the one the charge follows).
func TestTakeKernelKnownDevicesOnly(t *testing.T) {
	t.Parallel()
	s := &Sensor{Devices: []cgroupfs.Dev{devA, devB}, MaxPeriod: 4}
	t0 := time.Unix(100, 0)
	c := s.NewCounters(0, false)
	s.BeginTick()
	s.Take(c, t0, 1, cgroupfs.IOStat{Devices: []cgroupfs.DeviceIO{readOn(devA, mib, 1)}})
	rd := s.TakeKernel(c, t0.Add(time.Second), 1, []KernelIO{{Dev: devA, RBytes: mib, RIOs: 1}, {Dev: devB, WBytes: mib, WIOs: 1}})
	if rd.Delta != mib || c.WBytes != 0 || c.Active[1] {
		t.Fatalf("%+v written %d active %v, want devA's MiB only", rd, c.WBytes, c.Active)
	}
	rd = s.Take(c, t0.Add(2*time.Second), 1, cgroupfs.IOStat{Devices: []cgroupfs.DeviceIO{readOn(devA, 2*mib, 2), {Dev: devB, WBytes: mib, WIOs: 1}}})
	if rd.Delta != mib || c.WBytes != mib || c.RBytes != mib {
		t.Fatalf("file reading %+v: read %d written %d, want devB's MiB charged now, devA's not again", rd, c.RBytes, c.WBytes)
	}
	// A still tick from the maps backs off as a still file reading does.
	if rd := s.TakeKernel(c, t0.Add(3*time.Second), 1, nil); rd.Delta != 0 || rd.Busy || !rd.BackedOff || c.period != 2 {
		t.Fatalf("nothing from the maps: %+v period %d, want backed off to 2", rd, c.period)
	}
}

// TestFromKernel: the maps may stand for the files of a busy workload
// once a file reading with fresh counts is there to reconcile against,
// except at its file tick, every ReconcileEvery ticks (by its slot); a
// workload waking from a quiet spell is read from its files.
func TestFromKernel(t *testing.T) {
	t.Parallel()
	s := &Sensor{Devices: []cgroupfs.Dev{devA}, MaxPeriod: 4}
	c := s.NewCounters(3, false)
	if s.FromKernel(c, 1) {
		t.Fatal("before any file reading: from the maps, want the files")
	}
	s.BeginTick()
	s.Take(c, time.Unix(100, 0), 1, cgroupfs.IOStat{Devices: []cgroupfs.DeviceIO{readOn(devA, mib, 1)}})
	var files []uint64
	for tick := uint64(0); tick < 2*ReconcileEvery; tick++ {
		if !s.FromKernel(c, tick) {
			files = append(files, tick)
		}
	}
	if len(files) != 2 || files[1]-files[0] != ReconcileEvery {
		t.Fatalf("file ticks %v of %d, want one every %d", files, 2*ReconcileEvery, ReconcileEvery)
	}
	// Slots in a pattern (every 10th workload busy) spread over every
	// phase.
	phases := map[uint32]int{}
	for slot := uint32(0); slot < 800; slot += 10 {
		phases[reconcilePhase(slot)]++
	}
	for p := range uint32(ReconcileEvery) {
		if n := phases[p]; n < 5 || n > 15 {
			t.Fatalf("slots 0, 10, ..., 790 by phase %v: want each of the %d phases about 10 times", phases, ReconcileEvery)
		}
	}
	s.Take(c, time.Unix(101, 0), 1, cgroupfs.IOStat{Devices: []cgroupfs.DeviceIO{readOn(devA, 2*mib, 0)}, StaleIOs: true})
	if s.FromKernel(c, 1) {
		t.Fatal("after a reading with stale counts: from the maps, want the files until the counts are fresh")
	}
	s.Take(c, time.Unix(102, 0), 1, cgroupfs.IOStat{Devices: []cgroupfs.DeviceIO{readOn(devA, 3*mib, 3)}})
	if !s.FromKernel(c, 1) {
		t.Fatal("fresh counts again: from the files, want the maps")
	}
	s.TakeKernel(c, time.Unix(103, 0), 1, nil) // still: backs off
	if s.FromKernel(c, 1) {
		t.Fatalf("period %d after a still reading: from the maps, want the files", c.period)
	}
}

// TestReadCountsAfterKernel: on v1 the file reading that reconciles the
// maps' readings reads the I/O counts too (not the bytes alone), so the
// counts stay as fresh as the bytes and the maps may go on standing in.
func TestReadCountsAfterKernel(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "w")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(bytes, ios uint64) {
		t.Helper()
		for name, v := range map[string]uint64{"blkio.throttle.io_service_bytes_recursive": bytes, "blkio.throttle.io_serviced_recursive": ios} {
			body := fmt.Sprintf("7:1 Read %d\n7:1 Write 0\n7:1 Total %d\nTotal %d\n", v, v, v)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, 0)
	h := cgroupfs.Hierarchy{Version: 1, Mount: root}
	cg, err := h.Open("w")
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	s := &Sensor{Devices: []cgroupfs.Dev{devA}, MaxPeriod: 4}
	s.BeginTick()
	c := s.NewCounters(0, true)
	t0 := time.Unix(100, 0)
	if _, err := s.Read(c, cg, t0, 1); err != nil {
		t.Fatal(err)
	}
	s.TakeKernel(c, t0.Add(time.Second), 1, []KernelIO{{Dev: devA, RBytes: mib, RIOs: 10}})
	write(2*mib, 25)
	if _, err := s.Read(c, cg, t0.Add(2*time.Second), 1); err != nil {
		t.Fatal(err)
	}
	if c.RBytes != 2*mib || c.RIOs != 25 || !s.FromKernel(c, 1) {
		t.Fatalf("after the file reading: %d bytes %d requests, from the maps %v; want the files' 2 MiB in 25, and the maps allowed",
			c.RBytes, c.RIOs, s.FromKernel(c, 1))
	}
}

package sensor

import (
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

var devA, devB = cgroupfs.Dev{Major: 7, Minor: 1}, cgroupfs.Dev{Major: 8, Minor: 0}

func stat(a, b uint64) cgroupfs.IOStat {
	return cgroupfs.IOStat{Devices: []cgroupfs.DeviceIO{
		{Dev: devA, RBytes: a, RIOs: a / 4096},
		{Dev: devB, WBytes: b, WIOs: b / 4096},
	}}
}

// TestTakeBaselineChargeAndBackoff: a workload found running is not
// charged for its past, a new one is; the polling period doubles while the
// counters stand still, up to MaxPeriod, and is 1 again when they move.
func TestTakeBaselineChargeAndBackoff(t *testing.T) {
	s := &Sensor{Devices: []cgroupfs.Dev{devA}, MaxPeriod: 4}
	s.BeginTick()
	t0 := time.Unix(100, 0)

	old := s.NewCounters(0, false)
	if rd := s.Take(old, t0, 1, stat(1<<20, 1<<20)); rd.Delta != 0 || !rd.Busy {
		t.Fatalf("baseline of a running workload: %+v, want no charge", rd)
	}
	fresh := s.NewCounters(1, true)
	if rd := s.Take(fresh, t0, 1, stat(1<<20, 1<<20)); rd.Delta != 2<<20 {
		t.Fatalf("first reading of a new workload charged %d, want %d", rd.Delta, 2<<20)
	}
	if dev := s.EndTick(); dev[0].Bytes != 1<<20 || dev[0].Read != 1<<20 || dev[0].ReadTotal != 1<<20 || !fresh.Active[0] {
		t.Fatalf("device %+v active %v, want devA's 1 MiB read", dev, fresh.Active)
	}
	s.BeginTick()
	if dev := s.DeviceBytes(); dev[0].Bytes != 0 || dev[0].ReadTotal != 1<<20 {
		t.Fatalf("device at the next tick's start %+v, want this tick's bytes 0, the total kept", dev)
	}

	// Standing still: period 2, 4, 4 (MaxPeriod); Due follows the slot.
	for i, want := range []uint32{2, 4, 4} {
		rd := s.Take(old, t0.Add(time.Duration(i+1)*time.Second), 1, stat(1<<20, 1<<20))
		if rd.Delta != 0 || old.period != want || rd.BackedOff != (i < 2) || rd.Settled != (i == 1) {
			t.Fatalf("still reading %d: %+v period %d, want %d", i, rd, old.period, want)
		}
	}
	due := 0
	for tick := uint64(0); tick < 8; tick++ {
		if old.Due(tick) {
			due++
		}
	}
	if due != 2 {
		t.Fatalf("due %d of 8 ticks at period 4, want 2", due)
	}
	// Moving again: charged the difference, over the time since the last
	// reading (4 s), and read every tick again.
	rd := s.Take(old, t0.Add(7*time.Second), 1, stat(1<<20+4096, 1<<20))
	if rd.Delta != 4096 || !rd.Busy || old.period != 1 || old.RBps != 4096.0/4 {
		t.Fatalf("after a move: %+v period %d rbps %.0f, want 4096 B charged, period 1, 1024 B/s", rd, old.period, old.RBps)
	}
	// A counter that went backwards (reset) counts from zero.
	if rd := s.Take(old, t0.Add(8*time.Second), 1, stat(8192, 1<<20)); rd.Delta != 8192 {
		t.Fatalf("after a reset: charged %d, want 8192", rd.Delta)
	}
}

// TestTakePressureDue: io.pressure is due when nothing was read yet, when
// the counters moved, and every PressureEvery-th still reading.
func TestTakePressureDue(t *testing.T) {
	s := &Sensor{MaxPeriod: 1}
	c := s.NewCounters(0, false)
	if rd := s.Take(c, time.Unix(1, 0), 1, stat(0, 0)); !rd.PressureDue {
		t.Fatal("first reading without a pressure: not due")
	}
	c.Pressure = &snapshot.Pressure{} // read
	n := 0
	for i := 0; i < 2*PressureEvery; i++ {
		if s.Take(c, time.Unix(int64(i+2), 0), 1, stat(0, 0)).PressureDue {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("pressure due %d times in %d still readings, want 2", n, 2*PressureEvery)
	}
	if !s.Take(c, time.Unix(100, 0), 1, stat(4096, 0)).PressureDue {
		t.Fatal("counters moved: pressure not due")
	}
}

// TestPressureKeptWhileStill: an io.pressure reading equal to the last one
// keeps the last one's pointer, without allocating (the snapshot compares
// the pointer: at 5,000 idle v2 workloads a new pointer per reading made a
// new published record each time); a reading that moved is a new value and
// leaves the published one as it was.
func TestPressureKeptWhileStill(t *testing.T) {
	p := cgroupfs.Pressure{Some: cgroupfs.PSI{Avg10: 1.5, Total: 1000}, Full: cgroupfs.PSI{Avg10: 0.5, Total: 400}}
	first := pressureOf(nil, p)
	if first == nil || first.SomeTotal != 1000 || first.FullTotal != 400 || first.SomeAvg10 != 1.5 {
		t.Fatalf("first reading %+v", first)
	}
	if got := pressureOf(first, p); got != first {
		t.Fatal("an unchanged reading got a new pointer")
	}
	if n := testing.AllocsPerRun(100, func() { pressureOf(first, p) }); n != 0 {
		t.Fatalf("an unchanged reading allocates %.0f times", n)
	}
	moved := p
	moved.Some.Total = 1500
	got := pressureOf(first, moved)
	if got == first || got.SomeTotal != 1500 || first.SomeTotal != 1000 {
		t.Fatalf("a moved reading: got %+v (same pointer %v), the first now %+v", got, got == first, first)
	}
}

// TestTakeStaleIOCounts: readings whose I/O counts are stale (v1 reads the
// serviced file every IOCountsEvery-th reading of a busy workload) charge
// their bytes at once, and the counts, when read, count a stacked device's
// requests once over the whole span since the last count — also when the
// reading that brings them saw no bytes move (the stream stopped in
// between), where a correction by that reading's own bytes removes nothing
// and counts the disk's requests a second time.
func TestTakeStaleIOCounts(t *testing.T) {
	loop, vda := cgroupfs.Dev{Major: 7, Minor: 64}, cgroupfs.Dev{Major: 254}
	s := &Sensor{Devices: []cgroupfs.Dev{loop}, Stacked: map[cgroupfs.Dev][]cgroupfs.Dev{loop: {vda}}, MaxPeriod: 4}
	s.BeginTick()
	c := s.NewCounters(0, false)
	// Each reading the stream reads 1 MiB of the loop device in 16
	// requests, which reach vda as 8.
	reading := func(n uint64, ios uint64, stale bool) cgroupfs.IOStat {
		return cgroupfs.IOStat{StaleIOs: stale, Devices: []cgroupfs.DeviceIO{
			{Dev: loop, RBytes: n << 20, RIOs: 16 * ios},
			{Dev: vda, RBytes: n << 20, RIOs: 8 * ios},
		}}
	}
	at := func(i int) time.Time { return time.Unix(int64(100+i), 0) }
	s.Take(c, at(0), 1, reading(0, 0, false)) // baseline
	// Three readings with bytes but stale counts (those of reading 0).
	for i := 1; i <= 3; i++ {
		rd := s.Take(c, at(i), 1, reading(uint64(i), 0, true))
		if rd.Delta != 1<<20 || c.RBytes != uint64(i)<<20 {
			t.Fatalf("stale reading %d: charged %d, total %d; want 1 MiB, %d MiB (the loop's bytes once)", i, rd.Delta, c.RBytes, i)
		}
		if c.RIOs != 0 || !c.Active[0] {
			t.Fatalf("stale reading %d: read_ios %d active %v, want 0 (no counts read yet), active", i, c.RIOs, c.Active[0])
		}
	}
	// The stream stopped; this reading's bytes did not move and its counts
	// are fresh: 3 MiB of the loop in 48 requests since reading 0.
	if rd := s.Take(c, at(4), 1, reading(3, 3, false)); rd.Delta != 0 {
		t.Fatalf("still reading charged %d", rd.Delta)
	}
	if c.RBytes != 3<<20 || c.RIOs != 48 {
		t.Fatalf("after the counts: read %d B in %d requests, want %d in 48 (the loop's, vda's 24 removed)", c.RBytes, c.RIOs, 3<<20)
	}
	// Direct vda I/O besides, in a span of stale counts: 1 MiB through the
	// loop (16 requests, 8 on vda) and 1 MiB straight to vda in 4.
	s.Take(c, at(5), 1, cgroupfs.IOStat{StaleIOs: true, Devices: []cgroupfs.DeviceIO{
		{Dev: loop, RBytes: 4 << 20, RIOs: 48}, {Dev: vda, RBytes: 5 << 20, RIOs: 24}}})
	s.Take(c, at(6), 1, cgroupfs.IOStat{Devices: []cgroupfs.DeviceIO{
		{Dev: loop, RBytes: 4 << 20, RIOs: 64}, {Dev: vda, RBytes: 5 << 20, RIOs: 36}}})
	if c.RBytes != 5<<20 || c.RIOs != 48+16+6 {
		t.Fatalf("with direct I/O: read %d B in %d requests, want %d in %d (vda's 12 requests, half of its bytes the loop's: 6 removed)",
			c.RBytes, c.RIOs, 5<<20, 48+16+6)
	}
}

package cgroupfs

import "testing"

// TestParsersDoNotAllocate: the per-tick parsers (io.stat into a reused
// slice, io.pressure) allocate nothing, so reading 10,000 workloads a tick
// leaves the garbage collector idle.
func TestParsersDoNotAllocate(t *testing.T) {
	stat := []byte("8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0\n" +
		"8:0 rbytes=90430464 wbytes=299008000 rios=8950 wios=1252 dbytes=50331648 dios=3021\n")
	dst := make([]DeviceIO, 0, 4)
	if n := testing.AllocsPerRun(100, func() { dst, _ = ParseIOStat(stat, dst) }); n != 0 {
		t.Errorf("ParseIOStat: %v allocations per call, want 0", n)
	}
	psi := []byte("some avg10=0.12 avg60=0.00 avg300=0.00 total=1234\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=56\n")
	if n := testing.AllocsPerRun(100, func() { _, _ = ParsePressure(psi) }); n != 0 {
		t.Errorf("ParsePressure: %v allocations per call, want 0", n)
	}
}

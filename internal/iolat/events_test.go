package iolat

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestRealEventsCount: the kernel half's change count (iolat.c's events,
// which lets a read skip an unchanged table) is readable without a system
// call and moves with the requests the sensor counts: 16 O_DIRECT reads of
// a disk of the test's own move it by at least 32, an issue and a
// completion each.
func TestRealEventsCount(t *testing.T) {
	testkit.NeedRoot(t)
	s, err := Open(Options{})
	testkit.Need(t, err == nil, "the I/O latency sensor cannot run here: %v", err)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close the sensor: %v", err)
		}
	})
	d := testkit.OwnDisk(t, 16)
	n0, ok := s.events()
	if !ok {
		t.Fatal("the change count is not readable: the kernel shares no memory of BPF globals (Linux 5.5+)")
	}
	f, err := os.OpenFile(d.Path, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // aligned for O_DIRECT
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	for i := range 16 {
		if _, err := f.ReadAt(buf, int64(i)*4096); err != nil {
			t.Fatal(err)
		}
	}
	// A read may return a moment before its completion is counted.
	var n1 uint64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n1, _ = s.events()
		if n1-n0 >= 32 || time.Now().After(deadline) {
			break
		}
	}
	if n1-n0 < 32 {
		t.Fatalf("16 reads moved the change count by %d, want at least 32", n1-n0)
	}
}

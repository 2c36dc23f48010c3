package devsensor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

func writeStat(t *testing.T, sys, name string, ios int) {
	t.Helper()
	dir := filepath.Join(sys, "class", "block", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("%d 0 %d 0 0 0 0 0 1 %d %d\n", ios, 8*ios, ios, 2*ios)
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDeviceReadsOncePerGap: within the minimum gap every consumer gets
// the same reading (the file is not read again), after it a new one; the
// caps added show in both; a closed sensor fails to read.
func TestDeviceReadsOncePerGap(t *testing.T) {
	sys := t.TempDir()
	writeStat(t, sys, "sdz1", 10)
	d, err := Open(sys, "sdz1", 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r1, err := d.Read(t0)
	if err != nil || r1.Stat.ReadIOs != 10 || r1.Stat.ReadSectors != 80 || !r1.At.Equal(t0) {
		t.Fatalf("first reading %+v, %v", r1, err)
	}
	writeStat(t, sys, "sdz1", 20)
	d.AddCaps(Caps{CappedSecs: 0.01, HeldSecs: 0.01, Bytes: 1000, IOs: 2})
	r2, err := d.Read(t0.Add(5 * time.Millisecond))
	if err != nil || r2.Stat != r1.Stat || !r2.At.Equal(t0) || r2.Caps.Bytes != 1000 {
		t.Fatalf("within the gap: %+v, %v; want the first reading (taken at t0) with the caps added", r2, err)
	}
	r3, err := d.Read(t0.Add(10 * time.Millisecond))
	if err != nil || r3.Stat.ReadIOs != 20 || !r3.At.Equal(t0.Add(10*time.Millisecond)) || r3.Caps.IOs != 2 {
		t.Fatalf("after the gap: %+v, %v; want a new reading", r3, err)
	}
	// A clock that went back (a consumer with its own clock) reads anew.
	writeStat(t, sys, "sdz1", 30)
	if r, err := d.Read(t0); err != nil || r.Stat.ReadIOs != 30 {
		t.Fatalf("earlier time: %+v, %v; want a new reading", r, err)
	}
	if got := r3.Caps.Sub(r1.Caps); got != (Caps{CappedSecs: 0.01, HeldSecs: 0.01, Bytes: 1000, IOs: 2}) {
		t.Errorf("caps over the window %+v", got)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := d.Read(t0.Add(time.Hour)); err == nil {
		t.Error("read after close succeeded")
	}
}

// TestOpenBadInput: an unknown device, an empty root and a name that is a
// path are refused with an error naming them.
func TestOpenBadInput(t *testing.T) {
	sys := t.TempDir()
	for _, c := range []struct{ root, name, want string }{
		{sys, "sdq", "sdq"},
		{"", "sda", "sysfs root"},
		{sys, "../sda", "../sda"},
		{sys, "", "device"},
	} {
		d, err := Open(c.root, c.name, 0)
		if err == nil {
			d.Close()
			t.Errorf("Open(%q, %q) succeeded", c.root, c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%q, %q): %v, want it to name %q", c.root, c.name, err, c.want)
		}
	}
}

// TestOpenSet: each device gets its sensor at its index, one whose
// counters cannot be opened a nil entry and a call of failed naming it;
// Named finds a sensor by its device's name; Close closes them all.
func TestOpenSet(t *testing.T) {
	sys := t.TempDir()
	writeStat(t, sys, "sdy", 1)
	writeStat(t, sys, "sdz", 2)
	var failed []string
	s := OpenSet(sys, []string{"sdy", "sdq", "sdz"}, 0, func(name string, err error) {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %v does not name %s", err, name)
		}
		failed = append(failed, name)
	})
	if len(s) != 3 || s[0] == nil || s[0].Name() != "sdy" || s[1] != nil || s[2] == nil || s[2].Name() != "sdz" {
		t.Fatalf("set %v, want sdy, none, sdz", s)
	}
	if len(failed) != 1 || failed[0] != "sdq" {
		t.Errorf("failed %v, want [sdq]", failed)
	}
	if s.Named("sdz") != s[2] || s.Named("sdq") != nil || s.Named("sdx") != nil {
		t.Errorf("Named: sdz %v, sdq %v, sdx %v", s.Named("sdz"), s.Named("sdq"), s.Named("sdx"))
	}
	s.Close()
	for _, d := range []*Device{s[0], s[2]} {
		if _, err := d.Read(time.Now()); err == nil {
			t.Errorf("%s read after the set was closed", d.Name())
		}
	}
	Set(nil).Close()
}

// TestRealDeviceCounts: on a real loop device, a reading after 1 MiB of
// O_DIRECT reads counts them.
func TestRealDeviceCounts(t *testing.T) {
	loop := testkit.LoopDevice(t, 16)
	d, err := Open("/sys", loop.Name, time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r0, err := d.Read(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(loop.Path, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	r1, err := d.Read(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := r1.Stat.Bytes() - r0.Stat.Bytes(); got < 1<<20 {
		t.Errorf("device counted %d bytes read, want at least 1 MiB", got)
	}
	if r1.Stat.IOs() <= r0.Stat.IOs() {
		t.Errorf("device counted no request: %+v then %+v", r0.Stat, r1.Stat)
	}
}

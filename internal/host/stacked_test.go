package host

import (
	"path/filepath"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

func TestLowersFakeTree(t *testing.T) {
	t.Parallel()
	devs := []Device{
		{Name: "dm-0", Dev: "253:0", Slaves: []string{"sda", "sdb"}},
		{Name: "sda", Dev: "8:0"}, {Name: "sdb", Dev: "8:16"},
		{Name: "loop3", Dev: "7:3", BackingFile: filepath.Join(t.TempDir(), "missing.img")},
	}
	got := Lowers(DefaultRoots(), devs)
	if len(got) != 1 || len(got["253:0"]) != 2 || got["253:0"][0] != "8:0" || got["253:0"][1] != "8:16" {
		t.Fatalf("Lowers = %v", got)
	}
}

// A loop device over a file on this machine's disk has that disk below it.
func TestRealLowersLoop(t *testing.T) {
	if testkit.InVM() {
		t.Skip("host test")
	}
	loop := testkit.LoopDevice(t, 8)
	devs, err := BlockDevices(DefaultRoots(), IOHierarchy{}, mech.Params{})
	if err != nil {
		t.Fatal(err)
	}
	disk, err := diskOfFile(DefaultRoots(), loop.File)
	if err != nil {
		t.Fatal(err)
	}
	var diskDev string
	for _, d := range devs {
		if d.Name == disk {
			diskDev = d.Dev
		}
	}
	got := Lowers(DefaultRoots(), devs)[loop.Dev()]
	if len(got) != 1 || got[0] != diskDev {
		t.Fatalf("lowers of %s (over %s on %s %s) = %v", loop.Name, loop.File, disk, diskDev, got)
	}
	if byName := LowerOf(DefaultRoots(), loop.Name); len(byName) != 1 || byName[0] != disk {
		t.Fatalf("LowerOf(%s) = %v, want [%s]", loop.Name, byName, disk)
	}
	if byName := LowerOf(DefaultRoots(), disk); len(byName) != 0 {
		t.Fatalf("LowerOf(%s), a disk of its own, = %v, want none", disk, byName)
	}
}

package testkit

// A fake cgroup tree for unit tests: files in temporary directories, laid
// out as the kernel lays them out, for code whose root is a value.

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeV1Files are the v1 blkio throttle limit files FakeV1Throttle makes
// in each of its cgroups, empty (no limit).
var fakeV1Files = []string{"blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device",
	"blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device"}

// FakeV1Throttle makes a v1 blkio hierarchy in a temporary directory
// holding the cgroup "/p" and the given cgroups (below it), each with the
// empty fakeV1Files and a blkio.throttle.io_service_bytes_recursive of
// "Total 0", and a sysfs in another whose class/block/loop0/stat counts
// nothing: enough for a throttle to run on loop0 (7:0). It returns the
// hierarchy's mount point and the sysfs root; the test moves the counters
// by writing those files.
func FakeV1Throttle(t testing.TB, cgroups ...string) (mount, sys string) {
	t.Helper()
	mount, sys = t.TempDir(), t.TempDir()
	for _, cg := range append([]string{"/p"}, cgroups...) {
		dir := filepath.Join(mount, cg)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, file := range fakeV1Files {
			if err := os.WriteFile(filepath.Join(dir, file), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "blkio.throttle.io_service_bytes_recursive"), []byte("Total 0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat := filepath.Join(sys, "class", "block", "loop0")
	if err := os.MkdirAll(stat, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stat, "stat"), []byte("0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return mount, sys
}

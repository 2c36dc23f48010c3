package testkit

// The environment the test rigs read, in one place: what CI requires, where
// a test runs, which disk the test VM gives it. test/vm/init sets the VM's.

import (
	"os"
	"testing"
)

const (
	// EnvRequireReal=1 turns every missing prerequisite into a failure
	// (make test, CI).
	EnvRequireReal = "DDISKQOS_REQUIRE_REAL"
	// EnvInVM=1 inside the test VM (go test -exec vmexec).
	EnvInVM = "DDISKQOS_IN_VM"
	// EnvVMDisk is the test VM's disk, the test's own (/dev/vda).
	EnvVMDisk = "DDISKQOS_VM_DISK"
)

// Strict reports whether missing prerequisites fail tests instead of
// skipping them.
func Strict() bool { return os.Getenv(EnvRequireReal) == "1" }

// InVM reports whether the test runs inside the nested test VM (vmexec).
func InVM() bool { return os.Getenv(EnvInVM) == "1" }

// VMDiskPath is the test VM's disk as its init named it ("" outside the
// VM); VMDisk is the same as a Disk.
func VMDiskPath() string { return os.Getenv(EnvVMDisk) }

// VMOnly skips t outside the test VM: a cgroup-v2 test, which make test
// runs inside it (make test-v2). Not a missing prerequisite: it skips in
// strict mode too, since the VM run covers it.
func VMOnly(t testing.TB) {
	t.Helper()
	if !InVM() {
		t.Skip("cgroup v2 tests run inside the test VM: make test-v2")
	}
}

// HostOnly skips t inside the test VM: a test of the host's cgroup v1
// (the VM mounts cgroup v2 only), which make test runs on the host.
func HostOnly(t testing.TB) {
	t.Helper()
	if InVM() {
		t.Skip("v1 host test: the test VM mounts cgroup v2 only")
	}
}

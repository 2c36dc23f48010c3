package host

import (
	"os"
	"path/filepath"
	"testing"
)

func TestThrottleForgivesRequestDebt(t *testing.T) {
	t.Parallel()
	for release, want := range map[string]bool{
		"6.18.44-fc-v657":         true,  // this machine's host
		"6.1.0-56-amd64":          false, // the test VM's Debian kernel
		"6.16.0":                  true,
		"6.15.11-200.fc42.x86_64": false,
		"7.0-rc1":                 true,
		"5.15.0-91-generic":       false,
		"garbage":                 false,
		"":                        false,
	} {
		if got := ThrottleForgivesRequestDebt(release); got != want {
			t.Errorf("ThrottleForgivesRequestDebt(%q) = %v, want %v", release, got, want)
		}
	}
}

func TestKernelRelease(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "sys", "kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "sys", "kernel", "osrelease"), []byte("6.1.0-56-amd64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := KernelRelease(Roots{Proc: proc}); err != nil || r != "6.1.0-56-amd64" {
		t.Fatalf("KernelRelease = %q, %v", r, err)
	}
	if _, err := KernelRelease(Roots{Proc: filepath.Join(proc, "none")}); err == nil {
		t.Fatal("KernelRelease of a missing file: no error")
	}
	if _, _, err := KernelVersion("6"); err == nil {
		t.Fatal(`KernelVersion("6"): no error`)
	}
}
